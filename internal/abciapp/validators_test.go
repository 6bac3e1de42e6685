package abciapp

import (
	"encoding/json"
	"strings"
	"testing"

	abci "github.com/cometbft/cometbft/abci/types"
	cmtproto "github.com/cometbft/cometbft/api/cometbft/types/v1"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

func validatorGenesis() ledger.Genesis {
	g := lt.Genesis(1000_000_000, "alice", "v1", "v2")
	g.Params.DowntimeWindow, g.Params.DowntimeMaxMissed = 4, 1
	g.Validators = []ledger.GenesisValidator{lt.GenesisValidator("v1", 30_000_000), lt.GenesisValidator("v2", 20_000_000)}
	return g
}

func update(name string, power int64) abci.ValidatorUpdate {
	return abci.ValidatorUpdate{PubKeyType: "ed25519", PubKeyBytes: lt.ConsKey(name), Power: power}
}

// TestInitChainValidators: InitChain returns the ledger's genesis set, and
// refuses a genesis.json whose validators differ from it.
func TestInitChainValidators(t *testing.T) {
	st, _ := json.Marshal(validatorGenesis())
	for _, tc := range []struct {
		name string
		req  []abci.ValidatorUpdate
		want string // error; "" for success
	}{
		{"same set", []abci.ValidatorUpdate{update("v2", 20), update("v1", 30)}, ""},
		{"none in genesis.json", nil, ""},
		{"another power", []abci.ValidatorUpdate{update("v1", 10), update("v2", 20)}, "must agree"},
		{"another key", []abci.ValidatorUpdate{update("v1", 30), update("alice", 20)}, "must agree"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := openApp(t, t.TempDir())
			res, err := a.InitChain(t.Context(), &abci.InitChainRequest{ChainId: lt.ChainID, AppStateBytes: st, Validators: tc.req})
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v, want an error saying %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Validators) != 2 || res.Validators[0].PubKeyType != "ed25519" {
				t.Fatalf("InitChain returned %v, want v1 and v2", res.Validators)
			}
		})
	}
	// A genesis with no ledger validators leaves genesis.json's set alone.
	a := openApp(t, t.TempDir())
	st, _ = json.Marshal(lt.Genesis(1000, "alice"))
	res, err := a.InitChain(t.Context(), &abci.InitChainRequest{ChainId: lt.ChainID, AppStateBytes: st, Validators: []abci.ValidatorUpdate{update("v1", 10)}})
	if err != nil || len(res.Validators) != 0 {
		t.Fatalf("static set: %v, %v", res.Validators, err)
	}
}

// TestFinalizeBlockValidatorUpdates: the last commit's votes reach the
// ledger (a validator absent too often is jailed) and its removal comes
// back as a ValidatorUpdate of power 0; evidence tombstones.
func TestFinalizeBlockValidatorUpdates(t *testing.T) {
	a := openApp(t, t.TempDir())
	st, _ := json.Marshal(validatorGenesis())
	if _, err := a.InitChain(t.Context(), &abci.InitChainRequest{ChainId: lt.ChainID, AppStateBytes: st}); err != nil {
		t.Fatal(err)
	}
	addr := func(n string) []byte { c := ledger.ConsAddressOf(lt.ConsKey(n)); return c[:] }
	commitInfo := abci.CommitInfo{Votes: []abci.VoteInfo{
		{Validator: abci.Validator{Address: addr("v1"), Power: 30}, BlockIdFlag: cmtproto.BlockIDFlagCommit},
		{Validator: abci.Validator{Address: addr("v2"), Power: 20}, BlockIdFlag: cmtproto.BlockIDFlagAbsent},
	}}
	var removed bool
	h := int64(0)
	for h < 3 && !removed {
		h++
		res, err := a.FinalizeBlock(t.Context(), &abci.FinalizeBlockRequest{Height: h, Time: lt.BlockTime(h), DecidedLastCommit: commitInfo})
		if err != nil {
			t.Fatal(err)
		}
		commit(t, a)
		for _, u := range res.ValidatorUpdates {
			if string(u.PubKeyBytes) == string(lt.ConsKey("v2")) && u.Power == 0 && u.PubKeyType == "ed25519" {
				removed = true
			}
		}
	}
	if !removed {
		t.Fatal("v2 missed every block of a window of 4 (at most 1 allowed) and was not removed")
	}
	h++
	res, err := a.FinalizeBlock(t.Context(), &abci.FinalizeBlockRequest{Height: h, Time: lt.BlockTime(h), Misbehavior: []abci.Misbehavior{
		{Type: abci.MISBEHAVIOR_TYPE_DUPLICATE_VOTE, Validator: abci.Validator{Address: addr("v1"), Power: 30}, Height: h - 1, Time: lt.BlockTime(h - 1)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	commit(t, a)
	// v1 is tombstoned, v2 jailed: no validator qualifies, so the set
	// stays as it is rather than empty (CometBFT would halt).
	if len(res.ValidatorUpdates) != 0 {
		t.Fatalf("updates %v, want none: the set never empties", res.ValidatorUpdates)
	}
	kv, release := a.View()
	defer release()
	vs, err := ledger.Validators(kv)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Address == ledger.ConsAddressOf(lt.ConsKey("v1")) && v.Status != ledger.StatusTombstoned {
			t.Fatalf("v1 after evidence: %s", v.Status)
		}
	}
}
