package ledger

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
)

// Liveness challenges (DESIGN.md section 5, the seeds' "proof of
// time-lock"): at the end of every block a sample of online providers, drawn
// with the block's seed, gets a challenge it must answer with a
// MsgLivenessProof within params.liveness_window blocks. Uptime is the
// answered fraction. A miss costs reputation; params.liveness_max_missed
// misses in a row mark the provider offline.

func livenessDeadlineKey(deadline uint64, a address.Address) []byte {
	k := binary.BigEndian.AppendUint64(slices.Clone(prefixLivenessDeadline), deadline)
	return append(k, a[:]...)
}

func execLivenessProof(o *Overlay, from address.Address, m *MsgLivenessProof, info BlockInfo) ([]Event, error) {
	p, err := mustProvider(o, from)
	if err != nil {
		return nil, err
	}
	c := p.Challenge
	if c == nil {
		return nil, fmt.Errorf("%s has no open liveness challenge: %w", from, ErrNoChallenge)
	}
	if c.Height != m.Height {
		return nil, fmt.Errorf("%s's open challenge is from height %d, the proof is for %d: %w", from, c.Height, m.Height, ErrNoChallenge)
	}
	if m.Proof != LivenessProof(c.Seed, from) {
		return nil, fmt.Errorf("liveness proof does not match the challenge seed: %w", ErrInvalidMsg)
	}
	o.Delete(livenessDeadlineKey(c.Deadline, from))
	p.Challenge = nil
	p.Answered++
	p.MissedInARow = 0
	p.raiseReputation()
	setProvider(o, p)
	return []Event{{Type: "liveness_answered", Attrs: []Attr{{"provider", from.String()}, {"height", strconv.FormatUint(m.Height, 10)}}}}, nil
}

// expireChallenges counts as missed every challenge whose deadline is
// before height.
func expireChallenges(o *Overlay, height uint64, params Params, info BlockInfo) ([]Event, error) {
	var expired []address.Address
	o.Iterate(prefixLivenessDeadline, livenessDeadlineKey(height, address.Address{}), func(k, _ []byte) bool {
		var a address.Address
		copy(a[:], k[len(prefixLivenessDeadline)+8:])
		expired = append(expired, a)
		return true
	})
	var events []Event
	for _, a := range expired {
		p, err := mustProvider(o, a)
		if err != nil {
			return nil, err
		}
		o.Delete(livenessDeadlineKey(p.Challenge.Deadline, a))
		p.Challenge = nil
		p.Missed++
		p.MissedInARow++
		p.Reputation -= p.Reputation / reputationLossDiv
		ev := Event{Type: "liveness_missed", Attrs: []Attr{{"provider", a.String()}, {"missed_in_a_row", strconv.FormatUint(p.MissedInARow, 10)}}}
		wentOffline := p.MissedInARow >= params.LivenessMaxMissed && p.Online
		if wentOffline {
			if err := setOffline(o, p); err != nil {
				return nil, err
			}
			ev.Attrs = append(ev.Attrs, Attr{"offline", "true"})
		}
		setProvider(o, p)
		events = append(events, ev)
		if wentOffline {
			evs, err := reassignJobsOf(o, a, params, info)
			if err != nil {
				return nil, err
			}
			events = append(events, evs...)
		}
	}
	return events, nil
}

// issueChallenges draws this block's sample of online providers from seed.
func issueChallenges(o *Overlay, height uint64, seed Hash, params Params) ([]Event, error) {
	n := OnlineCount(o)
	if n == 0 || params.LivenessRatePPM == 0 {
		return nil, nil
	}
	want := (n*params.LivenessRatePPM + ppm - 1) / ppm
	want = max(1, min(want, params.LivenessMaxPerBlock, n))
	var events []Event
	issued := uint64(0)
	for draw := uint64(0); draw < 4*want && issued < want; draw++ {
		h := sha256.New()
		h.Write([]byte("gpunet/liveness-draw/v1\x00"))
		h.Write(seed[:])
		h.Write(binary.BigEndian.AppendUint64(nil, draw))
		idx := binary.BigEndian.Uint64(h.Sum(nil)) % n
		a, err := address.FromBytes(o.Get(onlineKey(idx)))
		if err != nil {
			return nil, fmt.Errorf("online index %d: %w: %w", idx, err, ErrInternal)
		}
		p, err := mustProvider(o, a)
		if err != nil {
			return nil, err
		}
		if p.Challenge != nil {
			continue
		}
		c := &LivenessChallenge{Height: height, Deadline: height + params.LivenessWindow}
		c.Seed = sha256.Sum256(append(append([]byte("gpunet/liveness-seed/v1\x00"), seed[:]...), a[:]...))
		p.Challenge = c
		setProvider(o, p)
		o.Set(livenessDeadlineKey(c.Deadline, a), []byte{1})
		issued++
		events = append(events, Event{Type: "liveness_challenge", Attrs: []Attr{{"provider", a.String()}, {"deadline", strconv.FormatUint(c.Deadline, 10)}}})
	}
	return events, nil
}

// LivenessChallenge is an open liveness challenge.
type LivenessChallenge struct {
	Height   uint64 `json:"height"`   // block that issued it
	Deadline uint64 `json:"deadline"` // last block in which the answer counts
	Seed     Hash   `json:"seed"`
}

// MsgLivenessProof answers the sender's open liveness challenge.
type MsgLivenessProof struct {
	Height uint64 `json:"height"` // the challenge's height
	Proof  Hash   `json:"proof"`  // LivenessProof(seed, sender)
}

// Type implements Msg.
func (*MsgLivenessProof) Type() MsgType { return MsgTypeLivenessProof }

// ValidateBasic implements Msg.
func (m *MsgLivenessProof) ValidateBasic() error {
	if m.Height == 0 {
		return fmt.Errorf("liveness proof for height 0: %w", ErrInvalidMsg)
	}
	return nil
}

// LivenessProof is the answer to a liveness challenge with seed for addr.
func LivenessProof(seed Hash, addr address.Address) Hash {
	h := sha256.New()
	h.Write([]byte("gpunet/liveness/v1\x00"))
	h.Write(seed[:])
	h.Write(addr[:])
	var out Hash
	h.Sum(out[:0])
	return out
}
