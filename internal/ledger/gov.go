package ledger

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/gpunet/gpunet/internal/address"
)

// Governance: proposals, their deposits and votes. A proposal changes
// parameters (within the registry's bounds and steps, paramreg.go), spends
// from the treasury, or only says something (text). Its life:
//
//	deposit ──(deposits reach its minimum deposit)──▶ voting ──(tally)──▶ passed | rejected | vetoed | failed
//	   └──(deposit period over first)──▶ expired
//
// A period that ends at height E takes deposits or votes in blocks up to
// E; the start of block E+1 closes it (beginGov, gov_tally.go), before
// anything else in that block, so that a passed parameter change applies
// to all of block E+1 and after on every validator. The minimum deposit's
// rule is in gov_deposit.go, the messages in msg_gov.go.

// Proposal kinds.
const (
	ProposalParam = "param"
	ProposalSpend = "spend"
	ProposalText  = "text"
	// ProposalAttestRoots adds and removes roots of trust of TEE evidence
	// (AddRoots, RemoveRoots: the SHA-256 of DER root certificates) in
	// tee/roots (tee.go).
	ProposalAttestRoots = "attest_roots"
)

// Proposal statuses.
const (
	ProposalDeposit  = "deposit"  // gathering its minimum deposit
	ProposalVoting   = "voting"   // open to votes
	ProposalPassed   = "passed"   // passed and executed
	ProposalRejected = "rejected" // no quorum, or not enough yes: deposits returned
	ProposalVetoed   = "vetoed"   // too much veto: deposits burned
	ProposalExpired  = "expired"  // never reached its minimum deposit: deposits burned
	ProposalFailed   = "failed"   // passed, but could not be executed: deposits returned
)

// Vote options.
const (
	VoteYes     = "yes"
	VoteNo      = "no"
	VoteAbstain = "abstain"
	VoteVeto    = "veto"
)

var voteOptions = []string{VoteYes, VoteNo, VoteAbstain, VoteVeto}

// Proposal is the record of one proposal, stored at gov/p/<id>.
type Proposal struct {
	ID       uint64          `json:"id"`
	Kind     string          `json:"kind"`
	Proposer address.Address `json:"proposer"`
	Title    string          `json:"title"`
	Body     string          `json:"body,omitempty"`
	// Changes are a param proposal's; To and Amount a spend's.
	Changes []ParamChange    `json:"changes,omitempty"`
	To      *address.Address `json:"to,omitempty"`
	Amount  uint64           `json:"amount,omitempty"`
	// AddRoots and RemoveRoots are an attest_roots proposal's: hex
	// SHA-256 of DER root certificates.
	AddRoots    []string `json:"add_roots,omitempty"`
	RemoveRoots []string `json:"remove_roots,omitempty"`

	Status       string `json:"status"`
	SubmitHeight uint64 `json:"submit_height"`
	// DepositEnd is the last height that takes deposits; MinDeposit what
	// the deposits must reach by then (the minimum deposit when it was
	// submitted), Deposit what they hold.
	DepositEnd uint64 `json:"deposit_end"`
	MinDeposit uint64 `json:"min_deposit"`
	Deposit    uint64 `json:"deposit"`
	// VotingStart and VotingEnd bound the voting period (0 before it);
	// Voters counts the accounts that voted.
	VotingStart uint64 `json:"voting_start,omitempty"`
	VotingEnd   uint64 `json:"voting_end,omitempty"`
	Voters      uint64 `json:"voters"`
	// Tally is the final tally, once decided.
	Tally *Tally `json:"tally,omitempty"`
	// DecidedHeight is the block whose start decided it (a period's end
	// + 1); a passed change applies from that block on. Wait says why it
	// ended as it did (a code and its numbers, wait.go); Reason said it
	// in a sentence in records written before (version 1), and the API
	// fills it in from Wait (internal/jobtext).
	DecidedHeight uint64 `json:"decided_height,omitempty"`
	Reason        string `json:"reason,omitempty"`
	Wait          *Wait  `json:"wait,omitempty"`
}

// Active reports whether p still takes deposits or votes.
func (p *Proposal) Active() bool { return p.Status == ProposalDeposit || p.Status == ProposalVoting }

// periodEnd is the end of p's current period (its queue entry).
func (p *Proposal) periodEnd() uint64 {
	if p.Status == ProposalVoting {
		return p.VotingEnd
	}
	return p.DepositEnd
}

// Tally is a count of votes, each weighted by its voter's bonded stake.
type Tally struct {
	Yes     uint64 `json:"yes"`
	No      uint64 `json:"no"`
	Abstain uint64 `json:"abstain"`
	Veto    uint64 `json:"veto"`
	// Bonded is all the bonded stake there is (the quorum's base).
	Bonded uint64 `json:"bonded"`
}

// Voted is the weight of every vote.
func (t Tally) Voted() uint64 { return t.Yes + t.No + t.Abstain + t.Veto }

// Limits on a proposal's text.
const (
	maxProposalTitle = 140
	maxProposalBody  = 10_000
	maxReason        = 300
)

