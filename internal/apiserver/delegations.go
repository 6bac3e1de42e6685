package apiserver

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Delegation (docs/ledger.md, Delegation): GET
// /v1/accounts/{addr}/delegations, GET /v1/validators/{addr} and GET
// /v1/providers/{addr}/delegations.

func (s *Server) delegationRoutes() []Route {
	h := func(f http.HandlerFunc) http.Handler { return f }
	return []Route{
		{Method: "GET", Path: "/v1/accounts/{addr}/delegations", ID: "getDelegations", Tag: "accounts",
			Summary:    "What an account has delegated to validators and providers (each delegation's worth now and its pending rewards), its unbonding entries and its redelegations",
			PathParams: addrParam, List: true, Resp: sampleDelegator(), Errors: []int{400}, Handler: h(s.delegations)},
		{Method: "GET", Path: "/v1/validators/{addr}", ID: "getValidator", Tag: "chain",
			Summary:    "One validator, by its operator's address (gpu1…) or its consensus address (40 hex digits): bond, delegated stake, power, status, commission, its delegation pool and delegations",
			PathParams: map[string]string{"addr": "the operator's address (bech32, gpu1…) or the validator's consensus address (40 hex digits)"},
			List:       true, Resp: apiwire.ValidatorBody{Delegations: []ledger.DelegationInfo{{}}}, Errors: []int{400, 404}, Handler: h(s.validator)},
		{Method: "GET", Path: "/v1/providers/{addr}/delegations", ID: "getProviderDelegations", Tag: "providers",
			Summary:    "A provider's delegation pool (delegated tokens backing its stake requirement, shares, commission, what its delegators lost to slashes) and its delegations",
			PathParams: addrParam, List: true, Resp: apiwire.TargetDelegationsBody{TargetDelegations: ledger.TargetDelegations{Delegations: []ledger.DelegationInfo{{}}}}, Errors: []int{400, 404}, Handler: h(s.providerDelegations)},
	}
}

// sampleDelegator documents a delegator's lists.
func sampleDelegator() apiwire.DelegatorBody {
	return apiwire.DelegatorBody{
		Delegations:   []ledger.DelegationInfo{{}},
		Unbonding:     []ledger.UnbondingDelegationInfo{{Entries: []ledger.UnbondingDelegationEntry{{}}}},
		Redelegations: []ledger.RedelegationInfo{{Entries: []ledger.RedelegationEntry{{}}}},
	}
}

// delegations serves GET /v1/accounts/{addr}/delegations: a page of the
// delegations, then the unbonding entries, then the redelegations (limit
// counts items of the three), and the totals over all of them. The
// cursor is the hex of the page's last ledger key.
func (s *Server) delegations(w http.ResponseWriter, r *http.Request) {
	a, ok := parseAddr(w, r)
	if !ok {
		return
	}
	limit, ok := pageLimit(w, r)
	if !ok {
		return
	}
	var after []byte
	if c := r.URL.Query().Get("cursor"); c != "" {
		b, err := hex.DecodeString(c)
		if err != nil || len(b) == 0 {
			writeError(w, http.StatusBadRequest, 0, fmt.Sprintf("cursor %q: not a cursor of this list (pass back next_cursor as given)", c))
			return
		}
		after = b
	}
	kv, release := s.chain.View()
	defer release()
	st, next, err := ledger.DelegationsOf(kv, a, after, limit)
	if err != nil {
		if errors.Is(err, ledger.ErrInvalidMsg) {
			writeError(w, http.StatusBadRequest, 0, fmt.Sprintf("cursor %q: not a cursor of %s's delegations (pass back next_cursor as given)", r.URL.Query().Get("cursor"), a))
			return
		}
		writeLedgerError(w, err)
		return
	}
	tot, err := ledger.DelegationTotalsOf(kv, a)
	if err != nil {
		writeLedgerError(w, err)
		return
	}
	out := apiwire.DelegatorBody{Delegator: a, Delegations: st.Delegations, Unbonding: st.Unbonding, Redelegations: st.Redelegations,
		Delegated: tot.Delegated, UnbondingTotal: tot.UnbondingTotal, PendingRewards: tot.PendingRewards, Height: ledger.Height(kv)}
	if next != nil {
		out.NextCursor = hex.EncodeToString(next)
	}
	if out.Delegations == nil {
		out.Delegations = []ledger.DelegationInfo{}
	}
	if out.Unbonding == nil {
		out.Unbonding = []ledger.UnbondingDelegationInfo{}
	}
	if out.Redelegations == nil {
		out.Redelegations = []ledger.RedelegationInfo{}
	}
	writeJSON(w, http.StatusOK, out)
}

