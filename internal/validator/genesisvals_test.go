package validator

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// TestInitProvesGenesisValidators: `init --validators N` bonds each node's
// consensus key at genesis with the key's proof of possession for its
// operator on the chain id, signed from the priv_validator_key.json it
// wrote, which the ledger's genesis requires.
func TestInitProvesGenesisValidators(t *testing.T) {
	home := t.TempDir()
	ops := map[string]address.Address{}
	homes, err := Init(home, InitOptions{ChainID: "pop", Validators: 2, Genesis: lt.Genesis(5, "alice"), ValidatorStake: DefaultValidatorStake,
		OperatorKey: func(h string) (address.Address, error) {
			ops[h] = lt.NewKey(h).Addr
			return ops[h], nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(homes[1], "config/genesis.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		AppState ledger.Genesis `json:"app_state"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.AppState.Validators) != 2 {
		t.Fatalf("genesis validators %+v, want 2", doc.AppState.Validators)
	}
	for i, gv := range doc.AppState.Validators {
		pub, err := ConsensusPubKey(homes[i])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(gv.PubKey, pub) || gv.Operator != ops[homes[i]] || !ledger.VerifyValidatorPoP(pub, gv.PoP, "pop", gv.Operator) {
			t.Errorf("validators[%d] = %+v: want %s's key %x, operated by %s, with its proof on chain pop", i, gv, homes[i], pub, ops[homes[i]])
		}
	}
	if _, err := ledger.GenesisValidatorSet("pop", doc.AppState); err != nil {
		t.Fatalf("the genesis init wrote: %v", err)
	}
}

// TestConsensusPoPRefusesABadKeyFile: a key file whose private half is not
// its public key's signs nothing.
func TestConsensusPoPRefusesABadKeyFile(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, h := range []string{a, b} {
		if _, err := Init(h, InitOptions{ChainID: "c", Validators: 1, Genesis: ledger.Genesis{Params: ledger.DefaultParams()}}); err != nil {
			t.Fatal(err)
		}
	}
	pub, pop, err := ConsensusPoP(a, "c", lt.NewKey("op").Addr)
	if err != nil || !ledger.VerifyValidatorPoP(pub, pop, "c", lt.NewKey("op").Addr) {
		t.Fatalf("ConsensusPoP: %x, %x, %v: want a proof that verifies", pub, pop, err)
	}
	// a's public key with b's private key.
	var ka, kb map[string]json.RawMessage
	for h, k := range map[string]*map[string]json.RawMessage{a: &ka, b: &kb} {
		data, err := os.ReadFile(filepath.Join(h, ConsensusKeyFile))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, k); err != nil {
			t.Fatal(err)
		}
	}
	ka["priv_key"] = kb["priv_key"]
	data, _ := json.Marshal(ka)
	if err := os.WriteFile(filepath.Join(a, ConsensusKeyFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ConsensusPoP(a, "c", lt.NewKey("op").Addr); err == nil || !strings.Contains(err.Error(), "not the private half") {
		t.Fatalf("ConsensusPoP with a mismatched key file: %v, want refused", err)
	}
}
