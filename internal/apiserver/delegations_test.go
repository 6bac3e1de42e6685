package apiserver

import (
	"net/http"
	"testing"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// TestDelegationRoutes: an account's delegations, a provider's pool and
// delegations, and the errors of a validator that is not there or an
// address that is neither form.
func TestDelegationRoutes(t *testing.T) {
	f := newFakeChain(t)
	p1 := providerKeys[0].Addr
	f.send(consumerKey, &ledger.MsgDelegate{Kind: ledger.TargetProvider, Target: p1, Amount: 4_000_000})
	f.send(consumerKey, &ledger.MsgUndelegate{Kind: ledger.TargetProvider, Target: p1, Amount: 1_000_000})
	s := New(f, Options{})

	var d apiwire.DelegatorBody
	if rec := do(t, s, "GET", "/v1/accounts/"+consumerKey.Addr.String()+"/delegations", nil, nil, &d); rec.Code != http.StatusOK {
		t.Fatalf("delegations: %d %s", rec.Code, rec.Body)
	}
	if len(d.Delegations) != 1 || d.Delegations[0].Target != (ledger.Target{Kind: ledger.TargetProvider, Address: p1}) || d.Delegated != 3_000_000 ||
		d.UnbondingTotal != 1_000_000 || len(d.Unbonding) != 1 || d.Redelegations == nil || d.Delegator != consumerKey.Addr || d.Height == 0 {
		t.Errorf("consumer's delegations = %+v", d)
	}
	do(t, s, "GET", "/v1/accounts/"+p1.String()+"/delegations", nil, nil, &d)
	if d.Delegations == nil || len(d.Delegations) != 0 || d.Unbonding == nil {
		t.Errorf("an account without delegations: %+v; want empty lists, not null", d)
	}

	var td apiwire.TargetDelegationsBody
	if rec := do(t, s, "GET", "/v1/providers/"+p1.String()+"/delegations", nil, nil, &td); rec.Code != http.StatusOK {
		t.Fatalf("provider delegations: %d %s", rec.Code, rec.Body)
	}
	if td.Pool.Tokens != 3_000_000 || len(td.Delegations) != 1 || td.Delegations[0].Delegator != consumerKey.Addr || td.Delegations[0].Amount != 3_000_000 {
		t.Errorf("p1's delegations = %+v", td)
	}
	var p apiwire.ProviderBody
	do(t, s, "GET", "/v1/providers/"+p1.String(), nil, nil, &p)
	if p.Record == nil || p.Record.Delegated != 3_000_000 {
		t.Errorf("p1's record: %+v; want delegated 3000000", p.Record)
	}

	for _, c := range []struct {
		url    string
		status int
	}{
		{"/v1/providers/" + consumerKey.Addr.String() + "/delegations", http.StatusNotFound},
		{"/v1/accounts/gpu1nope/delegations", http.StatusBadRequest},
		{"/v1/validators/" + p1.String(), http.StatusNotFound},
		{"/v1/validators/" + "00112233445566778899AABBCCDDEEFF00112233", http.StatusNotFound},
		{"/v1/validators/zzz", http.StatusBadRequest},
		{"/v1/validators/gpu1zzz", http.StatusBadRequest},
	} {
		var e apiwire.ErrorBody
		if rec := do(t, s, "GET", c.url, nil, nil, &e); rec.Code != c.status || e.Message == "" {
			t.Errorf("GET %s: %d %q; want %d with an error", c.url, rec.Code, e.Message, c.status)
		}
	}
}
