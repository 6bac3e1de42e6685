package devnet

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/daemon"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/validator"
)

// TestDevnetValidatorHasAnOperator: the devnet's validator is the
// ledger's, bonded by the key "operator" in the home's keyring, so that
// query validators lists it and a holder delegates to it, adding to its
// power.
func TestDevnetValidatorHasAnOperator(t *testing.T) {
	home := t.TempDir()
	if _, err := Setup(home, Options{BlockTime: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	kr, err := keys.Open(filepath.Join(home, "keyring"))
	if err != nil {
		t.Fatal(err)
	}
	op, err := kr.Lookup(OperatorKey)
	if err != nil {
		t.Fatalf("no %q key in the devnet's keyring: %v", OperatorKey, err)
	}
	d, err := daemon.Start(t.Context(), home, daemon.Options{APIAddr: "127.0.0.1:0", CheckInvariants: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	cl := chainclient.New(d.APIURL)
	vs, err := cl.Validators(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !vs.Managed || len(vs.Validators) != 1 || vs.Validators[0].Operator != op.Address || vs.Validators[0].Bond != validator.DefaultValidatorStake {
		t.Fatalf("query validators: %+v; want one bonded by %s", vs, op.Address)
	}
	power := vs.Validators[0].Power
	alice, err := kr.Get("alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.SendMsg(t.Context(), alice, 0, &ledger.MsgDelegate{Kind: ledger.TargetValidator, Target: op.Address, Amount: validator.DefaultValidatorStake}); err != nil {
		t.Fatal(err)
	}
	v, err := cl.Validator(t.Context(), op.Address.String())
	if err != nil {
		t.Fatal(err)
	}
	if v.Delegated != validator.DefaultValidatorStake || len(v.Delegations) != 1 || v.Delegations[0].Delegator != alice.Address || v.Power != 2*power {
		t.Errorf("after alice delegated: %+v; want her %d usync delegated and the power doubled from %d", v, validator.DefaultValidatorStake, power)
	}
}
