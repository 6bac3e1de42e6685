package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestDelegatorSlashedAndVotes: four validator processes, each bonded
// 100sync at genesis. alice, a holder with no stake of her own, delegates
// 20sync to node3's operator with `stake delegate` (the target's kind
// found on the chain); node3's process stops, it is jailed for downtime,
// and alice's delegation shrinks by params.downtime_slash_ppm, exactly, as
// node3's bond does. Then two text proposals, each voted yes by node0's
// operator and no by node1's (100sync each): the one alice leaves alone is
// rejected (a tie is not more than the 50% threshold), the one she votes
// yes on passes with her delegated stake in its yes.
func TestDelegatorSlashedAndVotes(t *testing.T) {
	parallel(t, weightHeavy)
	root := t.TempDir()
	keyHome := filepath.Join(root, "keys")
	var alice keyJSON
	gpunetJSON(t, &alice, "keys", "add", "alice", "--home", keyHome)
	params := filepath.Join(root, "params.json")
	// Jailed after missing 16 of 30 blocks (6 s at 200 ms); 75-block
	// voting periods (15 s) for the votes of several CLI calls.
	if err := os.WriteFile(params, []byte(`{"downtime_window": 30, "downtime_max_missed": 15, "gov_deposit_blocks": 20, "gov_voting_blocks": 75, "gov_min_deposit": 5000000}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var net struct {
		Homes []string `json:"homes"`
	}
	initNet(t, &net, "--validators", "4", "--home", filepath.Join(root, "net"), "--chain-id", "e2e",
		"--block-time", "200ms", "--account", alice.Address+"=1000sync", "--genesis-params", params)
	if len(net.Homes) != 4 {
		t.Fatalf("init: %d homes", len(net.Homes))
	}
	nodes := make([]*proc, 4)
	apis := make([]string, 4)
	for i, home := range net.Homes {
		nodes[i] = startProc(t, fmt.Sprintf("node%d", i), "node", "--home", home, "--output", "json")
		var info struct {
			API string `json:"api"`
		}
		nodes[i].jsonLine(60*time.Second, &info)
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
	var op3 keyJSON
	gpunetJSON(t, &op3, "keys", "show", "operator", "--home", net.Homes[3])

	// 20sync: node3 has 120 of 420, so the other three (300) keep more
	// than two thirds of the power without it.
	const delegated = 20_000_000
	var del struct {
		Code   uint32 `json:"code"`
		Target struct {
			Kind    string `json:"kind"`
			Address string `json:"address"`
		} `json:"target"`
		Amount uint64 `json:"amount"`
	}
	gpunetJSON(t, &del, "stake", "delegate", op3.Address, "20sync", "--from", "alice", "--home", keyHome, "--node", apis[0])
	if del.Code != 0 || del.Target.Kind != "validator" || del.Target.Address != op3.Address || del.Amount != delegated {
		t.Fatalf("stake delegate: %+v, want 20sync to validator %s", del, op3.Address)
	}
	node3 := validatorAddress(t, net.Homes[3])
	waitUntil(t, 10*time.Second, "node3 at power 120", func() bool {
		_, power, _, _, _ := queryValidators(t, apis[0]).find(node3)
		return power == 120
	})

	var table map[string]struct {
		Value uint64 `json:"value"`
	}
	gpunetJSON(t, &table, "query", "params", "--node", apis[0])
	rate := table["downtime_slash_ppm"].Value
	if rate == 0 {
		t.Fatalf("query params: no downtime_slash_ppm")
	}
	nodes[3].kill()
	waitUntil(t, 60*time.Second, "node3 jailed for downtime", func() bool {
		st, _, _, _, _ := queryValidators(t, apis[0]).find(node3)
		return st == "jailed"
	})
	wantDelegation := uint64(delegated) - uint64(delegated)*rate/1_000_000
	wantBondSlash := uint64(100_000_000) * rate / 1_000_000
	var ds struct {
		Delegations []struct {
			Target struct {
				Kind    string `json:"kind"`
				Address string `json:"address"`
			} `json:"target"`
			Amount uint64 `json:"amount"`
		} `json:"delegations"`
		Delegated uint64 `json:"delegated"`
	}
	gpunetJSON(t, &ds, "query", "delegations", alice.Address, "--node", apis[0])
	if len(ds.Delegations) != 1 || ds.Delegations[0].Target.Address != op3.Address || ds.Delegations[0].Amount != wantDelegation || ds.Delegated != wantDelegation {
		t.Errorf("alice's delegation after node3's downtime: %+v; want %d usync (20sync less %d ppm)", ds, wantDelegation, rate)
	}
	var v struct {
		Status    string `json:"status"`
		Bond      uint64 `json:"bond"`
		Slashed   uint64 `json:"slashed"`
		Delegated uint64 `json:"delegated"`
		Pool      struct {
			Slashed uint64 `json:"slashed"`
		} `json:"pool"`
	}
	gpunetJSON(t, &v, "query", "validator", op3.Address, "--node", apis[0])
	if v.Status != "jailed" || v.Slashed != wantBondSlash || v.Delegated != wantDelegation || v.Pool.Slashed != delegated-wantDelegation {
		t.Errorf("query validator %s: %+v; want jailed, bond slashed %d, delegated %d", op3.Address, v, wantBondSlash, wantDelegation)
	}
	t.Logf("node3 jailed: bond slashed %d, alice's delegation %d → %d (downtime_slash_ppm %d)", v.Slashed, delegated, wantDelegation, rate)

	// Two proposals; alice votes on the second only.
	for _, title := range []string{"without alice", "with alice"} {
		var prop struct {
			Proposal uint64 `json:"proposal"`
			Status   string `json:"status"`
		}
		gpunetJSON(t, &prop, "gov", "propose", "text", title, "--from", "operator", "--home", net.Homes[0], "--node", apis[0])
		if prop.Status != "voting" {
			t.Fatalf("propose %q: %+v, want voting at once", title, prop)
		}
	}
	for id := range []int{1, 2} {
		id := fmt.Sprint(id + 1)
		gpunetJSON(t, &txJSON{}, "gov", "vote", id, "yes", "--from", "operator", "--home", net.Homes[0], "--node", apis[0])
		gpunetJSON(t, &txJSON{}, "gov", "vote", id, "no", "--from", "operator", "--home", net.Homes[1], "--node", apis[1])
	}
	gpunetJSON(t, &txJSON{}, "gov", "vote", "2", "yes", "--from", "alice", "--home", keyHome, "--node", apis[2])
	type decided struct {
		Status        string `json:"status"`
		DecidedHeight uint64 `json:"decided_height"`
		Tally         struct {
			Yes uint64 `json:"yes"`
			No  uint64 `json:"no"`
		} `json:"tally"`
	}
	var p1, p2 decided
	waitUntil(t, 60*time.Second, "both proposals decided", func() bool {
		gpunetJSON(t, &p1, "gov", "show", "1", "--node", apis[0])
		gpunetJSON(t, &p2, "gov", "show", "2", "--node", apis[0])
		return p1.DecidedHeight > 0 && p2.DecidedHeight > 0
	})
	if p1.Status != "rejected" || p1.Tally.Yes != 100_000_000 || p1.Tally.No != 100_000_000 {
		t.Errorf("proposal 1 (alice silent): %+v; want rejected, 100sync yes and no", p1)
	}
	if p2.Status != "passed" || p2.Tally.Yes != 100_000_000+wantDelegation || p2.Tally.No != 100_000_000 {
		t.Errorf("proposal 2 (alice yes): %+v; want passed, yes 100sync + her %d", p2, wantDelegation)
	}
}
