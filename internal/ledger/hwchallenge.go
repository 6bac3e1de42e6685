package ledger

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/challenge"
)

// Hardware challenges (Proof of Sync, DESIGN.md section 5; the protocol
// and its security argument are in internal/challenge). At the end of a
// block the chain draws online providers and gives each a seed and a GEMM
// sized for the throughput it claims. The provider commits the Merkle root
// of the product before the plan's deadline (MsgChallengeCommit); the seed
// of the next block chooses the entries it must open; it opens them with
// proofs within params.hw_open_millis of that block (MsgChallengeOpen), and every
// validator checks them at about a thousandth of the work.
//
//   - commit in time and a correct opening: passed; the claim is proven.
//   - commit late, correct opening: failed (slashed), and the throughput
//     the late commit shows replaces the claim in offers and scheduling.
//   - no commit by the deadline, no opening in the window, or a wrong
//     opening: failed (slashed); nothing is proven, the provider's
//     throughput counts as 0 until a later challenge proves some.
//
// A provider is challenged at most once per plan.MinGapMillis, which keeps
// an honest provider's load within 60 s an hour.

// HardwareChallenge is a provider's open hardware challenge.
type HardwareChallenge struct {
	Seed        Hash   `json:"seed"`
	Height      uint64 `json:"height"`    // block that issued it
	IssuedAt    int64  `json:"issued_at"` // that block's time, unix ms
	N           uint64 `json:"n"`
	K           uint64 `json:"k"`
	M           uint64 `json:"m"`
	ClaimedGOPS uint64 `json:"claimed_gops"`
	Openings    uint64 `json:"openings"` // entries the provider will open
	Deadline    int64  `json:"deadline"` // unix ms by which the commit must be in a block
	// Filled by MsgChallengeCommit, then by the next block.
	Root         *Hash  `json:"root,omitempty"`
	CommittedAt  int64  `json:"committed_at,omitempty"` // unix ms
	CommitHeight uint64 `json:"commit_height,omitempty"`
	Randomness   *Hash  `json:"randomness,omitempty"`
	OpenBy       int64  `json:"open_by,omitempty"` // unix ms: the last block time an opening counts at
}

func (c *HardwareChallenge) size() challenge.Size {
	return challenge.Size{N: int(c.N), K: int(c.K), M: int(c.M)}
}

// Challenge is the computation the provider must do.
func (c *HardwareChallenge) Challenge() challenge.Challenge {
	return challenge.Challenge{Seed: c.Seed, Size: c.size(), Openings: int(c.Openings)}
}

// ChallengeRecord is a provider's history of hardware challenges.
type ChallengeRecord struct {
	Passed uint64 `json:"passed"`
	Failed uint64 `json:"failed"`
	// LastAt is when the latest challenge was issued (unix ms).
	LastAt int64 `json:"last_at,omitempty"`
	// Proven says a challenge has ruled on the provider's throughput;
	// ProvenGOPS is what it ruled (the claim if passed, what a late commit
	// showed, 0 if nothing was shown).
	Proven     bool   `json:"proven"`
	ProvenGOPS uint64 `json:"proven_gops"`
	// LastFailure says why the latest failure happened.
	LastFailure string `json:"last_failure,omitempty"`
}

// EffectiveGOPS is the int8 throughput the scheduler and offers use: the
// declared figure, capped by what challenges have proven.
func (p *Provider) EffectiveGOPS() uint64 {
	if p.Challenges.Proven {
		return min(p.Measured.Int8GOPS, p.Challenges.ProvenGOPS)
	}
	return p.Measured.Int8GOPS
}

// ChallengePassRatePPM is the share of challenges passed, in ppm
// (1,000,000 before the first).
func (p *Provider) ChallengePassRatePPM() uint64 {
	n := p.Challenges.Passed + p.Challenges.Failed
	if n == 0 {
		return ppm
	}
	return p.Challenges.Passed * ppm / n
}

func (p Params) challengeParams() challenge.Params {
	return challenge.Params{
		TargetMillis:    p.HWTargetMillis,
		SlackPermille:   p.HWSlackPermille,
		AllowanceMillis: p.HWAllowanceMillis,
		Openings:        int(p.HWOpenings),
	}
}

var (
	prefixHWOpen = []byte("hwc/") // hwc/<address>: providers with an open challenge
)

func hwOpenKey(a address.Address) []byte { return append(slices.Clone(prefixHWOpen), a[:]...) }

// MsgChallengeCommit commits a provider to the product of its challenge.
type MsgChallengeCommit struct {
	Root Hash `json:"root"`
}

// MsgChallengeOpen opens the entries the chain chose (a challenge.Opening
// in its binary encoding).
type MsgChallengeOpen struct {
	Opening []byte `json:"opening"`
}

