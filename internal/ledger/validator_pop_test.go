package ledger_test

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

func withMoniker(m *ledger.MsgCreateValidator, moniker string) *ledger.MsgCreateValidator {
	m.Moniker = moniker
	return m
}

// TestCreateValidatorNeedsPoP: create_validator for a consensus key its
// sender does not hold is refused, whatever proof it carries: none, one by
// another key, one its holder made for another operator (a front runner
// replaying an honest create_validator it saw) or for another chain, or a
// key of small order, for which anyone can sign. Each costs at most its
// fee and leaves the key free; then the key's holder bonds it.
func TestCreateValidatorNeedsPoP(t *testing.T) {
	g := valGenesis(30, 20)
	g.Params.MinFee = 1_000
	g.Params.ValidatorFeeSharePPM = 0 // alice is paid none of her own fees
	g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: bob.Addr, Balance: 100 * sync})
	c := lt.NewChain(t, g)
	node := lt.ConsKey("node") // the honest node's key; bob operates it
	// A key of small order (the identity): (R = identity, s = 0) is a valid
	// signature of every message under it, with no secret at all.
	identity := append([]byte{1}, make([]byte, 31)...)
	forged := append(bytes.Clone(identity), make([]byte, 32)...)
	if !ed25519.Verify(identity, ledger.ValidatorPoPBytes(lt.ChainID, alice.Addr), forged) {
		t.Fatal("the forged signature under the identity key does not verify: the small-order case tests nothing")
	}
	for _, tc := range []struct {
		name string
		msg  *ledger.MsgCreateValidator
		code error
		want string
		fee  bool // refused after the fee is charged
	}{
		{"no pop", &ledger.MsgCreateValidator{PubKey: node, Stake: 10 * sync}, ledger.ErrInvalidMsg, "pop is missing", false},
		{"short pop", &ledger.MsgCreateValidator{PubKey: node, Stake: 10 * sync, PoP: make([]byte, 63)}, ledger.ErrInvalidMsg, "pop has 63 bytes, want 64", false},
		{"zero pop", &ledger.MsgCreateValidator{PubKey: node, Stake: 10 * sync, PoP: make([]byte, 64)}, ledger.ErrBadSignature, "pop does not verify", true},
		{"pop by the sender's own key", &ledger.MsgCreateValidator{PubKey: node, Stake: 10 * sync, PoP: lt.PoP("alice", alice.Addr)}, ledger.ErrBadSignature, "pop does not verify", true},
		{"pop for another operator", &ledger.MsgCreateValidator{PubKey: node, Stake: 10 * sync, PoP: lt.PoP("node", bob.Addr)}, ledger.ErrBadSignature, "pop does not verify", true},
		{"pop for another chain", &ledger.MsgCreateValidator{PubKey: node, Stake: 10 * sync, PoP: ledger.SignValidatorPoP(lt.ConsPriv("node"), "other-chain", alice.Addr)}, ledger.ErrBadSignature, "pop does not verify", true},
		{"key of small order", &ledger.MsgCreateValidator{PubKey: identity, Stake: 10 * sync, PoP: forged[:64]}, ledger.ErrInvalidMsg, "small order", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acct, _ := ledger.GetAccount(c.KV, alice.Addr)
			supply, bonded := ledger.Supply(c.KV), ledger.ValidatorBonded(c.KV)
			r := c.ApplyBlock(t, alice.Tx(lt.ChainID, acct.Sequence, 1_000, tc.msg))
			if !errors.Is(r[0].Err, tc.code) || !strings.Contains(r[0].Err.Error(), tc.want) {
				t.Fatalf("got %v, want %v saying %q", r[0].Err, tc.code, tc.want)
			}
			fee := uint64(0)
			if tc.fee {
				fee = 1_000
			}
			if got, want := c.Balance(t, alice.Addr), acct.Balance-fee; got != want {
				t.Errorf("alice's balance %d, want %d", got, want)
			}
			if ledger.Supply(c.KV) != supply || ledger.ValidatorBonded(c.KV) != bonded {
				t.Errorf("supply or bond changed")
			}
			if _, ok, _ := ledger.GetValidator(c.KV, ledger.ConsAddressOf(tc.msg.PubKey)); ok {
				t.Errorf("the key has a validator")
			}
			if _, ok := ledger.ValidatorOf(c.KV, alice.Addr); ok {
				t.Errorf("alice operates a validator")
			}
		})
	}
	// The holder's proof for bob: bob's validator, with bob's bond.
	if r := c.ApplyBlock(t, bob.Tx(lt.ChainID, 0, 1_000, withMoniker(lt.CreateValidator(bob, "node", 10*sync), "node"))); r[0].Err != nil {
		t.Fatalf("create_validator with the key's proof: %v", r[0].Err)
	}
	v := validator(t, c, "node")
	if v.Operator != bob.Addr || v.Bond != 10*sync || !bytes.Equal(v.PubKey, node) {
		t.Fatalf("the new validator: %+v, want bob's, bonding 10 SYNC for the node's key", v)
	}
}

