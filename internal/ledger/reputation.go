package ledger

import (
	"slices"
	"strings"

	"github.com/gpunet/gpunet/internal/address"
)

// Reputation and verification records: how verdicts and challenges move a
// provider's reputation, and its record per hardware class that drives
// adaptive replication (verification.go).

// Reputation moves: a new provider starts at half; each answered challenge
// closes 2% of the gap to 1, each miss takes away a fifth.
const (
	initialReputation = ppm / 2
	reputationGainDiv = 50
	reputationLossDiv = 5
)

const reputationInvalidDiv = 2

// reputationSlowDiv: a late hardware-challenge proof takes a twentieth of
// the reputation (the device was slower than it claimed, not dishonest).
const reputationSlowDiv = 20

// Reputation moves on verdicts and challenges: a confirmed result, an
// answered liveness challenge or a passed hardware challenge closes 2% of
// the gap to the provider's ceiling; an outvoted result or a failed
// challenge halves it, and so does a result committed and never revealed.
//
// The ceiling is 10⁶ × (validated+1) / (validated+1 + 10 × (invalid +
// unrevealed + failed challenges)): evidence of cheating caps what uptime alone can win
// back. A provider outvoted 7 times and never validated stays under 1.5%
// however many liveness challenges it answers; only confirmed results
// raise the cap again.
func (p *Provider) ReputationCeiling() uint64 {
	good := p.Validated + 1
	return ppm * good / (good + 10*(p.Invalid+p.Unrevealed+p.Challenges.Failed))
}

func (p *Provider) raiseReputation() {
	if c := p.ReputationCeiling(); p.Reputation < c {
		p.Reputation += (c - p.Reputation) / reputationGainDiv
	}
}

// ClassRecord is a provider's verification record in one hardware class.
type ClassRecord struct {
	Class string `json:"class"`
	// Consecutive is how many results in a row a replica confirmed; a
	// result outvoted resets it.
	Consecutive uint64 `json:"consecutive"`
	Validated   uint64 `json:"validated"`
	Invalid     uint64 `json:"invalid"`
}

func (p *Provider) classRecord(class string) *ClassRecord {
	i, found := slices.BinarySearchFunc(p.Classes, class, func(r ClassRecord, c string) int { return strings.Compare(r.Class, c) })
	if !found {
		p.Classes = slices.Insert(p.Classes, i, ClassRecord{Class: class})
	}
	return &p.Classes[i]
}

// Consecutive returns p's consecutive validated results in class.
func (p *Provider) Consecutive(class string) uint64 {
	for _, r := range p.Classes {
		if r.Class == class {
			return r.Consecutive
		}
	}
	return 0
}

func recordValidated(o *Overlay, addr address.Address, class string) error {
	pr, ok, err := GetProvider(o, addr)
	if err != nil || !ok {
		return err
	}
	r := pr.classRecord(class)
	r.Consecutive++
	r.Validated++
	pr.Validated++
	pr.raiseReputation()
	setProvider(o, pr)
	return nil
}

func recordInvalid(o *Overlay, addr address.Address, class string) error {
	pr, ok, err := GetProvider(o, addr)
	if err != nil || !ok {
		return err
	}
	r := pr.classRecord(class)
	r.Consecutive = 0
	r.Invalid++
	pr.Invalid++
	pr.Reputation -= pr.Reputation / reputationInvalidDiv
	setProvider(o, pr)
	return nil
}

// recordUnrevealed counts a withheld result: as an outvoted one for the
// class record and the reputation (which halves), and in Unrevealed rather
// than Invalid so that the record still tells the two apart.
func recordUnrevealed(o *Overlay, addr address.Address, class string) error {
	pr, ok, err := GetProvider(o, addr)
	if err != nil || !ok {
		return err
	}
	r := pr.classRecord(class)
	r.Consecutive = 0
	r.Invalid++
	pr.Unrevealed++
	pr.Reputation -= pr.Reputation / reputationInvalidDiv
	setProvider(o, pr)
	return nil
}
