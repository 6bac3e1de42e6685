package apiserver

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Governance and the parameter registry: GET /v1/params/registry, GET
// /v1/gov/proposals and GET /v1/gov/proposals/{id}.

func (s *Server) govRoutes() []Route {
	h := func(f http.HandlerFunc) http.Handler { return f }
	return []Route{
		{Method: "GET", Path: "/v1/params/registry", ID: "getParamRegistry", Tag: "chain",
			Summary: "Every ledger parameter keyed by name: its value, bounds, the largest step one proposal may make from it (max_step), kind and description. GET /v1/params stays the plain object of values",
			Resp:    apiwire.ParamTable{"min_fee": {}}, Handler: h(s.paramRegistry)},
		{Method: "GET", Path: "/v1/gov/proposals", ID: "listProposals", Tag: "gov",
			Summary: "Governance proposals, newest first, with their status, deposits and (while voting) the tally so far; and the minimum deposit a new one needs now",
			List:    true, Resp: apiwire.ProposalList{Proposals: []apiwire.ProposalView{sampleProposal()}}, Errors: []int{400}, Handler: h(s.proposals)},
		{Method: "GET", Path: "/v1/gov/proposals/{id}", ID: "getProposal", Tag: "gov",
			Summary:    "A proposal: what it does, its periods, deposits, voters, the tally so far (voting) or the final one (decided) and why it ended as it did (wait: a code and its numbers; reason: rendered)",
			PathParams: map[string]string{"id": "a proposal id (a positive integer)"},
			Resp:       sampleProposal(), Errors: []int{400, 404}, Handler: h(s.proposal)},
	}
}

// sampleProposal documents a proposal's optional fields.
func sampleProposal() apiwire.ProposalView {
	return apiwire.ProposalView{Proposal: &ledger.Proposal{Changes: []ledger.ParamChange{{}}, Tally: &ledger.Tally{}},
		TallyNow: &ledger.Tally{}, Deposits: []ledger.Deposit{{}}}
}

func (s *Server) paramRegistry(w http.ResponseWriter, r *http.Request) {
	kv, release := s.chain.View()
	defer release()
	p, err := ledger.GetParams(kv)
	if err != nil {
		writeLedgerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, apiwire.ParamTableOf(p))
}

// proposalView adds to p its tally so far and deposits while it is open.
func proposalView(kv ledger.KV, p *ledger.Proposal) (apiwire.ProposalView, error) {
	renderProposal(p)
	v := apiwire.ProposalView{Proposal: p}
	if !p.Active() {
		return v, nil
	}
	v.Deposits = ledger.ProposalDeposits(kv, p.ID)
	if p.Status == ledger.ProposalVoting {
		t, err := ledger.TallyVotes(kv, p.ID)
		if err != nil {
			return v, err
		}
		v.TallyNow = &t
	}
	return v, nil
}

func (s *Server) proposals(w http.ResponseWriter, r *http.Request) {
	limit, ok := pageLimit(w, r)
	if !ok {
		return
	}
	before, ok := uintCursor(w, r)
	if !ok {
		return
	}
	kv, release := s.chain.View()
	defer release()
	p, err := ledger.GetParams(kv)
	if err != nil {
		writeLedgerError(w, err)
		return
	}
	out := apiwire.ProposalList{Proposals: []apiwire.ProposalView{}, NextMinDeposit: ledger.NextMinDeposit(kv, p),
		Active: ledger.ActiveProposals(kv), Bonded: ledger.BondedStake(kv), Height: ledger.Height(kv)}
	err = ledger.ProposalsBefore(kv, before, func(prop *ledger.Proposal) bool {
		if len(out.Proposals) == limit {
			out.NextCursor = strconv.FormatUint(prop.ID+1, 10)
			return false
		}
		v, verr := proposalView(kv, prop)
		if verr != nil {
			err = verr
			return false
		}
		out.Proposals = append(out.Proposals, v)
		return true
	})
	if err != nil {
		writeLedgerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) proposal(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		writeError(w, http.StatusBadRequest, 0, fmt.Sprintf("proposal id %q: want a positive integer", r.PathValue("id")))
		return
	}
	kv, release := s.chain.View()
	defer release()
	p, found, err := ledger.GetProposal(kv, id)
	if err != nil {
		writeLedgerError(w, err)
		return
	}
	if !found {
		writeError(w, http.StatusNotFound, 0, fmt.Sprintf("no proposal %d (the last is %d)", id, ledger.LastProposalID(kv)))
		return
	}
	v, err := proposalView(kv, p)
	if err != nil {
		writeLedgerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}