// targetPageParams reads a target's page: ?limit= and ?cursor= (the
// last delegator of the previous page); on failure it has written the
// error.
func targetPageParams(w http.ResponseWriter, r *http.Request) (limit int, after *address.Address, ok bool) {
	if limit, ok = pageLimit(w, r); !ok {
		return 0, nil, false
	}
	if c := r.URL.Query().Get("cursor"); c != "" {
		a, err := address.Parse(c)
		if err != nil {
			writeError(w, http.StatusBadRequest, 0, fmt.Sprintf("cursor %q: not a cursor of this list (pass back next_cursor as given)", c))
			return 0, nil, false
		}
		after = &a
	}
	return limit, after, true
}

// targetPage reads t's pool and page of delegations; on failure it has
// written the error.
func targetPage(w http.ResponseWriter, kv ledger.KV, t ledger.Target, after *address.Address, limit int) (*ledger.TargetDelegations, string, bool) {
	td, next, err := ledger.DelegationsTo(kv, t, after, limit)
	if err != nil {
		writeLedgerError(w, err)
		return nil, "", false
	}
	if td.Delegations == nil {
		td.Delegations = []ledger.DelegationInfo{}
	}
	if next == nil {
		return td, "", true
	}
	return td, next.String(), true
}

// validator answers GET /v1/validators/{addr}: addr is the operator's
// address or the consensus address.
func (s *Server) validator(w http.ResponseWriter, r *http.Request) {
	given := r.PathValue("addr")
	var op address.Address
	var cons ledger.ConsAddress
	byOperator := strings.HasPrefix(given, address.HRP+"1")
	if byOperator {
		a, err := address.Parse(given)
		if err != nil {
			writeError(w, http.StatusBadRequest, ledger.ErrInvalidAddress.Code, err.Error())
			return
		}
		op = a
	} else if err := cons.UnmarshalText([]byte(strings.ToUpper(given))); err != nil {
		writeError(w, http.StatusBadRequest, ledger.ErrInvalidAddress.Code, fmt.Sprintf("%q is neither an operator's address (%s1…) nor a consensus address (40 hex digits)", given, address.HRP))
		return
	}
	limit, after, ok := targetPageParams(w, r)
	if !ok {
		return
	}
	kv, release := s.chain.View()
	defer release()
	vs, err := ledger.Validators(kv)
	if err != nil {
		writeLedgerError(w, err)
		return
	}
	for _, v := range vs {
		if byOperator && v.Operator != op || !byOperator && v.Address != cons {
			continue
		}
		td, next, ok := targetPage(w, kv, ledger.Target{Kind: ledger.TargetValidator, Address: v.Operator}, after, limit)
		if !ok {
			return
		}
		out := apiwire.ValidatorBody{ValidatorInfo: v, Total: v.Total(), Pool: td.Pool, Delegations: td.Delegations, NextCursor: next, Height: ledger.Height(kv)}
		writeJSON(w, http.StatusOK, out)
		return
	}
	if byOperator {
		writeError(w, http.StatusNotFound, 0, fmt.Sprintf("%s operates no validator", op))
	} else {
		writeError(w, http.StatusNotFound, 0, fmt.Sprintf("no validator has consensus address %s", cons))
	}
}

func (s *Server) providerDelegations(w http.ResponseWriter, r *http.Request) {
	a, ok := parseAddr(w, r)
	if !ok {
		return
	}
	limit, after, ok := targetPageParams(w, r)
	if !ok {
		return
	}
	kv, release := s.chain.View()
	defer release()
	if _, found, err := ledger.GetProvider(kv, a); err != nil {
		writeLedgerError(w, err)
		return
	} else if !found {
		writeError(w, http.StatusNotFound, ledger.ErrUnknownProvider.Code, a.String()+" is not a registered provider")
		return
	}
	td, next, ok := targetPage(w, kv, ledger.Target{Kind: ledger.TargetProvider, Address: a}, after, limit)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, apiwire.TargetDelegationsBody{TargetDelegations: *td, NextCursor: next, Height: ledger.Height(kv)})
}
