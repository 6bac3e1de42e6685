package ledger

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/gpunet/gpunet/internal/address"
)

// An offer is what the scheduler knows of one ask of one online provider:
// everything its hard constraints and its score read. It is kept, encoded,
// as the value of the ask's index entry (pidx/<class>/<price>/<address>),
// and rewritten with the entry by setProvider whenever the provider record
// changes. The scheduler therefore filters and scores a provider without
// reading its record; it reads the records of the providers it picks.
type offer struct {
	addr         address.Address
	pricePerUnit uint64 // usync per unit-hour, from the key
	executors    uint8  // bit i: knownExecutors[i]; offerNetwork: allows network; offerEngine: engine is set
	engine       uint64 // engineID of the wasm engine it declares; 0 for none
	stake        uint64
	gpus         uint64 // all the provider's GPUs (its minimum stake depends on them)
	cpuCores     uint64
	ram, disk    uint64
	region       []byte // aliases the index value: valid while it is
	jobs         uint64
	maxJobs      uint64
	reputation   uint64
	int8GOPS     uint64
	// classGPUs are the provider's GPUs of the ask's class.
	classGPUs []offerGPU
}

type offerGPU struct {
	vram       uint64
	computeCap uint64 // MAJOR*1000 + MINOR; 0 when unknown
}

const offerVersion = 1

// offerNetwork in offer.executors: the provider allows network access.
const offerNetwork = 1 << 7

// offerEngine in offer.executors: the provider runs wasm jobs on a
// declared engine, whose engineID follows the flags (8 bytes, big-endian).
// An entry written before engines were declared has neither, and reads as
// an offer without one.
const offerEngine = 1 << 6

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
	b = append(b, offerVersion, flags)
	if engine != 0 {
		b = binary.BigEndian.AppendUint64(b, engine)
	}
	for _, v := range []uint64{p.Stake, uint64(len(inv.GPUs)), inv.CPUCores, inv.RAM, inv.Disk} {
		b = binary.AppendUvarint(b, v)
	}
	b = binary.AppendUvarint(b, uint64(len(p.Region)))
	b = append(b, p.Region...)
	for _, v := range []uint64{p.Jobs, p.MaxJobs, p.Reputation, p.EffectiveGOPS()} {
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
// o.classGPUs.
func decodeOffer(cp, key, value []byte, o *offer) error {
	if len(key) != len(cp)+8+address.Len {
		return fmt.Errorf("index key %x has %d bytes, want %d: %w", key, len(key), len(cp)+8+address.Len, ErrInternal)
	}
	o.pricePerUnit = binary.BigEndian.Uint64(key[len(cp):])
	copy(o.addr[:], key[len(cp)+8:])
	bad := func(what string) error {
		return fmt.Errorf("index entry %s of %s: corrupt offer (%s): %w", key[:len(cp)], o.addr, what, ErrInternal)
	}
	if len(value) < 2 || value[0] != offerVersion {
		return bad("version")
	}
	o.executors = value[1]
	rest := value[2:]
	o.engine = 0
	if o.executors&offerEngine != 0 {
		if len(rest) < 8 {
			return bad("engine")
		}
		o.engine, rest = binary.BigEndian.Uint64(rest), rest[8:]
		if o.engine == 0 {
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
	if !next(&o.stake) || !next(&o.gpus) || !next(&o.cpuCores) || !next(&o.ram) || !next(&o.disk) || !next(&regionLen) || regionLen > uint64(len(rest)) {
		return bad("resources")
	}
	o.region, rest = rest[:regionLen], rest[regionLen:]
	var n uint64
	if !next(&o.jobs) || !next(&o.maxJobs) || !next(&o.reputation) || !next(&o.int8GOPS) || !next(&n) || n > maxOfferGPUs {
		return bad("state")
	}
	o.classGPUs = o.classGPUs[:0]
	for range n {
		var g offerGPU
		if !next(&g.vram) || !next(&g.computeCap) {
			return bad("gpus")
		}
		o.classGPUs = append(o.classGPUs, g)
	}
	if len(rest) != 0 {
		return bad("trailing bytes")
	}
	return nil
}

// requiredStake mirrors Provider.RequiredStake.
func (o *offer) requiredStake(p Params) uint64 {
	if o.gpus > 0 {
		return o.gpus * p.MinStakePerGPU
	}
	return p.MinStakeCPU
}
