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

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/validator"
)

// validatorsJSON is `gpunet query validators -o json`.
type validatorsJSON struct {
	Managed    bool `json:"managed"`
	TotalPower int  `json:"total_power"`
	Validators []struct {
		Address     string `json:"address"`
		Operator    string `json:"operator"`
		Moniker     string `json:"moniker"`
		Status      string `json:"status"`
		Power       int64  `json:"power"`
		Bond        uint64 `json:"bond"`
		Missed      uint64 `json:"missed"`
		Slashed     uint64 `json:"slashed"`
		JailedUntil int64  `json:"jailed_until"`
	} `json:"validators"`
	Height int64 `json:"height"`
}

func queryValidators(t testing.TB, node string) validatorsJSON {
	t.Helper()
	var v validatorsJSON
	gpunetJSON(t, &v, "query", "validators", "--node", node)
	return v
}

// validatorIn returns the validator with consensus address addr (hex).
func (v validatorsJSON) find(addr string) (status string, power int64, slashed uint64, jailedUntil int64, ok bool) {
	for _, x := range v.Validators {
		if strings.EqualFold(x.Address, addr) {
			return x.Status, x.Power, x.Slashed, x.JailedUntil, true
		}
	}
	return "", 0, 0, 0, false
}

// commitSigners returns the validator addresses whose signatures are in
// the commit of block height, read from CometBFT's RPC at rpc.
func commitSigners(t testing.TB, rpc string, height int64) []string {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://%s/commit?height=%d", rpc, height))
	if err != nil {
		t.Fatalf("commit %d from CometBFT's RPC: %v", height, err)
	}
	defer resp.Body.Close()
	var r struct {
		Result struct {
			SignedHeader struct {
				Commit struct {
					Signatures []struct {
						BlockIDFlag      int    `json:"block_id_flag"`
						ValidatorAddress string `json:"validator_address"`
					} `json:"signatures"`
				} `json:"commit"`
			} `json:"signed_header"`
		} `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("commit %d: %v", height, err)
	}
	var out []string
	for _, s := range r.Result.SignedHeader.Commit.Signatures {
		if s.BlockIDFlag == 2 { // BlockIDFlagCommit
			out = append(out, s.ValidatorAddress)
		}
	}
	return out
}

// TestValidatorSetChanges: a network of three validators bonded at genesis
// (gpunet init --validators 3) and a fourth home, a full node following
// the chain, whose operator bonds stake for its consensus key: it enters
// the set (query validators, status) and signs blocks. Then a stopped
// validator is jailed for downtime and slashed while the chain goes on, and
// `validator unjail` brings it back. Bad input (a validator created twice,
// below the minimum stake, a bad key, a key without its proof of
// possession) is refused with a clear error and costs only the fee.
//
// The fourth home is written by hand (init, then node0's genesis and the
// validators as persistent peers): helper B's `init --join` was not in when
// this was written.
func TestValidatorSetChanges(t *testing.T) {
	parallel(t, weightLight)
	root := t.TempDir()
	keyHome := filepath.Join(root, "keys")
	var alice keyJSON
	gpunetJSON(t, &alice, "keys", "add", "alice", "--home", keyHome)
	params := filepath.Join(root, "params.json")
	// Jailed after missing 16 of 30 blocks (6 s at 200 ms), for 10 blocks.
	if err := os.WriteFile(params, []byte(`{"downtime_window": 30, "downtime_max_missed": 15, "jail_blocks": 10}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var net struct {
		Homes []string `json:"homes"`
	}
	initNet(t, &net, "--validators", "3", "--home", filepath.Join(root, "net"), "--chain-id", "e2e",
		"--block-time", "200ms", "--account", alice.Address+"=1000sync", "--genesis-params", params)

	// The full node: a home of its own (keys, ports) on the network's
	// genesis, peered with the validators.
	full := filepath.Join(root, "full")
	gpunet(t, withoutHWChallenges([]string{"init", "--home", full, "--chain-id", "e2e", "--validator-stake", "0"})...)
	gen, err := os.ReadFile(filepath.Join(net.Homes[0], "config/genesis.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "config/genesis.json"), gen, 0o600); err != nil {
		t.Fatal(err)
	}
	fcfg, err := validator.LoadConfig(full)
	if err != nil {
		t.Fatal(err)
	}
	c0, err := validator.LoadConfig(net.Homes[0])
	if err != nil {
		t.Fatal(err)
	}
	c1, err := validator.LoadConfig(net.Homes[1])
	if err != nil {
		t.Fatal(err)
	}
	fcfg.PersistentPeers = append(append([]string{}, c0.PersistentPeers...), c1.PersistentPeers[0]) // node1, node2, node0
	fcfg.Moniker = "full"
	if err := validator.SaveConfig(full, fcfg); err != nil {
		t.Fatal(err)
	}
	var op keyJSON
	gpunetJSON(t, &op, "keys", "add", "op", "--home", full)

	book := newHashBook()
	names := []string{"node0", "node1", "node2", "full"}
	homes := append(append([]string{}, net.Homes...), full)
	nodes := make([]*proc, 4)
	apis := make([]string, 4)
	start := func(i int) {
		nodes[i] = startProc(t, names[i], "node", "--home", homes[i], "--output", "json")
		var info struct {
			API string `json:"api"`
		}
		nodes[i].jsonLine(60*time.Second, &info)
		apis[i] = info.API
		watch(t, book, names[i], info.API)
	}
	for i := range nodes {
		start(i)
	}
	waitUntil(t, 60*time.Second, "all four nodes at height 3", func() bool { return book.minHeight(names...) >= 3 })
	vs := queryValidators(t, apis[0])
	if !vs.Managed || len(vs.Validators) != 3 || vs.TotalPower != 300 {
		t.Fatalf("genesis validators: %+v, want 3 bonded at 100 each", vs)
	}

	// The full node takes txs once it has left block sync (CometBFT
	// refuses them before: "endpoint is closed while node is catching
	// up"), which a loaded machine can delay past height 3.
	waitUntil(t, 60*time.Second, "the full node caught up", func() bool {
		var st apiwire.StatusBody
		return getJSON(apis[3]+"/v1/status", &st) == nil && !st.CatchingUp
	})
	// Fund the full node's operator, then bond 150 SYNC for its key.
	var tx txJSON
	gpunetJSON(t, &tx, "tx", "send", op.Address, "300sync", "--from", "alice", "--home", keyHome, "--node", apis[0])
	bad := []struct {
		args []string
		want string
	}{
		{[]string{"--stake", "9sync"}, "below params.min_validator_stake"},
		{[]string{"--stake", "100sync", "--pubkey", "abcd"}, "not an ed25519 public key"},
		{[]string{"--stake", "100sync", "--pubkey", strings.Repeat("ab", 32), "--pop", strings.Repeat("ef", 64), "--from", "nobody"}, "nobody"},
		{[]string{"--stake", "100sync", "--pubkey", strings.Repeat("ab", 32)}, "--pubkey needs --pop"},
	}
	for _, b := range bad {
		r := gpunet(t, append([]string{"validator", "create", "--home", full, "--node", apis[3], "--from", "op"}, b.args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, b.want) {
			t.Errorf("validator create %v: want a failure saying %q:\n%s", b.args, b.want, r)
		}
	}
	fullAddr := validatorAddress(t, full)
	var created struct {
		Validator string `json:"validator"`
		Height    int64  `json:"height"`
		Code      uint32 `json:"code"`
	}
	gpunetJSON(t, &created, "validator", "create", "--from", "op", "--stake", "150sync", "--moniker", "full", "--home", full, "--node", apis[3])
	if created.Code != 0 || !strings.EqualFold(created.Validator, fullAddr) {
		t.Fatalf("validator create: %+v, want validator %s", created, fullAddr)
	}
	before := balance(t, op.Address, "--node", apis[0])
	// A second validator, its key's proof made where the key is (node1;
	// `validator pop`) and sent with --pubkey --pop.
	var pop struct {
		PubKey string `json:"pub_key"`
		PoP    string `json:"pop"`
	}
	gpunetJSON(t, &pop, "validator", "pop", "--operator", op.Address, "--home", net.Homes[1])
	r := gpunet(t, "validator", "create", "--from", "op", "--stake", "20sync", "--home", full, "--node", apis[3], "--pubkey", pop.PubKey, "--pop", pop.PoP)
	if r.code == 0 || !strings.Contains(r.stderr, "already has validator") {
		t.Errorf("a second validator for one operator: want refused:\n%s", r)
	}
	if after := balance(t, op.Address, "--node", apis[0]); after < before-1_000_000 || after > before {
		t.Errorf("refused create changed op's balance %d → %d (more than a fee)", before, after)
	}
	st, power, _, _, ok := queryValidators(t, apis[0]).find(fullAddr)
	if !ok || st != "bonded" || power != 150 {
		t.Fatalf("the new validator: status %q power %d (found %v), want bonded 150", st, power, ok)
	}
	waitUntil(t, 30*time.Second, "the new validator in CometBFT's set (status)", func() bool {
		for _, v := range status(t, "--node", apis[0]).Validators {
			if strings.EqualFold(v.Address, fullAddr) && v.VotingPower == 150 {
				return true
			}
		}
		return false
	})
	rpc0 := rpcAddr(t, net.Homes[0])
	var signedAt int64
	waitUntil(t, 30*time.Second, "a commit signed by the new validator", func() bool {
		h := book.maxHeight("node0") - 1
		for _, a := range commitSigners(t, rpc0, h) {
			if strings.EqualFold(a, fullAddr) {
				signedAt = h
				return true
			}
		}
		return false
	})
	t.Logf("validator %s created at height %d, signed block %d", fullAddr, created.Height, signedAt)

	// node2 stops: 350 of 450 votes go on; it misses blocks until jailed.
	node2 := validatorAddress(t, net.Homes[2])
	nodes[2].kill()
	up := []string{"node0", "node1", "full"}
	h := book.maxHeight(up...)
	var jailedUntil int64
	// 15 missed blocks, and a propose timeout at each of node2's turns:
	// a few seconds on an idle machine; a clean-clone CI run beside
	// benchmarks made 2-s blocks and took over a minute.
	waitUntil(t, 150*time.Second, "node2 jailed for downtime", func() bool {
		st, _, _, until, _ := queryValidators(t, apis[0]).find(node2)
		jailedUntil = until
		return st == "jailed"
	})
	waitUntil(t, 30*time.Second, "5 more blocks without node2", func() bool { return book.minHeight(up...) >= h+5 })
	_, _, slashed, _, _ := queryValidators(t, apis[0]).find(node2)
	if slashed != 1_000_000 { // 1% of 100 SYNC
		t.Errorf("node2 slashed %d for downtime, want 1000000 (1%% of its bond)", slashed)
	}

	// Back, it unjails once its jail time is over.
	start(2)
	waitUntil(t, 60*time.Second, "the chain past node2's jail time", func() bool { return book.maxHeight("node0") > jailedUntil })
	var unjail txJSON
	gpunetJSON(t, &unjail, "validator", "unjail", "--from", "operator", "--home", net.Homes[2], "--node", apis[0])
	if unjail.Code != 0 {
		t.Fatalf("unjail: %+v", unjail)
	}
	waitUntil(t, 30*time.Second, "node2 back in the set at power 99", func() bool {
		st, power, _, _, _ := queryValidators(t, apis[0]).find(node2)
		return st == "bonded" && power == 99
	})
	waitUntil(t, 30*time.Second, "node2 signing again", func() bool {
		h := book.maxHeight("node0") - 1
		for _, a := range commitSigners(t, rpc0, h) {
			if strings.EqualFold(a, node2) {
				return true
			}
		}
		return false
	})
	waitUntil(t, 30*time.Second, "all nodes at one height after node2's return", func() bool {
		return len(book.commonHeights(book.maxHeight("node0")-3, names...)) > 0
	})
	book.check(t)
}
