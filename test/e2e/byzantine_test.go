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

	"github.com/gpunet/gpunet/internal/validator"
)

// TestByzantineDoubleSigner runs four validators of equal power, one of
// them Byzantine: node3's validator key runs in two processes at once (a
// twin with its own node key, ports and empty signing state), so the key
// can sign two different votes or proposals at one height. With three
// honest validators (30 of 40 votes) the chain must go on, every node
// must report one app hash per height, and a transfer must commit. The
// double sign must really happen and be seen: at each height where node3's
// key proposes, node3 and the twin each propose a block of their own (their
// last commits differ) and prevote it, and node0 must commit
// DuplicateVoteEvidence against the key (in runs here, at the first or
// second such height); the ledger then slashes and tombstones the key
// (query validators) and CometBFT's set drops it.
func TestByzantineDoubleSigner(t *testing.T) {
	parallel(t, weightHeavy)
	root := t.TempDir()
	keyHome := filepath.Join(root, "keys")
	var alice, bob keyJSON
	gpunetJSON(t, &alice, "keys", "add", "alice", "--home", keyHome)
	gpunetJSON(t, &bob, "keys", "add", "bob", "--home", keyHome)
	var net struct {
		Homes []string `json:"homes"`
	}
	initNet(t, &net, "--validators", "4", "--home", filepath.Join(root, "net"),
		"--chain-id", "e2e", "--block-time", "200ms", "--account", alice.Address+"=1000sync")
	if len(net.Homes) != 4 {
		t.Fatalf("init wrote %d homes, want 4", len(net.Homes))
	}

	// The twin: node3's home (validator key, genesis, fresh signing
	// state) with a node key and ports of its own.
	twin := filepath.Join(root, "twin")
	if err := os.CopyFS(twin, os.DirFS(net.Homes[3])); err != nil {
		t.Fatal(err)
	}
	spare := filepath.Join(root, "spare")
	gpunet(t, withoutHWChallenges([]string{"init", "--home", spare, "--chain-id", "spare"})...)
	nodeKey, err := os.ReadFile(filepath.Join(spare, "config/node_key.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(twin, "config/node_key.json"), nodeKey, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := validator.LoadConfig(twin)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Moniker = "node3-twin"
	for _, p := range []*string{&cfg.API, &cfg.P2P, &cfg.RPC} {
		if *p, err = validator.FreeAddr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := validator.SaveConfig(twin, cfg); err != nil {
		t.Fatal(err)
	}

	book := newHashBook()
	names := []string{"node0", "node1", "node2", "node3", "node3-twin"}
	homes := append(append([]string{}, net.Homes...), twin)
	apis := make([]string, len(names))
	for i, name := range names {
		p := startProc(t, name, "node", "--home", homes[i], "--output", "json")
		var info struct {
			API string `json:"api"`
		}
		p.jsonLine(60*time.Second, &info)
		apis[i] = info.API
		watch(t, book, name, info.API)
	}
	honest := names[:3]
	waitUntil(t, 60*time.Second, "the honest validators at height 3", func() bool { return book.minHeight(honest...) >= 3 })
	h := book.minHeight(honest...)
	// Long enough for the twin to catch up and sign alongside node3.
	waitUntil(t, 90*time.Second, "15 more blocks with a double-signing validator", func() bool { return book.minHeight(honest...) >= h+15 })
	var tx txJSON
	gpunetJSON(t, &tx, "tx", "send", bob.Address, "5sync", "--from", "alice", "--home", keyHome, "--node", apis[0])
	if tx.Code != 0 || tx.Height <= 0 {
		t.Fatalf("transfer with a double-signing validator: %+v", tx)
	}
	waitUntil(t, 30*time.Second, "a height all honest nodes report after the transfer", func() bool {
		return len(book.commonHeights(tx.Height+1, honest...)) > 0
	})
	book.check(t)

	// The double sign itself: node3's key and its twin sign conflicting
	// votes (two proposals of their own, or a block and nil), an honest
	// validator that sees both reports them to its evidence pool, and a
	// later proposer commits the DuplicateVoteEvidence. Read node0's blocks
	// through CometBFT's RPC: the ledger's /v1/blocks does not show
	// evidence.
	byz := validatorAddress(t, net.Homes[3])
	rpc0 := rpcAddr(t, net.Homes[0])
	var ev *duplicateVote
	next := int64(1)
	waitUntil(t, 60*time.Second, "DuplicateVoteEvidence against node3's key committed on node0", func() bool {
		for ; ev == nil && next <= book.maxHeight("node0"); next++ {
			ev = duplicateVoteIn(t, rpc0, next, byz)
		}
		return ev != nil
	})
	t.Logf("DuplicateVoteEvidence committed at height %d: node3's key signed two %s votes at height %d round %d (blocks %.8s… and %.8s…)",
		ev.committed, ev.kind, ev.height, ev.round, hashOrNil(ev.blockA), hashOrNil(ev.blockB))

	// The ledger slashes the key 5% of its bond (params.double_sign_slash_ppm)
	// and tombstones it: out of the set for good.
	waitUntil(t, 30*time.Second, "node3's validator tombstoned in the ledger", func() bool {
		st, power, slashed, _, _ := queryValidators(t, apis[0]).find(byz)
		if st == "tombstoned" && (power != 0 || slashed != 5_000_000) {
			t.Fatalf("node3 tombstoned with power %d, slashed %d; want 0 and 5000000 (5%% of 100 SYNC)", power, slashed)
		}
		return st == "tombstoned"
	})
	waitUntil(t, 30*time.Second, "node3's key out of CometBFT's set", func() bool {
		for _, v := range status(t, "--node", apis[0]).Validators {
			if strings.EqualFold(v.Address, byz) {
				return false
			}
		}
		return true
	})
	r := gpunet(t, "validator", "unjail", "--from", "operator", "--home", net.Homes[3], "--node", apis[0])
	if r.code == 0 || !strings.Contains(r.stderr, "tombstoned") {
		t.Errorf("unjail of a tombstoned validator: want refused:\n%s", r)
	}

	for _, i := range []int{0, 1, 2} {
		if got := balance(t, bob.Address, "--home", keyHome, "--node", apis[i]); got != 5_000_000 {
			t.Errorf("%s: bob's balance %d, want 5000000", names[i], got)
		}
	}
	t.Logf("heights %d → %d with node3's key in two processes (node3 at %d, twin at %d); %d heights compared, no disagreement",
		h, book.maxHeight(honest...), book.maxHeight("node3"), book.maxHeight("node3-twin"), book.compared)
}

// validatorAddress returns the consensus address (hex) of home's validator
// key.
func validatorAddress(t *testing.T, home string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(home, "config/priv_validator_key.json"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Address string `json:"address"`
	}
	if err := json.Unmarshal(b, &k); err != nil || k.Address == "" {
		t.Fatalf("validator key of %s: %v (address %q)", home, err, k.Address)
	}
	return k.Address
}

// rpcAddr returns home's CometBFT RPC address (host:port).
func rpcAddr(t *testing.T, home string) string {
	t.Helper()
	cfg, err := validator.LoadConfig(home)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RPC == "" {
		t.Fatalf("%s has CometBFT's RPC disabled", home)
	}
	return cfg.RPC
}

// duplicateVote is a DuplicateVoteEvidence as a block carries it.
type duplicateVote struct {
	committed      int64 // the block that carries it
	height         int64 // the votes'
	round          int
	kind           string // prevote or precommit
	blockA, blockB string // the block hashes voted for, "" for nil
}

// duplicateVoteIn returns the first DuplicateVoteEvidence against the
// validator addr in block height, read from CometBFT's RPC at rpc, or nil.
func duplicateVoteIn(t *testing.T, rpc string, height int64, addr string) *duplicateVote {
	t.Helper()
	type vote struct {
		Type             int    `json:"type"`
		Height           int64  `json:"height,string"`
		Round            int    `json:"round"`
		ValidatorAddress string `json:"validator_address"`
		BlockID          struct {
			Hash string `json:"hash"`
		} `json:"block_id"`
	}
	var r struct {
		Result struct {
			Block struct {
				Evidence struct {
					Evidence []struct {
						Type  string `json:"type"`
						Value struct {
							VoteA vote `json:"vote_a"`
							VoteB vote `json:"vote_b"`
						} `json:"value"`
					} `json:"evidence"`
				} `json:"evidence"`
			} `json:"block"`
		} `json:"result"`
	}
	resp, err := http.Get(fmt.Sprintf("http://%s/block?height=%d", rpc, height))
	if err != nil {
		t.Fatalf("block %d from CometBFT's RPC: %v", height, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("block %d from CometBFT's RPC: %v", height, err)
	}
	for _, e := range r.Result.Block.Evidence.Evidence {
		a, b := e.Value.VoteA, e.Value.VoteB
		if e.Type != "tendermint/DuplicateVoteEvidence" || !strings.EqualFold(a.ValidatorAddress, addr) {
			continue
		}
		// What makes it evidence: one key, one height, round and type, two
		// different blocks.
		if b.ValidatorAddress != a.ValidatorAddress || b.Height != a.Height || b.Round != a.Round || b.Type != a.Type || b.BlockID.Hash == a.BlockID.Hash {
			t.Fatalf("block %d: DuplicateVoteEvidence whose votes do not conflict: %+v", height, e.Value)
		}
		kind := map[int]string{1: "prevote", 2: "precommit"}[a.Type]
		return &duplicateVote{committed: height, height: a.Height, round: a.Round, kind: kind, blockA: a.BlockID.Hash, blockB: b.BlockID.Hash}
	}
	return nil
}

func hashOrNil(hash string) string {
	if hash == "" {
		return "nil"
	}
	return hash
}
