package apiwire

import "github.com/gpunet/gpunet/internal/ledger"

// ParamEntry is one parameter in GET /v1/params/registry and `gpunet
// query params -o json`: its value, bounds and the largest change one
// proposal may make from the value now.
type ParamEntry struct {
	Value uint64 `json:"value"`
	Min   uint64 `json:"min"`
	Max   uint64 `json:"max"`
	// MaxStep is the largest change one proposal may make from Value:
	// max(MaxStepAbs, Value × MaxStepPPM / 10⁶).
	MaxStep     uint64 `json:"max_step"`
	MaxStepAbs  uint64 `json:"max_step_abs"`
	MaxStepPPM  uint64 `json:"max_step_ppm"`
	Kind        string `json:"kind"`
	Description string `json:"description"`
}

// ParamTable is every parameter keyed by its name (its key in GET
// /v1/params, which stays the plain object of values).
type ParamTable map[string]ParamEntry

// ParamTableOf builds the table of p.
func ParamTableOf(p ledger.Params) ParamTable {
	out := ParamTable{}
	for _, s := range ledger.ParamRegistry() {
		v, _ := p.Get(s.Name)
		out[s.Name] = ParamEntry{Value: v, Min: s.Min, Max: s.Max, MaxStep: min(s.StepFrom(v), s.Max-s.Min),
			MaxStepAbs: s.MaxStep, MaxStepPPM: s.MaxStepPPM, Kind: s.Kind, Description: s.Desc}
	}
	return out
}

// ProposalView is a proposal as GET /v1/gov/proposals/{id} shows it:
// the record, and while it is open its tally so far (weights as they are
// now) and its deposits.
type ProposalView struct {
	*ledger.Proposal
	// TallyNow is the tally if it ran now (voting proposals only).
	TallyNow *ledger.Tally `json:"tally_now,omitempty"`
	// Deposits are those it holds (none once decided).
	Deposits []ledger.Deposit `json:"deposits,omitempty"`
}

// ProposalList is GET /v1/gov/proposals: proposals newest first, and
// what a new one would have to deposit now.
type ProposalList struct {
	Proposals []ProposalView `json:"proposals"`
	// NextMinDeposit is the minimum deposit the next proposal would have
	// to reach (usync); Active how many take deposits or votes.
	NextMinDeposit uint64 `json:"next_min_deposit"`
	Active         uint64 `json:"active"`
	// Bonded is the stake that votes (the quorum's base), usync.
	Bonded     uint64 `json:"bonded"`
	Height     uint64 `json:"height"`
	NextCursor string `json:"next_cursor"`
}
