package cli

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiserver/apiservertest"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
	"github.com/gpunet/gpunet/internal/validator"
)

// TestValidatorCreateProvesPossession: `validator create` bonds --home's
// consensus key with a proof of possession it signs from the home's
// priv_validator_key.json for --from's address and the node's chain, which
// the ledger requires; with the operator key off the node, `validator pop`
// on the node prints the proof and `validator create --pubkey --pop` sends
// it, after checking it is for this operator and chain.
func TestValidatorCreateProvesPossession(t *testing.T) {
	// Two nodes' homes (their consensus keys); op1's key is on node 1, op2's
	// in a home of its own, off node 2.
	nodeHome := func() (string, []byte) {
		h := filepath.Join(t.TempDir(), "node")
		if _, err := validator.Init(h, validator.InitOptions{ChainID: lt.ChainID, Validators: 1, Genesis: ledger.Genesis{Params: ledger.DefaultParams()}}); err != nil {
			t.Fatal(err)
		}
		pub, err := validator.ConsensusPubKey(h)
		if err != nil {
			t.Fatal(err)
		}
		return h, pub
	}
	operator := func(home string) *keys.Key {
		kr, err := keys.Open(filepath.Join(home, "keyring"))
		if err != nil {
			t.Fatal(err)
		}
		k, err := kr.AddUnencrypted("op")
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	home1, pub1 := nodeHome()
	home2, pub2 := nodeHome()
	opHome := t.TempDir()
	op1, op2 := operator(home1), operator(opHome)

	g := lt.Genesis(1000_000_000, "alice")
	g.Validators = []ledger.GenesisValidator{lt.GenesisValidator("v1", 30_000_000)}
	g.Accounts = append(g.Accounts,
		ledger.GenesisAccount{Address: op1.Address, Balance: 100_000_000},
		ledger.GenesisAccount{Address: op2.Address, Balance: 100_000_000})
	chain := apiservertest.NewChain(t, g)
	url := apiservertest.NewServer(t, chain).URL
	run := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := RunIO(t.Context(), args, strings.NewReader(""), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	operatorOf := func(pub []byte) (address.Address, bool) {
		kv, done := chain.View()
		defer done()
		v, ok, err := ledger.GetValidator(kv, ledger.ConsAddressOf(pub))
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return address.Address{}, false
		}
		return v.Operator, true
	}

	// On the node: the home's key, the proof signed there.
	if code, stdout, stderr := run("validator", "create", "--from", "op", "--stake", "20sync", "--home", home1, "--node", url, "-o", "json"); code != 0 {
		t.Fatalf("validator create: exit %d: %s%s", code, stdout, stderr)
	}
	if got, ok := operatorOf(pub1); !ok || got != op1.Address {
		t.Fatalf("node 1's key: operator %s (found %v), want %s", got, ok, op1.Address)
	}

	// Off the node: the proof from `validator pop` (chain id from node 2's
	// config), sent from the operator's home.
	var pop struct {
		PubKey   string          `json:"pub_key"`
		PoP      string          `json:"pop"`
		ChainID  string          `json:"chain_id"`
		Operator address.Address `json:"operator"`
	}
	code, stdout, stderr := run("validator", "pop", "--operator", op2.Address.String(), "--home", home2, "-o", "json")
	if code != 0 {
		t.Fatalf("validator pop: exit %d: %s", code, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), &pop); err != nil {
		t.Fatalf("validator pop -o json: %v: %s", err, stdout)
	}
	sig, _ := hex.DecodeString(pop.PoP)
	if pop.PubKey != hex.EncodeToString(pub2) || pop.ChainID != lt.ChainID || pop.Operator != op2.Address || !ledger.VerifyValidatorPoP(pub2, sig, lt.ChainID, op2.Address) {
		t.Fatalf("validator pop printed %+v: want a proof by node 2's key %x for %s on %s", pop, pub2, op2.Address, lt.ChainID)
	}
	_, otherChain, _ := run("validator", "pop", "--operator", op2.Address.String(), "--chain-id", "other-chain", "--home", home2, "-o", "json")
	var other struct{ PoP string }
	json.Unmarshal([]byte(otherChain), &other)
	_, forOp1, _ := run("validator", "pop", "--operator", op1.Address.String(), "--home", home2, "-o", "json")
	var wrongOp struct{ PoP string }
	json.Unmarshal([]byte(forOp1), &wrongOp)

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no pop", []string{"--pubkey", pop.PubKey}, "--pubkey needs --pop"},
		{"pop without pubkey", []string{"--pop", pop.PoP}, "--pop goes with --pubkey"},
		{"short pop", []string{"--pubkey", pop.PubKey, "--pop", pop.PoP[:126]}, "--pop"},
		{"pop for another chain", []string{"--pubkey", pop.PubKey, "--pop", other.PoP}, "is not the proof of possession"},
		{"pop for another operator", []string{"--pubkey", pop.PubKey, "--pop", wrongOp.PoP}, "is not the proof of possession"},
		{"pop of another key", []string{"--pubkey", hex.EncodeToString(pub1), "--pop", pop.PoP}, "is not the proof of possession"},
	} {
		args := append([]string{"validator", "create", "--from", "op", "--stake", "20sync", "--home", opHome, "--node", url}, tc.args...)
		if code, _, stderr := run(args...); code != ExitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want a usage error saying %q", tc.name, code, stderr, tc.want)
		}
	}
	if _, ok := operatorOf(pub2); ok {
		t.Fatal("a refused create bonded node 2's key")
	}
	if code, stdout, stderr := run("validator", "create", "--from", "op", "--stake", "20sync", "--home", opHome, "--node", url, "--pubkey", pop.PubKey, "--pop", pop.PoP); code != 0 {
		t.Fatalf("validator create --pubkey --pop: exit %d: %s%s", code, stdout, stderr)
	}
	if got, ok := operatorOf(pub2); !ok || got != op2.Address {
		t.Fatalf("node 2's key: operator %s (found %v), want %s", got, ok, op2.Address)
	}
}
