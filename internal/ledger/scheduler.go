package ledger

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/gpunet/gpunet/internal/address"
)

// The scheduler runs at the end of every block. It walks the queued jobs
// (from a cursor, at most params.max_placements_per_block of them) and places
// each on the best providers that fit, or records in the job why none do.
//
// Providers are indexed by hardware class and ask: pidx/<class>/<price per
// unit-hour>/<address> for every ask of every online provider. A job's scan
// of a class starts at the cheapest ask and stops at the job's price
// ceiling, so the cost of placing a job depends on the providers near its
// price, not on how many providers exist.

var (
	prefixProviderIndex = []byte("pidx/")
	prefixClassCount    = []byte("pcls/")
)

const (
	candidatesPerClass = 32   // feasible providers scored per class
	scanLimit          = 2048 // index entries a job may look at per block
)

func providerIndexKey(class string, pricePerHour uint64, a address.Address) []byte {
	k := append(slices.Clone(prefixProviderIndex), class...)
	k = append(k, '/')
	k = binary.BigEndian.AppendUint64(k, pricePerHour)
	return append(k, a[:]...)
}

func classPrefix(class string) []byte {
	return append(append(slices.Clone(prefixProviderIndex), class...), '/')
}

// indexEntries returns the index keys a provider record should have.
func indexEntries(p *Provider) [][]byte {
	if p == nil || !p.Online {
		return nil
	}
	keys := make([][]byte, 0, len(p.Asks))
	for _, a := range p.Asks {
		keys = append(keys, providerIndexKey(a.Class, uint64(a.PricePerHour), p.Address))
	}
	return keys
}

// reindexProvider moves a provider's index entries from those of old to
// those of p.
func reindexProvider(o *Overlay, old, p *Provider) {
	before, after := indexEntries(old), indexEntries(p)
	same := len(before) == len(after)
	for i := 0; same && i < len(before); i++ {
		same = bytes.Equal(before[i], after[i])
	}
	if same {
		return
	}
	for _, k := range before {
		o.Delete(k)
		adjustClassCount(o, k, -1)
	}
	for _, k := range after {
		o.Set(k, []byte{1})
		adjustClassCount(o, k, +1)
	}
}

func adjustClassCount(o *Overlay, indexKey []byte, d int) {
	rest := indexKey[len(prefixProviderIndex):]
	class := rest[:bytes.IndexByte(rest, '/')]
	k := append(slices.Clone(prefixClassCount), class...)
	n := getUint(o, k)
	if d < 0 {
		n--
	} else {
		n++
	}
	if n == 0 {
		o.Delete(k)
	} else {
		setUint(o, k, n)
	}
}

// gpuClasses lists the hardware classes with online providers, but "cpu".
func indexedGPUClasses(kv KV) []string {
	var out []string
	kv.Iterate(prefixClassCount, prefixEnd(prefixClassCount), func(k, _ []byte) bool {
		if c := string(k[len(prefixClassCount):]); c != CPUClass {
			out = append(out, c)
		}
		return true
	})
	return out
}

// schedule places queued jobs.
func schedule(o *Overlay, p Params, info BlockInfo) ([]Event, error) {
	var queued []uint64
	cursor := getUint(o, keyQueueCursor)
	collect := func(start, end []byte) {
		o.Iterate(start, end, func(k, _ []byte) bool {
			queued = append(queued, binary.BigEndian.Uint64(k[len(prefixJobQueue):]))
			return uint64(len(queued)) < p.MaxPlacementsPerBlock
		})
	}
	collect(jobQueueKey(cursor), prefixEnd(prefixJobQueue))
	if uint64(len(queued)) < p.MaxPlacementsPerBlock && cursor > 0 {
		// Wrap around, up to where this block's walk began: each queued
		// job is looked at once per block.
		collect(prefixJobQueue, jobQueueKey(cursor))
	}
	var events []Event
	for _, id := range queued {
		j, err := mustJob(o, id)
		if err != nil {
			return nil, err
		}
		evs, err := place(o, j, p, info)
		if err != nil {
			return nil, err
		}
		events = append(events, evs...)
	}
	if len(queued) > 0 {
		setUint(o, keyQueueCursor, queued[len(queued)-1]+1)
	}
	return events, nil
}

type candidate struct {
	p     *Provider
	price uint64 // usync per hour for this job
	score uint64
}

// verdict tallies why providers were passed over, for the job's reason.
type verdict struct {
	seen, busy, executor, gpus, vram, computeCap, cpu, ram, disk, region, stake, model int
	cheapestAbove                                                                      uint64
	classes                                                                            int
}

