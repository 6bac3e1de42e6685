package ledger

import (
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/gpunet/gpunet/internal/address"
)

// The governance messages: submit a proposal, deposit on one, vote on
// one. Message types 35–37 (38–44 are kept for governance).

// MsgSubmitProposal submits a proposal with the sender's initial
// deposit. Kind is param (Changes), spend (To, Amount from the treasury)
// or text (Title and Body only).
type MsgSubmitProposal struct {
	Kind    string           `json:"kind"`
	Title   string           `json:"title"`
	Body    string           `json:"body,omitempty"`
	Changes []ParamChange    `json:"changes,omitempty"`
	To      *address.Address `json:"to,omitempty"`
	Amount  Amount           `json:"amount,omitempty"`
	// AddRoots and RemoveRoots are an attest_roots proposal's: the hex
	// SHA-256 of DER root certificates to trust, and to stop trusting.
	AddRoots    []string `json:"add_roots,omitempty"`
	RemoveRoots []string `json:"remove_roots,omitempty"`
	Deposit     Amount   `json:"deposit"`
}

// MsgDeposit adds Amount of the sender's balance to a proposal's deposit
// during its deposit period.
type MsgDeposit struct {
	ProposalID uint64 `json:"proposal_id"`
	Amount     Amount `json:"amount"`
}

// MsgVote casts or changes the sender's vote on a proposal in its voting
// period: yes, no, abstain or veto.
type MsgVote struct {
	ProposalID uint64 `json:"proposal_id"`
	Option     string `json:"option"`
}

// Type implements Msg.
func (*MsgSubmitProposal) Type() MsgType { return MsgTypeSubmitProposal }

// Type implements Msg.
func (*MsgDeposit) Type() MsgType { return MsgTypeDeposit }

// Type implements Msg.
func (*MsgVote) Type() MsgType { return MsgTypeVote }

// ValidateBasic implements Msg.
func (m *MsgSubmitProposal) ValidateBasic() error {
	switch {
	case m.Title == "" || len(m.Title) > maxProposalTitle || !utf8.ValidString(m.Title):
		return invalid("a proposal's title is 1 to %d bytes of UTF-8, got %d bytes", maxProposalTitle, len(m.Title))
	case len(m.Body) > maxProposalBody || !utf8.ValidString(m.Body):
		return invalid("a proposal's body is at most %d bytes of UTF-8, got %d bytes", maxProposalBody, len(m.Body))
	}
	if m.Kind != ProposalAttestRoots && (len(m.AddRoots) > 0 || len(m.RemoveRoots) > 0) {
		return invalid("a %s proposal changes no roots of trust (add_roots, remove_roots are an attest_roots proposal's)", m.Kind)
	}
	switch m.Kind {
	case ProposalAttestRoots:
		if len(m.Changes) > 0 || m.To != nil || m.Amount != 0 {
			return invalid("an attest_roots proposal has only roots to add and to remove")
		}
		return checkRootChange(m.AddRoots, m.RemoveRoots)
	case ProposalParam:
		if len(m.Changes) == 0 || len(m.Changes) > maxParamChanges {
			return invalid("a param proposal sets 1 to %d parameters, not %d", maxParamChanges, len(m.Changes))
		}
		if m.To != nil || m.Amount != 0 {
			return invalid("a param proposal has no recipient or amount")
		}
	case ProposalSpend:
		if m.To == nil || m.To.IsZero() {
			return fmt.Errorf("a spend proposal needs a recipient (to): %w", ErrInvalidAddress)
		}
		if m.Amount == 0 {
			return fmt.Errorf("a spend proposal's amount must be positive: %w", ErrInvalidAmount)
		}
		if len(m.Changes) > 0 {
			return invalid("a spend proposal changes no parameters")
		}
	case ProposalText:
		if len(m.Changes) > 0 || m.To != nil || m.Amount != 0 {
			return invalid("a text proposal has only a title and a body")
		}
	default:
		return invalid("proposal kind %q: want param, spend, text or attest_roots", m.Kind)
	}
	return nil
}

// ValidateBasic implements Msg.
func (m *MsgDeposit) ValidateBasic() error {
	if m.ProposalID == 0 {
		return invalid("proposal_id must be positive")
	}
	return positive(m.Amount)
}

// ValidateBasic implements Msg.
func (m *MsgVote) ValidateBasic() error {
	if m.ProposalID == 0 {
		return invalid("proposal_id must be positive")
	}
	if !slices.Contains(voteOptions, m.Option) {
		return invalid("vote %q: want yes, no, abstain or veto", m.Option)
	}
	return nil
}