// The record's encoding: a version byte, then the fields in order. A
// decided proposal with a Wait is written at version 2, with the Wait (in
// the records' codec of version waitRecordVersion) after the fields of
// version 1; one without keeps version 1 and its bytes.
//
// An attest_roots proposal is written at version 3: the fields of version
// 1, whether a Wait follows and the Wait, then its roots; the other kinds
// keep versions 1 and 2, so their bytes (and app hashes) do not change.
const (
	proposalRecordVersion = 1
	proposalWaitVersion   = 2
	proposalRootsVersion  = 3
	waitRecordVersion     = 6
)

func (p *Proposal) encode() []byte {
	e := encoder{buf: make([]byte, 0, 128+len(p.Title)+len(p.Body)), version: waitRecordVersion}
	roots := p.Kind == ProposalAttestRoots
	if roots {
		e.raw([]byte{proposalRootsVersion})
	} else if p.Wait != nil {
		e.raw([]byte{proposalWaitVersion})
	} else {
		e.raw([]byte{proposalRecordVersion})
	}
	e.uvarint(p.ID)
	e.string(p.Kind)
	e.raw(p.Proposer[:])
	e.string(p.Title)
	e.string(p.Body)
	e.uvarint(uint64(len(p.Changes)))
	for _, c := range p.Changes {
		e.string(c.Key)
		e.uvarint(c.Value)
	}
	e.bool(p.To != nil)
	if p.To != nil {
		e.raw(p.To[:])
	}
	e.uvarint(p.Amount)
	e.string(p.Status)
	e.uvarint(p.SubmitHeight)
	e.uvarint(p.DepositEnd)
	e.uvarint(p.MinDeposit)
	e.uvarint(p.Deposit)
	e.uvarint(p.VotingStart)
	e.uvarint(p.VotingEnd)
	e.uvarint(p.Voters)
	e.bool(p.Tally != nil)
	if t := p.Tally; t != nil {
		e.uvarint(t.Yes)
		e.uvarint(t.No)
		e.uvarint(t.Abstain)
		e.uvarint(t.Veto)
		e.uvarint(t.Bonded)
	}
	e.uvarint(p.DecidedHeight)
	e.string(p.Reason)
	if roots {
		e.bool(p.Wait != nil)
	}
	if p.Wait != nil {
		p.Wait.encodeRec(&e)
	}
	if roots {
		for _, l := range [][]string{p.AddRoots, p.RemoveRoots} {
			e.uvarint(uint64(len(l)))
			for _, r := range l {
				e.string(r)
			}
		}
	}
	return e.buf
}

func decodeProposal(b []byte) (*Proposal, error) {
	if len(b) == 0 || b[0] < proposalRecordVersion || b[0] > proposalRootsVersion {
		return nil, fmt.Errorf("proposal record version is not %d to %d: %w", proposalRecordVersion, proposalRootsVersion, ErrInternal)
	}
	d := decoder{buf: b, off: 1, version: waitRecordVersion}
	p := &Proposal{}
	p.ID = d.uvarint("id")
	p.Kind = string(d.bytes("kind", 16))
	copy(p.Proposer[:], d.raw("proposer", address.Len))
	p.Title = string(d.bytes("title", maxProposalTitle))
	p.Body = string(d.bytes("body", maxProposalBody))
	n := d.uvarint("changes")
	if n > maxParamChanges {
		return nil, fmt.Errorf("proposal record: %d changes: %w", n, ErrInternal)
	}
	for range n {
		p.Changes = append(p.Changes, ParamChange{Key: string(d.bytes("key", 64)), Value: d.uvarint("value")})
	}
	if d.bool("has_to") {
		var a address.Address
		copy(a[:], d.raw("to", address.Len))
		p.To = &a
	}
	p.Amount = d.uvarint("amount")
	p.Status = string(d.bytes("status", 16))
	p.SubmitHeight = d.uvarint("submit_height")
	p.DepositEnd = d.uvarint("deposit_end")
	p.MinDeposit = d.uvarint("min_deposit")
	p.Deposit = d.uvarint("deposit")
	p.VotingStart = d.uvarint("voting_start")
	p.VotingEnd = d.uvarint("voting_end")
	p.Voters = d.uvarint("voters")
	if d.bool("has_tally") {
		p.Tally = &Tally{Yes: d.uvarint("yes"), No: d.uvarint("no"), Abstain: d.uvarint("abstain"), Veto: d.uvarint("veto"), Bonded: d.uvarint("bonded")}
	}
	p.DecidedHeight = d.uvarint("decided_height")
	p.Reason = string(d.bytes("reason", maxReason))
	if b[0] == proposalWaitVersion || (b[0] == proposalRootsVersion && d.bool("has_wait")) {
		p.Wait = &Wait{}
		p.Wait.decodeRec(&d)
	}
	if b[0] == proposalRootsVersion {
		for _, l := range []*[]string{&p.AddRoots, &p.RemoveRoots} {
			n := d.uvarint("roots")
			if n > maxAttestRootsTotal {
				return nil, fmt.Errorf("proposal record: %d roots: %w", n, ErrInternal)
			}
			for range n {
				*l = append(*l, string(d.bytes("root", 64)))
			}
		}
	}
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("proposal record: %w: %w", err, ErrInternal)
	}
	return p, nil
}