func (v *verdict) String(j *JobSpec) string {
	if v.classes == 0 || (v.seen == 0 && v.cheapestAbove == 0) {
		if j.GPUCount > 0 {
			models := "any GPU class"
			if len(j.GPUModels) > 0 {
				models = strings.Join(j.GPUModels, " or ")
			}
			return fmt.Sprintf("no online provider offers %s", models)
		}
		return "no online provider offers CPU capacity"
	}
	var parts []string
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(v.executor, "lack the "+j.Executor+" executor")
	add(v.gpus, fmt.Sprintf("have fewer than %d GPUs", j.GPUCount))
	add(v.vram, fmt.Sprintf("have less than %d GiB VRAM", j.MinVRAM>>30))
	add(v.computeCap, "have compute capability below "+j.MinComputeCap)
	add(v.cpu, fmt.Sprintf("have fewer than %.3g cores", float64(j.CPUMilli)/1000))
	add(v.ram, fmt.Sprintf("have less than %d MiB RAM", j.Memory>>20))
	add(v.disk, fmt.Sprintf("have less than %d MiB disk", j.Disk>>20))
	add(v.region, "are outside region "+j.Region)
	add(v.stake, "are under-staked")
	add(v.busy, "match but are busy")
	s := fmt.Sprintf("0 of %d providers within the price can run it", v.seen)
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, ", ")
	}
	if v.cheapestAbove > 0 {
		s += fmt.Sprintf("; cheapest other ask %s/h > max %s/h", syncString(v.cheapestAbove), syncString(j.MaxPricePerHour))
	}
	return s
}

func syncString(usync uint64) string {
	s := fmt.Sprintf("%d.%06d", usync/1_000_000, usync%1_000_000)
	return strings.TrimRight(strings.TrimRight(s, "0"), ".") + " SYNC"
}

// findCandidates returns the providers that can run s now, best first,
// and the tally of why the others cannot. It only reads.
func findCandidates(kv KV, s *JobSpec, p Params) ([]candidate, *verdict, error) {
	units := s.Units()
	classes := s.GPUModels
	if s.GPUCount == 0 {
		classes = []string{CPUClass}
	} else if len(classes) == 0 {
		classes = indexedGPUClasses(kv)
	}
	maxUnit := s.MaxPricePerHour / units
	var cands []candidate
	v := &verdict{}
	budget := scanLimit
	for _, class := range classes {
		if budget <= 0 {
			break
		}
		cp := classPrefix(class)
		end := providerIndexKey(class, maxUnit+1, address.Address{})
		found := 0
		hasEntries := false
		var err error
		kv.Iterate(cp, end, func(k, _ []byte) bool {
			hasEntries = true
			budget--
			var a address.Address
			copy(a[:], k[len(k)-address.Len:])
			pr, e := mustProvider(kv, a)
			if e != nil {
				err = e
				return false
			}
			v.seen++
			price := binary.BigEndian.Uint64(k[len(cp):]) * units
			if fits(pr, s, class, p, v) {
				cands = append(cands, candidate{p: pr, price: price})
				found++
			}
			return found < candidatesPerClass && budget > 0
		})
		if err != nil {
			return nil, nil, err
		}
		// The cheapest ask above the ceiling, for the reason.
		kv.Iterate(end, prefixEnd(cp), func(k, _ []byte) bool {
			hasEntries = true
			if price := binary.BigEndian.Uint64(k[len(cp):]) * units; v.cheapestAbove == 0 || price < v.cheapestAbove {
				v.cheapestAbove = price
			}
			return false
		})
		if hasEntries {
			v.classes++
		}
	}
	for i := range cands {
		cands[i].score = score(&cands[i], s)
	}
	slices.SortFunc(cands, func(a, b candidate) int {
		if a.score != b.score {
			if a.score > b.score {
				return -1
			}
			return 1
		}
		return bytes.Compare(a.p.Address[:], b.p.Address[:])
	})
	// A provider appears once (at its best) even if several of its
	// classes fit.
	seen := make(map[address.Address]bool, len(cands))
	out := cands[:0]
	for _, c := range cands {
		if !seen[c.p.Address] {
			seen[c.p.Address] = true
			out = append(out, c)
		}
	}
	return out, v, nil
}

// unplacedReason explains why a job with these candidates cannot start.
func unplacedReason(s *JobSpec, cands []candidate, v *verdict) string {
	reason := v.String(s)
	if n := len(cands); n > 0 {
		reason = fmt.Sprintf("needs %d distinct providers for verification %s, %d fit; %s", s.PlannedReplicas(), s.Verification, n, reason)
	}
	return reason
}

// Quote is what a job would get if it were submitted now.
type Quote struct {
	Matching     int    `json:"matching"`       // providers that can run it now
	PricePerHour uint64 `json:"price_per_hour"` // usync per hour of the provider it would get (per replica)
	Replicas     uint64 `json:"replicas"`
	// MaxCost is what the job costs if it runs to its timeout at that
	// price, fee included; Escrow is what submitting it locks.
	MaxCost uint64       `json:"max_cost"`
	Escrow  uint64       `json:"escrow"`
	Reason  string       `json:"reason,omitempty"` // why it would not be placed
	Best    []QuoteOffer `json:"best"`
}

// QuoteOffer is one provider a job could get.
type QuoteOffer struct {
	Provider     address.Address `json:"provider"`
	PricePerHour uint64          `json:"price_per_hour"`
	Score        uint64          `json:"score"`
}

