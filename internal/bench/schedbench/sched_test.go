package schedbench

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

var (
	flagSchedProviders = flag.String("bench.sched.providers", "1000,10000,100000", "provider counts in BenchmarkScheduler, comma-separated")
	flagSchedJobs      = flag.Int("bench.sched.jobs", DefaultJobs, "jobs per provider count in BenchmarkScheduler's throughput phase")
	flagSchedLatency   = flag.Int("bench.sched.latency", DefaultLatencyJobs, "one-job blocks per provider count in BenchmarkScheduler")
	flagSchedStore     = flag.String("bench.sched.store", DefaultStore, "store in BenchmarkScheduler: pebble or btree")
)

// TestSchedulerSmall runs the scheduler benchmark tiny on both stores: the
// market must register, the jobs be placed once each, and the figures be
// plausible. (SchedulerPerS is 0 when the lattice hash's share, timed
// again apart from End(), came out above End() itself: on a loaded
// machine it can, in a run this small.)
func TestSchedulerSmall(t *testing.T) {
	for _, store := range []string{StorePebble, StoreBTree} {
		t.Run(store, func(t *testing.T) {
			res, err := Run(t.Context(), Options{Providers: []int{150, 300}, Jobs: 200, BlockJobs: 100, LatencyJobs: 60, Consumers: 20, Store: store})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Sizes) != 2 {
				t.Fatalf("%d sizes", len(res.Sizes))
			}
			for _, s := range res.Sizes {
				if s.Duplicates != 0 || s.Submitted != 200 || s.Placed < s.Submitted*8/10 || s.Assignments < s.Placed || s.PlacementsPerS <= 0 || s.SchedulerPerS != 0 && s.SchedulerPerS < s.PlacementsPerS {
					t.Errorf("%d providers: %d of %d placed (%d assignments, %d duplicates), %.0f/s", s.Providers, s.Placed, s.Submitted, s.Assignments, s.Duplicates, s.PlacementsPerS)
				}
				if s.LatencySamples != 60 || s.LatencyP99Us < s.LatencyP50Us || s.LatencyP50Us <= 0 || s.EmptyEndP50Us <= 0 || s.StateKeys < 4*s.Providers {
					t.Errorf("%d providers: figures %+v", s.Providers, s)
				}
			}
			if res.RatioLargestToSmallest <= 0 || res.MeetsPlacementsPerS != nil {
				t.Errorf("ratio %v, verdict %v without the target's provider count", res.RatioLargestToSmallest, res.MeetsPlacementsPerS)
			}
		})
	}
}

// BenchmarkScheduler is `gpunet bench scheduler` as a Go benchmark, one
// sub-benchmark per provider count (-bench.sched.providers); each iteration
// is a whole run at that count. Use -benchtime 1x.
func BenchmarkScheduler(b *testing.B) {
	for _, f := range strings.Split(*flagSchedProviders, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("providers=%d", n), func(b *testing.B) {
			var rate, sched, p50, p99 float64
			for range b.N {
				res, err := Run(b.Context(), Options{Providers: []int{n}, Jobs: *flagSchedJobs, LatencyJobs: *flagSchedLatency, Store: *flagSchedStore})
				if err != nil {
					b.Fatal(err)
				}
				s := res.Sizes[0]
				if s.Duplicates != 0 {
					b.Fatalf("%d duplicate placements", s.Duplicates)
				}
				rate += s.PlacementsPerS
				sched += s.SchedulerPerS
				p50 += s.LatencyP50Us
				p99 += s.LatencyP99Us
			}
			k := float64(b.N)
			b.ReportMetric(rate/k, "placements/s")
			b.ReportMetric(sched/k, "no-hash-placements/s")
			b.ReportMetric(p50/k, "p50-µs")
			b.ReportMetric(p99/k, "p99-µs")
			b.ReportMetric(0, "ns/op")
		})
	}
}