// Type implements Msg.
func (*MsgChallengeCommit) Type() MsgType { return MsgTypeChallengeCommit }

// Type implements Msg.
func (*MsgChallengeOpen) Type() MsgType { return MsgTypeChallengeOpen }

// ValidateBasic implements Msg.
func (m *MsgChallengeCommit) ValidateBasic() error { return nil }

// ValidateBasic implements Msg.
func (m *MsgChallengeOpen) ValidateBasic() error {
	if len(m.Opening) == 0 || len(m.Opening) > challenge.MaxOpeningBytes {
		return invalid("opening: want 1 to %d bytes, got %d", challenge.MaxOpeningBytes, len(m.Opening))
	}
	if _, err := challenge.DecodeOpening(m.Opening); err != nil {
		return invalid("opening: %v", err)
	}
	return nil
}

// issueHardwareChallenges draws providers to challenge at the end of a
// block, like liveness challenges: params.hw_rate_ppm of the online
// providers, at most params.hw_max_per_block, skipping those with an open
// challenge or challenged within their plan's minimum gap.
func issueHardwareChallenges(o *Overlay, info BlockInfo, p Params) ([]Event, error) {
	n := OnlineCount(o)
	if n == 0 || p.HWRatePPM == 0 {
		return nil, nil
	}
	want := (n*p.HWRatePPM + ppm - 1) / ppm
	want = max(1, min(want, p.HWMaxPerBlock, n))
	now := info.Time.UnixMilli()
	var events []Event
	issued := uint64(0)
	for d := uint64(0); d < 4*want && issued < want; d++ {
		idx := draw(info.Seed, "hw-challenge", d) % n
		a, err := address.FromBytes(o.Get(onlineKey(idx)))
		if err != nil {
			return nil, fmt.Errorf("online index %d: %w: %w", idx, err, ErrInternal)
		}
		pr, err := mustProvider(o, a)
		if err != nil {
			return nil, err
		}
		claim := pr.Measured.Int8GOPS
		if pr.HWChallenge != nil || claim == 0 {
			continue
		}
		plan, err := challenge.NewPlan(claim, p.challengeParams())
		if err != nil {
			return nil, fmt.Errorf("challenge plan for %s: %w: %w", a, err, ErrInternal)
		}
		if pr.Challenges.LastAt != 0 && now-pr.Challenges.LastAt < int64(plan.MinGapMillis) {
			continue
		}
		h := sha256.New()
		h.Write([]byte("gpunet/hw-seed/v1\x00"))
		h.Write(info.Seed[:])
		h.Write(a[:])
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(info.Height)))
		c := &HardwareChallenge{
			Height: uint64(info.Height), IssuedAt: now, ClaimedGOPS: claim, Openings: p.HWOpenings,
			N: uint64(plan.Size.N), K: uint64(plan.Size.K), M: uint64(plan.Size.M),
			Deadline: now + int64(plan.DeadlineMillis),
		}
		h.Sum(c.Seed[:0])
		pr.HWChallenge = c
		pr.Challenges.LastAt = now
		setProvider(o, pr)
		o.Set(hwOpenKey(a), []byte{1})
		issued++
		events = append(events, Event{Type: "hw_challenge", Attrs: []Attr{
			{"provider", a.String()}, {"size", plan.Size.String()}, {"claimed_gops", strconv.FormatUint(claim, 10)},
			{"deadline_ms", strconv.FormatUint(plan.DeadlineMillis, 10)},
		}})
	}
	return events, nil
}

// advanceHardwareChallenges runs at the end of each block over the open
// challenges: it gives the randomness of this block to those committed in
// an earlier one, and fails those past a deadline.
func advanceHardwareChallenges(o *Overlay, info BlockInfo, p Params) ([]Event, error) {
	var open []address.Address
	o.Iterate(prefixHWOpen, prefixEnd(prefixHWOpen), func(k, _ []byte) bool {
		var a address.Address
		copy(a[:], k[len(prefixHWOpen):])
		open = append(open, a)
		return true
	})
	h := uint64(info.Height)
	now := info.Time.UnixMilli()
	var events []Event
	for _, a := range open {
		pr, err := mustProvider(o, a)
		if err != nil {
			return nil, err
		}
		c := pr.HWChallenge
		switch {
		case c == nil:
			o.Delete(hwOpenKey(a))
		case c.Root == nil && now > c.Deadline:
			evs, err := failChallenge(o, pr, 0, fmt.Sprintf("no commit by the deadline (%d ms for %s at the claimed %d GOPS)", c.Deadline-c.IssuedAt, c.size(), c.ClaimedGOPS), p, info)
			if err != nil {
				return nil, err
			}
			events = append(events, evs...)
		case c.Root != nil && c.Randomness == nil && c.CommitHeight < h:
			// The entries to open come from a block after the commit's.
			r := info.Seed
			c.Randomness = &r
			c.OpenBy = now + int64(p.HWOpenMillis)
			setProvider(o, pr)
			events = append(events, Event{Type: "hw_challenge_open", Attrs: []Attr{{"provider", a.String()}, {"open_by_ms", strconv.FormatInt(c.OpenBy, 10)}}})
		case c.Randomness != nil && now > c.OpenBy:
			evs, err := failChallenge(o, pr, 0, "no opening in time", p, info)
			if err != nil {
				return nil, err
			}
			events = append(events, evs...)
		}
	}
	return events, nil
}