// QuoteJob answers what submitting s now would give.
func QuoteJob(kv KV, s *JobSpec) (*Quote, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	p, err := GetParams(kv)
	if err != nil {
		return nil, err
	}
	cands, v, err := findCandidates(kv, s, p)
	if err != nil {
		return nil, err
	}
	q := &Quote{Matching: len(cands), Replicas: s.PlannedReplicas(), Escrow: JobEscrow(s, p), Best: []QuoteOffer{}}
	if uint64(len(cands)) < q.Replicas {
		q.Reason = unplacedReason(s, cands, v)
	}
	for i, c := range cands {
		if uint64(i) < q.Replicas {
			q.PricePerHour = max(q.PricePerHour, c.price)
			cost := mulDiv(c.price, s.TimeoutSeconds, 3600)
			q.MaxCost += cost + mulDiv(cost, p.ProtocolFeeBps, 10_000)
		}
		if i < 5 {
			q.Best = append(q.Best, QuoteOffer{Provider: c.p.Address, PricePerHour: c.price, Score: c.score})
		}
	}
	return q, nil
}

// place tries to assign j; it records the reason when it cannot.
func place(o *Overlay, j *Job, p Params, info BlockInfo) ([]Event, error) {
	cands, v, err := findCandidates(o, &j.Spec, p)
	if err != nil {
		return nil, err
	}
	replicas := int(j.Spec.PlannedReplicas())
	if len(cands) < replicas {
		if reason := unplacedReason(&j.Spec, cands, v); j.Reason != reason {
			j.Reason = reason
			setJob(o, j, j.Deadline)
		}
		return nil, nil
	}
	now := info.Time.Unix()
	old := j.Deadline
	var names []string
	for _, c := range cands[:replicas] {
		j.Assignments = append(j.Assignments, Assignment{Provider: c.p.Address, PricePerHour: c.price, AssignedAt: now})
		c.p.Jobs++
		setProvider(o, c.p)
		o.Set(jobProvKey(c.p.Address, j.ID), []byte{1})
		names = append(names, c.p.Address.String())
	}
	j.Attempts++
	j.State = JobAssigned
	j.Reason = "placed; waiting for the owner to grant the job key"
	j.Deadline = now + int64(p.JobGrantTimeout)
	o.Delete(jobQueueKey(j.ID))
	setJob(o, j, old)
	return []Event{jobEvent("job_assigned", j, Attr{"providers", strings.Join(names, ",")})}, nil
}

// fits applies the hard constraints, tallying failures in v.
func fits(pr *Provider, s *JobSpec, class string, p Params, v *verdict) bool {
	inv := &pr.Inventory
	switch {
	case !slices.Contains(pr.Executors, s.Executor):
		v.executor++
	case pr.Stake < pr.RequiredStake(p):
		v.stake++
	case uint64(inv.CPUCores)*1000 < s.CPUMilli:
		v.cpu++
	case inv.RAM < s.Memory:
		v.ram++
	case inv.Disk < s.Disk:
		v.disk++
	case s.RegionRequired && pr.Region != s.Region:
		v.region++
	case s.GPUCount > 0 && !gpusFit(inv.GPUs, s, class, v):
	case pr.Jobs >= pr.MaxJobs:
		v.busy++
	default:
		return true
	}
	return false
}

func gpusFit(gpus []GPUSpec, s *JobSpec, class string, v *verdict) bool {
	var n, vramOK, ccOK uint64
	for _, g := range gpus {
		if g.Class != class {
			continue
		}
		n++
		if g.VRAM >= s.MinVRAM {
			vramOK++
			if s.MinComputeCap == "" || compareVersion(g.ComputeCap, s.MinComputeCap) >= 0 {
				ccOK++
			}
		}
	}
	switch {
	case n < s.GPUCount:
		v.gpus++
	case vramOK < s.GPUCount:
		v.vram++
	case ccOK < s.GPUCount:
		v.computeCap++
	default:
		return true
	}
	return false
}

// compareVersion compares "MAJOR.MINOR" strings numerically.
func compareVersion(a, b string) int {
	pa, pb := strings.SplitN(a, ".", 2), strings.SplitN(b, ".", 2)
	for i := 0; i < 2; i++ {
		var x, y uint64
		if i < len(pa) {
			fmt.Sscan(pa[i], &x)
		}
		if i < len(pb) {
			fmt.Sscan(pb[i], &y)
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// score ranks a feasible provider for a job: cheaper, more reputable, less
// loaded, faster and in the preferred region is better. All integer.
func score(c *candidate, s *JobSpec) uint64 {
	pr := c.p
	price := (s.MaxPricePerHour - min(c.price, s.MaxPricePerHour)) * 1000 / max(s.MaxPricePerHour, 1)
	rep := pr.Reputation / 1000
	load := (pr.MaxJobs - min(pr.Jobs, pr.MaxJobs)) * 1000 / max(pr.MaxJobs, 1)
	speed := min(pr.Measured.Int8GOPS/100, 1000)
	var region uint64
	if s.Region != "" && pr.Region == s.Region {
		region = 1000
	}
	return 4*price + 3*rep + 2*load + speed + 2*region
}
