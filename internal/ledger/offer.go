package ledger

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger/sched"
)

// The offer index: what placement (package sched) reads. Every ask of every
// online provider has an entry pidx/<class>/<price per unit-hour>/<address>
// whose value encodes a sched.Offer: everything placement's hard
// constraints and its score read. setProvider rewrites a provider's entries
// whenever its record changes, so the planner filters and scores a
// provider without reading its record; the ledger reads the records of the
// providers a plan picks. A class's scan starts at the cheapest ask and
// stops at the job's price ceiling, so the cost of placing a job depends on
// the providers near its price, not on how many providers exist.

func providerIndexKey(class string, pricePerHour uint64, a address.Address) []byte {
	k := append(slices.Clone(prefixProviderIndex), class...)
	k = append(k, '/')
	k = binary.BigEndian.AppendUint64(k, pricePerHour)
	return append(k, a[:]...)
}

func classPrefix(class string) []byte {
	return append(append(slices.Clone(prefixProviderIndex), class...), '/')
}

// indexEntry is one index entry a provider record should have, with the
// buckets its class summary counts.
type indexEntry struct {
	Change
	caps sched.Caps
}

// indexEntries returns the index entries (key and offer summary) a
// provider record should have.
func indexEntries(p *Provider) []indexEntry {
	if p == nil || !p.Online {
		return nil
	}
	out := make([]indexEntry, 0, len(p.Asks))
	for _, a := range p.Asks {
		var gpus []sched.GPU
		for _, g := range p.Inventory.GPUs {
			if g.Class == a.Class {
				gpus = append(gpus, sched.GPU{VRAM: g.VRAM, ComputeCap: computeCapValue(g.ComputeCap)})
			}
		}
		out = append(out, indexEntry{
			Change: Change{Key: providerIndexKey(a.Class, uint64(a.PricePerHour), p.Address), Value: encodeOffer(p, a.Class)},
			caps:   sched.CapsOf(gpus),
		})
	}
	return out
}

// reindexProvider moves a provider's index entries, and its classes'
// summaries, from those of old to those of p.
func reindexProvider(o *Overlay, old, p *Provider) {
	before, after := indexEntries(old), indexEntries(p)
	sameKeys := len(before) == len(after)
	for i := 0; sameKeys && i < len(before); i++ {
		sameKeys = bytes.Equal(before[i].Key, after[i].Key)
	}
	if sameKeys {
		for i, e := range after {
			if !bytes.Equal(before[i].Value, e.Value) {
				// The entry holds what old's record says (an invariant):
				// the app hash will need that old value.
				o.noteBase(e.Key, before[i].Value)
				o.Set(e.Key, e.Value)
			}
			if before[i].caps != e.caps {
				adjustClassSummary(o, before[i], -1)
				adjustClassSummary(o, e, +1)
			}
		}
		return
	}
	for _, e := range before {
		o.Delete(e.Key)
		adjustClassSummary(o, e, -1)
	}
	for _, e := range after {
		o.Set(e.Key, e.Value)
		adjustClassSummary(o, e, +1)
	}
}

// indexState is sched.State over the offer index, its class summaries
// (classes.go) and the market (market.go).
type indexState struct {
	kv KV
	p  Params
	of sched.Offer // what Offers decodes into, its slices reused
	// below, when set, is the tier rank of the job being placed: an offer
	// whose provider holds an ungranted placement of a higher tier shows
	// no free position to it (yieldsToHigherTier).
	below    int
	hasBelow bool
	// trust is the trust of the job being placed: a trust: tee job pays
	// the TEE market's price (market_tee.go).
	trust string
}

// forTier returns st for placing a job of tier: the slots a higher tier's
// ungranted placement waits on are not offered to it.
func (st *indexState) forTier(tier string) *indexState {
	st.below, st.hasBelow = tierRank(tier), true
	return st
}

// forTrust returns st for placing or quoting a job of trust (TrustTEE or
// ""): MarketPrice is that trust's.
func (st *indexState) forTrust(trust string) *indexState {
	st.trust = trust
	return st
}