func proposalKey(id uint64) []byte { return u64(slices.Clone(prefixProposal), id) }

func govQueueKey(end, id uint64) []byte { return u64(u64(slices.Clone(prefixGovQueue), end), id) }

func govDepositPrefix(id uint64) []byte { return u64(slices.Clone(prefixGovDeposit), id) }

func govDepositKey(id uint64, a address.Address) []byte { return append(govDepositPrefix(id), a[:]...) }

func govVotePrefix(id uint64) []byte { return u64(slices.Clone(prefixGovVote), id) }

func govVoteKey(id uint64, a address.Address) []byte { return append(govVotePrefix(id), a[:]...) }

// GetProposal reads proposal id.
func GetProposal(kv KV, id uint64) (*Proposal, bool, error) {
	b := kv.Get(proposalKey(id))
	if b == nil {
		return nil, false, nil
	}
	p, err := decodeProposal(b)
	if err != nil {
		return nil, false, err
	}
	return p, true, nil
}

// mustProposal reads proposal id, or says there is none.
func mustProposal(kv KV, id uint64) (*Proposal, error) {
	p, ok, err := GetProposal(kv, id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, invalid("no proposal %d (the last is %d)", id, LastProposalID(kv))
	}
	return p, nil
}

// setProposal writes p, moving its queue entry from old's period end to
// its own (no entry once it is decided).
func setProposal(o *Overlay, old, p *Proposal) {
	if old != nil && old.Active() && (!p.Active() || old.periodEnd() != p.periodEnd()) {
		o.Delete(govQueueKey(old.periodEnd(), old.ID))
	}
	if p.Active() && (old == nil || !old.Active() || old.periodEnd() != p.periodEnd()) {
		o.Set(govQueueKey(p.periodEnd(), p.ID), []byte{1})
	}
	o.Set(proposalKey(p.ID), p.encode())
}

// LastProposalID is the id of the newest proposal (0: none yet).
func LastProposalID(kv KV) uint64 { return getUint(kv, keyGovNext) }

// ActiveProposals is how many proposals take deposits or votes.
func ActiveProposals(kv KV) uint64 { return getUint(kv, keyGovActive) }

// GovDeposits is what the active proposals' deposits hold, in usync.
func GovDeposits(kv KV) uint64 { return getUint(kv, keyGovDeposits) }

// ProposalsBefore calls fn with the proposals whose id is below before (0:
// all), newest first, until fn returns false.
func ProposalsBefore(kv KV, before uint64, fn func(p *Proposal) bool) error {
	end := prefixEnd(prefixProposal)
	if before > 0 {
		end = proposalKey(before)
	}
	var ids []uint64
	kv.Iterate(prefixProposal, end, func(k, _ []byte) bool {
		ids = append(ids, binary.BigEndian.Uint64(k[len(prefixProposal):]))
		return true
	})
	for _, id := range slices.Backward(ids) {
		p, _, err := GetProposal(kv, id)
		if err != nil {
			return err
		}
		if !fn(p) {
			break
		}
	}
	return nil
}

// Vote is one account's vote on a proposal.
type Vote struct {
	Voter  address.Address `json:"voter"`
	Option string          `json:"option"`
}

// ProposalVotes calls fn with each vote on proposal id, in voter address
// order, until fn returns false.
func ProposalVotes(kv KV, id uint64, fn func(v Vote) bool) {
	pre := govVotePrefix(id)
	kv.Iterate(pre, prefixEnd(pre), func(k, b []byte) bool {
		var v Vote
		copy(v.Voter[:], k[len(pre):])
		if len(b) == 1 && int(b[0]) < len(voteOptions) {
			v.Option = voteOptions[b[0]]
		}
		return fn(v)
	})
}

// Deposit is one account's deposit on a proposal.
type Deposit struct {
	Depositor address.Address `json:"depositor"`
	Amount    uint64          `json:"amount"`
}

// ProposalDeposits returns the deposits proposal id holds, in depositor
// address order (none once it is decided: returned or burned).
func ProposalDeposits(kv KV, id uint64) []Deposit {
	pre := govDepositPrefix(id)
	var out []Deposit
	kv.Iterate(pre, prefixEnd(pre), func(k, b []byte) bool {
		d := Deposit{Amount: binary.BigEndian.Uint64(b)}
		copy(d.Depositor[:], k[len(pre):])
		out = append(out, d)
		return true
	})
	return out
}

// setParams writes the chain's parameters.
func setParams(o *Overlay, p Params) error {
	b, err := encodeParams(p)
	if err != nil {
		return fmt.Errorf("params: %w: %w", err, ErrInternal)
	}
	o.Set(keyParams, b)
	return nil
}
