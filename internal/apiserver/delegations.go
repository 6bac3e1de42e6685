package apiserver

import (
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
			PathParams: addrParam, Resp: sampleDelegator(), Errors: []int{400}, Handler: h(s.delegations)},
		{Method: "GET", Path: "/v1/validators/{addr}", ID: "getValidator", Tag: "chain",
			Summary:    "One validator, by its operator's address (gpu1…) or its consensus address (40 hex digits): bond, delegated stake, power, status, commission, its delegation pool and delegations",
			PathParams: map[string]string{"addr": "the operator's address (bech32, gpu1…) or the validator's consensus address (40 hex digits)"},
			Resp:       apiwire.ValidatorBody{Delegations: []ledger.DelegationInfo{{}}}, Errors: []int{400, 404}, Handler: h(s.validator)},
		{Method: "GET", Path: "/v1/providers/{addr}/delegations", ID: "getProviderDelegations", Tag: "providers",
			Summary:    "A provider's delegation pool (delegated tokens backing its stake requirement, shares, commission, what its delegators lost to slashes) and its delegations",
			PathParams: addrParam, Resp: apiwire.TargetDelegationsBody{TargetDelegations: ledger.TargetDelegations{Delegations: []ledger.DelegationInfo{{}}}}, Errors: []int{400, 404}, Handler: h(s.providerDelegations)},
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

func (s *Server) delegations(w http.ResponseWriter, r *http.Request) {
	a, ok := parseAddr(w, r)
	if !ok {
		return
	}
	kv, release := s.chain.View()
	defer release()
	st, err := ledger.DelegationsOf(kv, a)
	if err != nil {
		writeLedgerError(w, err)
		return
	}
	out := apiwire.DelegatorBody{Delegator: a, Delegations: st.Delegations, Unbonding: st.Unbonding, Redelegations: st.Redelegations, Height: ledger.Height(kv)}
	for _, d := range out.Delegations {
		out.Delegated += d.Amount
		out.PendingRewards += d.PendingRewards
	}
	for _, u := range out.Unbonding {
		for _, e := range u.Entries {
			out.UnbondingTotal += e.Balance
		}
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
		td, err := ledger.DelegationsTo(kv, ledger.Target{Kind: ledger.TargetValidator, Address: v.Operator})
		if err != nil {
			writeLedgerError(w, err)
			return
		}
		out := apiwire.ValidatorBody{ValidatorInfo: v, Total: v.Total(), Pool: td.Pool, Delegations: td.Delegations, Height: ledger.Height(kv)}
		if out.Delegations == nil {
			out.Delegations = []ledger.DelegationInfo{}
		}
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
	kv, release := s.chain.View()
	defer release()
	if _, found, err := ledger.GetProvider(kv, a); err != nil {
		writeLedgerError(w, err)
		return
	} else if !found {
		writeError(w, http.StatusNotFound, ledger.ErrUnknownProvider.Code, a.String()+" is not a registered provider")
		return
	}
	td, err := ledger.DelegationsTo(kv, ledger.Target{Kind: ledger.TargetProvider, Address: a})
	if err != nil {
		writeLedgerError(w, err)
		return
	}
	if td.Delegations == nil {
		td.Delegations = []ledger.DelegationInfo{}
	}
	writeJSON(w, http.StatusOK, apiwire.TargetDelegationsBody{TargetDelegations: *td, Height: ledger.Height(kv)})
}