// yieldsToHigherTier reports whether provider holds an ungranted
// placement of a job of a higher tier than st's. A slot that a higher
// tier's placement waits on is not offered to a lower one: granted first,
// the lower would take it and bump the higher (slots.go), which would then
// preempt it again (a priority job placed in the slot its preemption
// freed, and the spot job it preempted placed beside it).
func (st *indexState) yieldsToHigherTier(provider address.Address) (bool, error) {
	pre := tentativePrefix(provider)
	higher := false
	var err error
	st.kv.Iterate(pre, prefixEnd(pre), func(k, v []byte) bool {
		if len(v) != 1 || v[0] == 0 {
			err = fmt.Errorf("ungranted placement entry %x holds %x, not a tier: %w", k, v, ErrInternal)
			return false
		}
		higher = int(v[0])-1 > st.below
		return !higher
	})
	return higher, err
}

func newIndexState(kv KV, p Params) *indexState { return &indexState{kv: kv, p: p} }

// GPUClasses lists the hardware classes with online providers, but
// CPUClass, with their summaries.
func (st *indexState) GPUClasses() ([]sched.ClassSummary, error) {
	var sums []sched.ClassSummary
	var err error
	st.kv.Iterate(prefixClassCount, prefixEnd(prefixClassCount), func(k, v []byte) bool {
		c := string(k[len(prefixClassCount):])
		if c == CPUClass {
			return true
		}
		var s classSummary
		if s, err = decodeClassSummary(c, v); err != nil {
			return false
		}
		sums = append(sums, s.top(c))
		return true
	})
	return sums, err
}

func (st *indexState) Summary(class string) (sched.ClassSummary, error) {
	s, err := getClassSummary(st.kv, []byte(class))
	if err != nil {
		return sched.ClassSummary{}, err
	}
	return s.top(class), nil
}

func (st *indexState) MarketPrice(class, tier string) (uint64, error) {
	return trustUnitPrice(st.kv, class, st.p, tier, st.trust)
}

func (st *indexState) Offers(class string, from, to uint64, fn func(*sched.Offer) bool) error {
	cp := classPrefix(class)
	start, end := cp, prefixEnd(cp)
	if from > 0 {
		start = providerIndexKey(class, from, address.Address{})
	}
	if to < math.MaxUint64 {
		end = providerIndexKey(class, to+1, address.Address{})
	}
	var err error
	st.kv.Iterate(start, end, func(k, v []byte) bool {
		if err = decodeOffer(cp, k, v, &st.of); err != nil {
			return false
		}
		if st.hasBelow && st.of.Tentative > 0 && st.below < tierRank(TierPriority) {
			var yields bool
			if yields, err = st.yieldsToHigherTier(st.of.Provider); err != nil {
				return false
			}
			if yields {
				st.of.Tentative = max(st.of.Tentative, sched.Positions(st.of.Jobs, st.of.MaxJobs))
			}
		}
		return fn(&st.of)
	})
	return err
}

// offerVersion 2: the entry holds the provider's ungranted placements
// (Tentative) after its slots.
const offerVersion = 2

// offerNetwork in an entry's flags (the byte after its version): the
// provider allows network access. The flags' low bits are the executors
// (executorBits).
const offerNetwork = 1 << 7

// offerEngine in an entry's flags: the provider runs wasm jobs on a
// declared engine, whose engineID follows the flags (8 bytes, big-endian).
// An entry written before engines were declared has neither, and reads as
// an offer without one.
const offerEngine = 1 << 6

// offerNVLink in an entry's flags: every pair of the provider's GPUs is
// linked by NVLink (Inventory.Interconnect). An entry without it reads as
// an offer without NVLink, so entries of other providers keep their bytes.
const offerNVLink = 1 << 5

// maxOfferGPUs bounds what a decoder accepts; registration allows far
// fewer GPUs than this.
const maxOfferGPUs = 1024

func executorBits(names []string) uint8 {
	var bits uint8
	for i, e := range knownExecutors {
		if slices.Contains(names, e) {
			bits |= 1 << i
		}
	}
	return bits
}

// computeCapValue turns "MAJOR.MINOR" into MAJOR*1000+MINOR; anything else
// (the empty string of an unknown GPU) is 0.
func computeCapValue(s string) uint64 {
	var major, minor uint64
	seenDot := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.' && !seenDot:
			seenDot = true
		case c >= '0' && c <= '9' && !seenDot:
			major = major*10 + uint64(c-'0')
		case c >= '0' && c <= '9':
			minor = minor*10 + uint64(c-'0')
		default:
			return 0
		}
		if major > 999 || minor > 999 {
			return 0
		}
	}
	return major*1000 + minor
}