func execSubmitProposal(o *Overlay, from address.Address, m *MsgSubmitProposal, p Params, info BlockInfo) ([]Event, error) {
	switch m.Kind {
	case ProposalParam:
		if _, err := ApplyParamChanges(p, m.Changes); err != nil {
			return nil, err
		}
	case ProposalSpend:
		if tr := Treasury(o); uint64(m.Amount) > tr {
			return nil, fmt.Errorf("the treasury holds %dusync, less than the %dusync asked for: %w", tr, m.Amount, ErrInsufficientFunds)
		}
	case ProposalAttestRoots:
		if _, err := applyRootChange(GetAttestRoots(o), m.AddRoots, m.RemoveRoots); err != nil {
			return nil, fmt.Errorf("%w: %w", err, ErrInvalidMsg)
		}
	}
	h := uint64(info.Height)
	minDep := raiseMinDeposit(o, p)
	if initial := mulDiv(minDep, p.GovInitialDepositPPM, ppm); uint64(m.Deposit) < initial {
		return nil, fmt.Errorf("initial deposit %dusync is below %dusync (params.gov_initial_deposit_ppm %s of the minimum deposit, now %dusync with %d proposals active): %w",
			m.Deposit, initial, ppmPercent(p.GovInitialDepositPPM), minDep, ActiveProposals(o), ErrInsufficientFunds)
	}
	id := LastProposalID(o) + 1
	prop := &Proposal{
		ID: id, Kind: m.Kind, Proposer: from, Title: m.Title, Body: m.Body, Changes: m.Changes, To: m.To, Amount: uint64(m.Amount),
		AddRoots: m.AddRoots, RemoveRoots: m.RemoveRoots,
		Status: ProposalDeposit, SubmitHeight: h, DepositEnd: h + p.GovDepositBlocks, MinDeposit: minDep,
	}
	if err := addDeposit(o, prop, from, uint64(m.Deposit)); err != nil {
		return nil, err
	}
	setUint(o, keyGovNext, id)
	setUint(o, keyGovActive, ActiveProposals(o)+1)
	evs := []Event{{Type: "proposal_submitted", Attrs: []Attr{
		{"proposal", strconv.FormatUint(id, 10)}, {"kind", m.Kind}, {"proposer", from.String()}, {"title", m.Title},
		{"deposit", strconv.FormatUint(prop.Deposit, 10)}, {"min_deposit", strconv.FormatUint(minDep, 10)},
		{"deposit_end", strconv.FormatUint(prop.DepositEnd, 10)},
	}}}
	evs = append(evs, startVotingIfDeposited(prop, p, h)...)
	setProposal(o, nil, prop)
	return evs, nil
}

// startVotingIfDeposited moves prop into its voting period once its
// deposits reach its minimum deposit.
func startVotingIfDeposited(prop *Proposal, p Params, h uint64) []Event {
	if prop.Status != ProposalDeposit || prop.Deposit < prop.MinDeposit {
		return nil
	}
	prop.Status, prop.VotingStart, prop.VotingEnd = ProposalVoting, h, h+p.GovVotingBlocks
	return []Event{{Type: "proposal_voting", Attrs: []Attr{{"proposal", strconv.FormatUint(prop.ID, 10)},
		{"voting_start", strconv.FormatUint(h, 10)}, {"voting_end", strconv.FormatUint(prop.VotingEnd, 10)}}}}
}

func execDeposit(o *Overlay, from address.Address, m *MsgDeposit, p Params, info BlockInfo) ([]Event, error) {
	prop, err := mustProposal(o, m.ProposalID)
	if err != nil {
		return nil, err
	}
	if prop.Status != ProposalDeposit {
		return nil, invalid("proposal %d is %s: deposits are taken only in its deposit period", prop.ID, prop.Status)
	}
	old := *prop
	if err := addDeposit(o, prop, from, uint64(m.Amount)); err != nil {
		return nil, err
	}
	evs := []Event{{Type: "proposal_deposit", Attrs: []Attr{{"proposal", strconv.FormatUint(prop.ID, 10)}, {"depositor", from.String()},
		{"amount", strconv.FormatUint(uint64(m.Amount), 10)}, {"deposit", strconv.FormatUint(prop.Deposit, 10)}, {"min_deposit", strconv.FormatUint(prop.MinDeposit, 10)}}}}
	evs = append(evs, startVotingIfDeposited(prop, p, uint64(info.Height))...)
	setProposal(o, &old, prop)
	return evs, nil
}

func execVote(o *Overlay, from address.Address, m *MsgVote) ([]Event, error) {
	prop, err := mustProposal(o, m.ProposalID)
	if err != nil {
		return nil, err
	}
	if prop.Status != ProposalVoting {
		return nil, invalid("proposal %d is %s: votes are taken only in its voting period", prop.ID, prop.Status)
	}
	w := weightOf(o, from)
	if w == 0 && !hasDelegations(o, from) {
		return nil, fmt.Errorf("%s has no bonded stake (a validator bond, provider stake or delegation), so its vote would weigh nothing: %w", from, ErrInsufficientStake)
	}
	k := govVoteKey(prop.ID, from)
	before := -1 // the option voted before, if any
	if v := o.Get(k); v == nil {
		old := *prop
		prop.Voters++
		setProposal(o, &old, prop)
	} else {
		before = int(v[0])
	}
	opt := slices.Index(voteOptions, m.Option)
	o.Set(k, []byte{byte(opt)})
	moveVote(o, prop.ID, before, opt, w)
	if err := moveDelegatedVote(o, prop.ID, from, before, opt); err != nil {
		return nil, err
	}
	return []Event{{Type: "proposal_vote", Attrs: []Attr{{"proposal", strconv.FormatUint(prop.ID, 10)}, {"voter", from.String()},
		{"option", m.Option}, {"weight", strconv.FormatUint(w, 10)}}}}, nil
}