// TestConsensusKeyUsedOnce: a consensus key serves one validator for good.
// Even with its holder's valid proof, another operator cannot bond it while
// its validator is bonded, once it withdrew its whole bond, or once it is
// tombstoned (a double signer does not come back under a new operator).
func TestConsensusKeyUsedOnce(t *testing.T) {
	g := valGenesis(30, 20, 15)
	g.Params.ValidatorFeeSharePPM = 0
	c := lt.NewChain(t, g)
	// v2 double signs: tombstoned. v3 withdraws its whole bond.
	c.ApplyBlockWith(t, nil, nil)
	c.ApplyBlockWith(t, votes(t, c), []ledger.Misbehavior{{Kind: ledger.MisbehaviorDuplicateVote, Address: cons("v2"), Height: c.Height}})
	if v := validator(t, c, "v2"); !v.Tombstoned {
		t.Fatalf("v2 not tombstoned: %+v", v)
	}
	if r := c.ApplyBlockWith(t, votes(t, c), nil, lt.NewKey("v3").Tx(lt.ChainID, 0, 0, &ledger.MsgValidatorUnbond{Amount: 15 * sync})); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	if v := validator(t, c, "v3"); v.Bond != 0 {
		t.Fatalf("v3 still bonds %d", v.Bond)
	}
	for i, key := range []string{"v1", "v2", "v3"} {
		acct, _ := ledger.GetAccount(c.KV, alice.Addr)
		r := c.ApplyBlockWith(t, votes(t, c), nil, alice.Tx(lt.ChainID, acct.Sequence, 0, lt.CreateValidator(alice, key, 10*sync)))
		if !errors.Is(r[0].Err, ledger.ErrInvalidMsg) || !strings.Contains(r[0].Err.Error(), "already used by another validator, operated by "+lt.NewKey(key).Addr.String()) {
			t.Errorf("%d: alice bonding %s's key with its proof: got %v, want refused as used by %s's operator", i, key, r[0].Err, key)
		}
	}
	if _, ok := ledger.ValidatorOf(c.KV, alice.Addr); ok {
		t.Fatal("alice operates a validator")
	}
}

// TestGenesisValidatorsNeedPoP: a genesis validator carries its consensus
// key's proof for its operator on the chain's id, as create_validator does.
func TestGenesisValidatorsNeedPoP(t *testing.T) {
	for _, tc := range []struct {
		name    string
		chainID string
		edit    func(*ledger.GenesisValidator)
		want    string // "" for success
	}{
		{"with its proof", lt.ChainID, func(*ledger.GenesisValidator) {}, ""},
		{"no pop", lt.ChainID, func(v *ledger.GenesisValidator) { v.PoP = nil }, "validators[1]: pop is missing"},
		{"another chain", "other-chain", func(*ledger.GenesisValidator) {}, "validators[0]: pop does not verify"},
		{"another operator", lt.ChainID, func(v *ledger.GenesisValidator) { v.Operator = alice.Addr }, "validators[1]: pop does not verify"},
		{"another key", lt.ChainID, func(v *ledger.GenesisValidator) { v.PubKey = lt.ConsKey("v1x") }, "validators[1]: pop does not verify"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := valGenesis(30, 20)
			tc.edit(&g.Validators[1])
			var l ledger.Ledger
			_, _, err := l.InitGenesis(ledger.NewMemKV(), tc.chainID, g)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("InitGenesis: %v", err)
			case tc.want != "" && (!errors.Is(err, ledger.ErrInvalidGenesis) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("InitGenesis: got %v, want %v saying %q", err, ledger.ErrInvalidGenesis, tc.want)
			}
		})
	}
}

// TestValidatorPoPBytes pins what a proof of possession signs: a change
// would make every proof made before it fail.
func TestValidatorPoPBytes(t *testing.T) {
	got := ledger.ValidatorPoPBytes("gpunet-1", bob.Addr)
	want := append([]byte("gpunet/validator-pop/v1\x00\x08gpunet-1"), bob.Addr[:]...)
	if !bytes.Equal(got, want) {
		t.Fatalf("ValidatorPoPBytes = %q, want %q", got, want)
	}
	pop := lt.PoP("node", bob.Addr)
	if !ledger.VerifyValidatorPoP(lt.ConsKey("node"), pop, lt.ChainID, bob.Addr) {
		t.Fatal("a proof does not verify")
	}
	if ledger.VerifyValidatorPoP(lt.ConsKey("node"), pop, lt.ChainID+"x", bob.Addr) || ledger.VerifyValidatorPoP(lt.ConsKey("node"), pop, lt.ChainID, alice.Addr) {
		t.Fatal("a proof verifies for another chain or operator")
	}
}
