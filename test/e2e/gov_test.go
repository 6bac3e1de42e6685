package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// proposalJSON is `gpunet gov show ID -o json`.
type proposalJSON struct {
	ID            uint64 `json:"id"`
	Status        string `json:"status"`
	VotingEnd     uint64 `json:"voting_end"`
	DecidedHeight uint64 `json:"decided_height"`
	Reason        string `json:"reason"`
	Voters        uint64 `json:"voters"`
}

// TestGovParamChangeOnFourValidators: four validator processes (gpunet init
// --validators 4, each bonded at genesis, with short governance periods
// from --genesis-params). A change out of bounds is refused when proposed;
// a change of min_fee is proposed by node0's operator, voted yes by three
// of the four operators through three different nodes, and applied at one
// height on every node: each reports the proposal passed at the same
// decided height, the new value from that height on, the old one at the
// height before, and a param_changed event in that block.
func TestGovParamChangeOnFourValidators(t *testing.T) {
	parallel(t, weightHeavy)
	root := t.TempDir()
	params := filepath.Join(root, "params.json")
	if err := os.WriteFile(params, []byte(`{"gov_deposit_blocks": 20, "gov_voting_blocks": 75, "gov_min_deposit": 5000000}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var net struct {
		Homes []string `json:"homes"`
	}
	initNet(t, &net, "--validators", "4", "--home", filepath.Join(root, "net"), "--chain-id", "e2e",
		"--block-time", "200ms", "--genesis-params", params)
	if len(net.Homes) != 4 {
		t.Fatalf("init: %d homes", len(net.Homes))
	}
	apis := make([]string, 4)
	for i, home := range net.Homes {
		p := startProc(t, fmt.Sprintf("node%d", i), "node", "--home", home, "--output", "json")
		var info struct {
			API string `json:"api"`
		}
		p.jsonLine(60*time.Second, &info)
		apis[i] = info.API
	}
	waitUntil(t, 60*time.Second, "all four nodes past height 2", func() bool {
		for _, a := range apis {
			if nodeHeight(t, a) < 2 {
				return false
			}
		}
		return true
	})

	// Out of bounds, and too large a step: refused, with the bound named.
	wantFail(t, 1, []string{"protocol_fee_bps=6000", "protocol_fee_bps must be in [0, 5000]"},
		"gov", "propose", "param", "protocol_fee_bps=6000", "--from", "operator", "--home", net.Homes[0], "--node", apis[0])
	wantFail(t, 1, []string{"more than one proposal may"},
		"gov", "propose", "param", "min_fee=500000", "--from", "operator", "--home", net.Homes[0], "--node", apis[0])

	var prop struct {
		Proposal uint64 `json:"proposal"`
		Status   string `json:"status"`
		Code     uint32 `json:"code"`
	}
	gpunetJSON(t, &prop, "gov", "propose", "param", "min_fee=2000", "--from", "operator", "--home", net.Homes[0], "--node", apis[0])
	if prop.Proposal != 1 || prop.Status != "voting" || prop.Code != 0 {
		t.Fatalf("propose: %+v, want proposal 1 voting (the default deposit is the minimum)", prop)
	}
	for i := range 3 {
		var res struct {
			Code uint32 `json:"code"`
		}
		gpunetJSON(t, &res, "gov", "vote", "1", "yes", "--from", "operator", "--home", net.Homes[i], "--node", apis[i])
	}
	show := func(api string) proposalJSON {
		var p proposalJSON
		gpunetJSON(t, &p, "gov", "show", "1", "--node", api)
		return p
	}
	waitUntil(t, 60*time.Second, "proposal 1 decided on node0", func() bool {
		ctx, cancel := pollCtx(t)
		defer cancel()
		p, err := nodeAPI(t, "", apis[0]).Proposal(ctx, 1)
		return err == nil && p.DecidedHeight > 0
	})
	decided := show(apis[0])
	if decided.Status != "passed" || decided.Voters != 3 || decided.DecidedHeight != decided.VotingEnd+1 {
		t.Fatalf("proposal 1: %+v, want passed by 3 voters, decided at voting_end+1", decided)
	}
	h := int64(decided.DecidedHeight)
	for i, api := range apis {
		waitUntil(t, 30*time.Second, fmt.Sprintf("node%d at height %d", i, h), func() bool { return nodeHeight(t, api) >= h })
		if p := show(api); p.Status != "passed" || p.DecidedHeight != decided.DecidedHeight {
			t.Errorf("node%d: proposal 1 %+v, want passed at height %d", i, p, h)
		}
		var table map[string]struct {
			Value uint64 `json:"value"`
			Min   uint64 `json:"min"`
			Max   uint64 `json:"max"`
		}
		gpunetJSON(t, &table, "query", "params", "--node", api)
		if got := table["min_fee"]; got.Value != 2000 || got.Max == 0 {
			t.Errorf("node%d: query params min_fee %+v, want value 2000 with its bounds", i, got)
		}
		// The block at the decided height changed it, and says so.
		if evs := blockEvents(t, api, h); !strings.Contains(evs, `"param_changed"`) || !strings.Contains(evs, `"min_fee"`) {
			t.Errorf("node%d: block %d's events have no param_changed of min_fee: %s", i, h, evs)
		}
		if evs := blockEvents(t, api, h-1); strings.Contains(evs, `"param_changed"`) {
			t.Errorf("node%d: block %d already changed a parameter: %s", i, h-1, evs)
		}
	}
	t.Logf("min_fee 1000 → 2000 applied at height %d on all four nodes (voting ended at %d)", h, decided.VotingEnd)
}

// blockEvents returns the JSON of block h's own events, from node api.
func blockEvents(t *testing.T, api string, h int64) string {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://%s/v1/blocks/%d", strings.TrimPrefix(api, "http://"), h))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b struct {
		Events json.RawMessage `json:"events"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil || resp.StatusCode != 200 {
		t.Fatalf("block %d from %s: %v (HTTP %d)", h, api, err, resp.StatusCode)
	}
	return string(b.Events)
}

// nodeHeight is the height a node reports, or -1 while it does not answer.
func nodeHeight(t *testing.T, api string) int64 {
	t.Helper()
	ctx, cancel := pollCtx(t)
	defer cancel()
	st, err := nodeAPI(t, "", api).Status(ctx)
	if err != nil {
		return -1
	}
	return st.Height
}