// encodeOffer is the index value of p's ask for class.
func encodeOffer(p *Provider, class string) []byte {
	inv := &p.Inventory
	b := make([]byte, 0, 64)
	flags := executorBits(p.Executors)
	if p.Network {
		flags |= offerNetwork
	}
	engine := uint64(0)
	if slices.Contains(p.Executors, ExecutorWASM) {
		engine = engineID(p.WasmEngine)
	}
	if engine != 0 {
		flags |= offerEngine
	}
	if inv.Interconnect == InterconnectNVLink {
		flags |= offerNVLink
	}
	b = append(b, offerVersion, flags)
	if engine != 0 {
		b = binary.BigEndian.AppendUint64(b, engine)
	}
	for _, v := range []uint64{p.Backing(), uint64(len(inv.GPUs)), inv.CPUCores, inv.RAM, inv.Disk} {
		b = binary.AppendUvarint(b, v)
	}
	b = binary.AppendUvarint(b, uint64(len(p.Region)))
	b = append(b, p.Region...)
	for _, v := range []uint64{p.Jobs, p.MaxJobs, p.Tentative, p.Reputation, p.EffectiveGOPS()} {
		b = binary.AppendUvarint(b, v)
	}
	var n uint64
	for _, g := range inv.GPUs {
		if g.Class == class {
			n++
		}
	}
	b = binary.AppendUvarint(b, n)
	for _, g := range inv.GPUs {
		if g.Class == class {
			b = binary.AppendUvarint(b, g.VRAM)
			b = binary.AppendUvarint(b, computeCapValue(g.ComputeCap))
		}
	}
	return b
}

// decodeOffer reads an index entry of class prefix cp into o, reusing
// o.ClassGPUs. o.Region aliases value.
func decodeOffer(cp, key, value []byte, o *sched.Offer) error {
	if len(key) != len(cp)+8+address.Len {
		return fmt.Errorf("index key %x has %d bytes, want %d: %w", key, len(key), len(cp)+8+address.Len, ErrInternal)
	}
	o.Ask = binary.BigEndian.Uint64(key[len(cp):])
	copy(o.Provider[:], key[len(cp)+8:])
	bad := func(what string) error {
		return fmt.Errorf("index entry %s of %s: corrupt offer (%s): %w", key[:len(cp)], o.Provider, what, ErrInternal)
	}
	if len(value) < 2 || value[0] != offerVersion {
		return bad("version")
	}
	flags := value[1]
	o.Executors, o.Network = flags&^(offerNetwork|offerEngine|offerNVLink), flags&offerNetwork != 0
	o.NVLink = flags&offerNVLink != 0
	rest := value[2:]
	o.Engine = 0
	if flags&offerEngine != 0 {
		if len(rest) < 8 {
			return bad("engine")
		}
		o.Engine, rest = binary.BigEndian.Uint64(rest), rest[8:]
		if o.Engine == 0 {
			return bad("engine")
		}
	}
	next := func(dst *uint64) bool {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			return false
		}
		*dst, rest = v, rest[n:]
		return true
	}
	var regionLen uint64
	if !next(&o.Stake) || !next(&o.GPUs) || !next(&o.CPUCores) || !next(&o.RAM) || !next(&o.Disk) || !next(&regionLen) || regionLen > uint64(len(rest)) {
		return bad("resources")
	}
	o.Region, rest = rest[:regionLen], rest[regionLen:]
	var n uint64
	if !next(&o.Jobs) || !next(&o.MaxJobs) || !next(&o.Tentative) || !next(&o.Reputation) || !next(&o.Int8GOPS) || !next(&n) || n > maxOfferGPUs {
		return bad("state")
	}
	o.ClassGPUs = o.ClassGPUs[:0]
	for range n {
		var g sched.GPU
		if !next(&g.VRAM) || !next(&g.ComputeCap) {
			return bad("gpus")
		}
		o.ClassGPUs = append(o.ClassGPUs, g)
	}
	if len(rest) != 0 {
		return bad("trailing bytes")
	}
	return nil
}