func execChallengeCommit(o *Overlay, from address.Address, m *MsgChallengeCommit, info BlockInfo) ([]Event, error) {
	pr, err := mustProvider(o, from)
	if err != nil {
		return nil, err
	}
	c := pr.HWChallenge
	if c == nil || c.Root != nil {
		return nil, fmt.Errorf("%s has no hardware challenge waiting for a commit: %w", from, ErrNoChallenge)
	}
	root := m.Root
	c.Root = &root
	c.CommittedAt = info.Time.UnixMilli()
	c.CommitHeight = uint64(info.Height)
	setProvider(o, pr)
	late := ""
	if c.CommittedAt > c.Deadline {
		late = " (late)"
	}
	return []Event{{Type: "hw_challenge_commit", Attrs: []Attr{{"provider", from.String()}, {"elapsed_ms", strconv.FormatInt(c.CommittedAt-c.IssuedAt, 10) + late}}}}, nil
}

func execChallengeOpen(o *Overlay, from address.Address, m *MsgChallengeOpen, p Params, info BlockInfo) ([]Event, error) {
	pr, err := mustProvider(o, from)
	if err != nil {
		return nil, err
	}
	c := pr.HWChallenge
	if c == nil || c.Randomness == nil {
		return nil, fmt.Errorf("%s has no hardware challenge waiting for an opening: %w", from, ErrNoChallenge)
	}
	op, err := challenge.DecodeOpening(m.Opening)
	if err != nil {
		return nil, fmt.Errorf("opening: %v: %w", err, ErrInvalidMsg)
	}
	if err := c.Challenge().Verify(*c.Root, *c.Randomness, op); err != nil {
		if errors.Is(err, challenge.ErrEncoding) || errors.Is(err, challenge.ErrCount) {
			// Malformed, not wrong: refuse it, the provider may send a
			// proper one within the window.
			return nil, fmt.Errorf("opening: %v: %w", err, ErrInvalidMsg)
		}
		return failChallenge(o, pr, 0, "wrong opening: "+err.Error(), p, info)
	}
	elapsed := uint64(max(c.CommittedAt-c.IssuedAt, 1))
	if c.CommittedAt > c.Deadline {
		shown := challenge.MeasuredGOPS(c.size(), elapsed)
		return failChallenge(o, pr, shown, fmt.Sprintf("commit %d ms after the challenge, deadline %d ms: shows %d GOPS, claimed %d", elapsed, c.Deadline-c.IssuedAt, shown, c.ClaimedGOPS), p, info)
	}
	pr.Challenges.Passed++
	pr.Challenges.Proven = true
	pr.Challenges.ProvenGOPS = c.ClaimedGOPS
	pr.raiseReputation()
	pr.HWChallenge = nil
	setProvider(o, pr)
	o.Delete(hwOpenKey(from))
	return []Event{{Type: "hw_challenge_passed", Attrs: []Attr{{"provider", from.String()}, {"elapsed_ms", strconv.FormatUint(elapsed, 10)}}}}, nil
}

// failChallenge slashes a provider for a failed hardware challenge, halves
// its reputation and records what throughput, if any, it showed.
func failChallenge(o *Overlay, pr *Provider, shownGOPS uint64, why string, p Params, info BlockInfo) ([]Event, error) {
	a := pr.Address
	pr.Challenges.Failed++
	pr.Challenges.Proven = true
	pr.Challenges.ProvenGOPS = shownGOPS
	pr.Challenges.LastFailure = why
	pr.Reputation -= pr.Reputation / reputationInvalidDiv
	pr.HWChallenge = nil
	setProvider(o, pr)
	o.Delete(hwOpenKey(a))
	amt, err := slash(o, a, address.Address{}, p, info, "hardware challenge: "+why)
	if err != nil {
		return nil, err
	}
	return []Event{{Type: "hw_challenge_failed", Attrs: []Attr{
		{"provider", a.String()}, {"reason", why}, {"slashed", strconv.FormatUint(amt, 10)},
	}}}, nil
}
