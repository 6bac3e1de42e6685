package apiserver

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
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

// TestDelegationPages: the delegation lists are pages of at most limit
// items whose cursors walk every item once, so no response grows with the
// number of delegations; the account's totals cover all pages; bad
// limits and cursors are refused by name.
func TestDelegationPages(t *testing.T) {
	f := newFakeChain(t)
	p1 := providerKeys[0].Addr
	delegators := []lt.Key{consumerKey, providerKeys[1], providerKeys[2], providerKeys[3], providerKeys[4]}
	for _, k := range delegators {
		f.send(k, &ledger.MsgDelegate{Kind: ledger.TargetProvider, Target: p1, Amount: 2_000_000})
	}
	for _, p := range providerKeys[1:] {
		f.send(consumerKey, &ledger.MsgDelegate{Kind: ledger.TargetProvider, Target: p.Addr, Amount: 2_000_000})
	}
	f.send(consumerKey, &ledger.MsgUndelegate{Kind: ledger.TargetProvider, Target: providerKeys[2].Addr, Amount: 500_000})
	s := New(f, Options{})

	// A provider's delegators, two a page.
	seen := map[address.Address]bool{}
	pages, cursor := 0, ""
	for {
		var td apiwire.TargetDelegationsBody
		url := "/v1/providers/" + p1.String() + "/delegations?limit=2"
		if cursor != "" {
			url += "&cursor=" + cursor
		}
		if rec := do(t, s, "GET", url, nil, nil, &td); rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", url, rec.Code, rec.Body)
		}
		pages++
		if len(td.Delegations) > 2 || td.Pool.Tokens != 10_000_000 {
			t.Fatalf("page %d: %d delegations, pool %d; want at most 2, pool 10000000", pages, len(td.Delegations), td.Pool.Tokens)
		}
		for _, d := range td.Delegations {
			if seen[d.Delegator] {
				t.Fatalf("page %d repeats %s", pages, d.Delegator)
			}
			seen[d.Delegator] = true
		}
		if cursor = td.NextCursor; cursor == "" || pages > 5 {
			break
		}
	}
	if pages != 3 || len(seen) != len(delegators) {
		t.Errorf("%d pages with %d delegators; want 3 with %d", pages, len(seen), len(delegators))
	}

	// The account's 5 delegations and 1 unbonding entry, four a page.
	var all []string
	pages, cursor = 0, ""
	for {
		var d apiwire.DelegatorBody
		url := "/v1/accounts/" + consumerKey.Addr.String() + "/delegations?limit=4"
		if cursor != "" {
			url += "&cursor=" + cursor
		}
		if rec := do(t, s, "GET", url, nil, nil, &d); rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", url, rec.Code, rec.Body)
		}
		pages++
		if n := len(d.Delegations) + len(d.Unbonding) + len(d.Redelegations); n > 4 {
			t.Fatalf("page %d holds %d items; want at most 4", pages, n)
		}
		if d.Delegated != 9_500_000 || d.UnbondingTotal != 500_000 {
			t.Errorf("page %d totals: delegated %d unbonding %d; want 9500000 and 500000 over all pages", pages, d.Delegated, d.UnbondingTotal)
		}
		for _, x := range d.Delegations {
			all = append(all, "d "+x.Target.String())
		}
		for _, x := range d.Unbonding {
			all = append(all, "u "+x.Target.String())
		}
		if cursor = d.NextCursor; cursor == "" || pages > 5 {
			break
		}
	}
	if pages != 2 || len(all) != 6 || len(slices.Compact(slices.Clone(all))) != 6 {
		t.Errorf("%d pages: %v; want 2 pages of 6 distinct items", pages, all)
	}

	var first apiwire.DelegatorBody
	do(t, s, "GET", "/v1/accounts/"+consumerKey.Addr.String()+"/delegations?limit=1", nil, nil, &first)
	for _, url := range []string{
		"/v1/providers/" + p1.String() + "/delegations?limit=0",
		"/v1/providers/" + p1.String() + "/delegations?limit=" + strconv.Itoa(apiwire.MaxPageLimit+1),
		"/v1/providers/" + p1.String() + "/delegations?cursor=nope",
		"/v1/validators/" + p1.String() + "?limit=x",
		"/v1/accounts/" + consumerKey.Addr.String() + "/delegations?cursor=zz",
		// another delegator's position is not this one's
		"/v1/accounts/" + p1.String() + "/delegations?cursor=" + first.NextCursor,
	} {
		var e apiwire.ErrorBody
		if rec := do(t, s, "GET", url, nil, nil, &e); rec.Code != http.StatusBadRequest || !strings.Contains(e.Message, "limit") && !strings.Contains(e.Message, "cursor") {
			t.Errorf("GET %s: %d %q; want 400 naming the limit or cursor", url, rec.Code, e.Message)
		}
	}
}
