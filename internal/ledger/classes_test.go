package ledger

import (
	"bytes"
	"math"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger/sched"
)

// planSpec plans a job of spec s as the end-of-block scheduler would,
// without applying the plan.
func planSpec(kv KV, s *JobSpec, p Params) (*sched.Plan, error) {
	r := jobRequest(s, p, sched.PlacePerClass, sched.EngineNeed{})
	r.Need = r.Planned
	return sched.Place(newIndexState(kv, p), &r)
}

// scanCountingKV counts the scheduler index entries a scan visits.
type scanCountingKV struct {
	KV
	visited map[string]int // by class
}

func (c *scanCountingKV) Iterate(start, end []byte, fn func(k, v []byte) bool) {
	c.KV.Iterate(start, end, func(k, v []byte) bool {
		if bytes.HasPrefix(k, prefixProviderIndex) {
			c.visited[string(classOfIndexKey(k))]++
		}
		return fn(k, v)
	})
}

// TestClassSummarySkipsClassesThatCannotFit: a job that takes any class
// and needs 40 GiB of VRAM scans only the classes that have such GPUs, and
// a job nothing can fit explains why without scanning anything.
func TestClassSummarySkipsClassesThatCannotFit(t *testing.T) {
	o := NewOverlay(NewMemKV())
	classes := []struct {
		name string
		vram uint64
		cc   string
	}{{"T4", 16 << 30, "7.5"}, {"RTX_4090", 24 << 30, "8.9"}, {"A100_80GB", 80 << 30, "8.0"}}
	n := byte(0)
	for _, c := range classes {
		for i := range 20 {
			n++
			p := &Provider{
				Address: address.Address{n},
				ProviderInfo: ProviderInfo{
					Inventory: Inventory{CPUCores: 16, RAM: 64 << 30, Disk: 1 << 40},
					Region:    "eu", Executors: []string{"wasm", "oci"}, MaxJobs: 4,
					Asks: []Ask{{Class: c.name, PricePerHour: Amount(1000 + i)}},
				},
				Stake: 1 << 40, Online: true, Reputation: 500_000,
			}
			for range 1 + i%4 {
				p.Inventory.GPUs = append(p.Inventory.GPUs, GPUSpec{Class: c.name, VRAM: c.vram, ComputeCap: c.cc})
			}
			setProviderFrom(o, nil, p)
		}
	}
	checkSummaries(t, o)
	p := DefaultParams()
	p.MinStakePerGPU, p.MinStakeCPU = 1, 1
	spec := &JobSpec{Executor: "oci", GPUCount: 1, MinVRAM: 40 << 30, MaxPricePerHour: 1 << 30, CPUMilli: 1000, Memory: 1 << 30}

	kv := &scanCountingKV{KV: o, visited: map[string]int{}}
	plan, err := planSpec(kv, spec, p)
	if err != nil {
		t.Fatal(err)
	}
	if cands := plan.Ranked; len(cands) == 0 || cands[0].Class != "A100_80GB" {
		t.Fatalf("candidates %+v", cands)
	}
	if kv.visited["T4"] != 0 || kv.visited["RTX_4090"] != 0 || kv.visited["A100_80GB"] == 0 {
		t.Fatalf("visited %v: the 16 and 24 GiB classes must not be scanned", kv.visited)
	}

	// Four GPUs of compute capability 9: A100s have 4 GPUs but 8.0.
	spec.MinVRAM, spec.GPUCount, spec.MinComputeCap = 0, 4, "9.0"
	kv.visited = map[string]int{}
	plan, err = planSpec(kv, spec, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Ranked) != 0 || len(kv.visited) != 0 {
		t.Fatalf("candidates %+v, visited %v", plan.Ranked, kv.visited)
	}
	if m := plan.Miss; m.Seen != 60 || m.ComputeCap == 0 {
		t.Fatalf("miss %+v: want 60 seen, some turned away for compute capability", m)
	}
	spec.GPUCount, spec.MinComputeCap = 5, ""
	plan, _ = planSpec(kv, spec, p)
	if m := plan.Miss; m.GPUs != 60 {
		t.Fatalf("miss %+v: want 60 with fewer than 5 GPUs", m)
	}

	// Taking providers offline (and back) keeps the summaries exact.
	for a := byte(1); a <= n; a += 3 {
		old, _, err := GetProvider(o, address.Address{a})
		if err != nil {
			t.Fatal(err)
		}
		q := *old
		q.Online = false
		setProviderFrom(o, old, &q)
	}
	checkSummaries(t, o)
}

// checkSummaries compares the stored class summaries with those rebuilt
// from the provider records (CheckInvariants does the same on a chain).
func checkSummaries(t *testing.T, kv KV) {
	t.Helper()
	want := map[string]*classSummary{}
	if err := IterateProviders(kv, func(p *Provider) bool {
		for _, e := range indexEntries(p) {
			c := string(classOfIndexKey(e.Key))
			if want[c] == nil {
				want[c] = &classSummary{}
			}
			want[c].add(e.caps, +1)
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	got := 0
	kv.Iterate(prefixClassCount, prefixEnd(prefixClassCount), func(k, v []byte) bool {
		got++
		c := string(k[len(prefixClassCount):])
		if want[c] == nil || !bytes.Equal(want[c].encode(), v) {
			t.Errorf("class %s summary %x, want %+v", c, v, want[c])
		}
		return true
	})
	if got != len(want) {
		t.Errorf("%d summaries stored, want %d", got, len(want))
	}
}

// TestMaxBucketsHoldsEveryBucket: the decoder's bound on a histogram's
// length admits every bucket sched's functions give.
func TestMaxBucketsHoldsEveryBucket(t *testing.T) {
	if b := sched.VRAMBucket(math.MaxUint64); b >= maxBuckets {
		t.Fatalf("VRAMBucket(max) = %d, the decoder accepts fewer than %d buckets", b, b+1)
	}
	if b := sched.ComputeCapBucket(math.MaxUint64); b >= maxBuckets {
		t.Fatalf("ComputeCapBucket(max) = %d", b)
	}
	if b := sched.GPUCountBucket(math.MaxUint64); b >= maxBuckets {
		t.Fatalf("GPUCountBucket(max) = %d", b)
	}
}

// FuzzDecodeClassSummary: a corrupt summary is an error, never a panic,
// and one that decodes re-encodes to itself.
func FuzzDecodeClassSummary(f *testing.F) {
	var s classSummary
	s.add(sched.Caps{VRAM: 7, ComputeCap: 9, GPUs: 4}, +1)
	s.add(sched.Caps{VRAM: 5, ComputeCap: 8, GPUs: 1}, +1)
	f.Add(s.encode())
	f.Add([]byte{classSummaryVersion, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, v []byte) {
		got, err := decodeClassSummary("x", v)
		if err != nil {
			return
		}
		if !bytes.Equal(got.encode(), v) {
			t.Fatalf("%x re-encodes to %x", v, got.encode())
		}
	})
}
