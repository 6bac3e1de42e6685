package sched

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
)

// summarized is a memState whose class summaries are computed once: the
// ledger keeps them as it indexes offers, and memState's own walk of every
// offer per call would be most of what a benchmark measured.
type summarized struct {
	*memState
	sums map[string]ClassSummary
}

func (s summarized) GPUClasses() ([]ClassSummary, error) { return []ClassSummary{s.sums["H100"]}, nil }

func (s summarized) Summary(class string) (ClassSummary, error) { return s.sums[class], nil }

// benchState is n providers of 8 GPUs of one class, asks spread over
// 1,000 prices, in 20 regions (independent of the ask), one ask level in
// ten NVLinked.
func benchState(n int) summarized {
	offers := make([]Offer, n)
	for i := range offers {
		var a address.Address
		binary.BigEndian.PutUint32(a[:], uint32(i*2654435761)) // spread, distinct
		o := gpuOffer(0, uint64(1_000+i%1_000), 8, 80, 9000)
		o.Provider = a
		o.Region = []byte(fmt.Sprintf("r%02d", (i/1_000)%20))
		o.NVLink = i%10 == 0
		o.Reputation = uint64(i%1000) * 1000
		offers[i] = o
	}
	st := newState().add("H100", offers...)
	return summarized{st, map[string]ClassSummary{"H100": st.summary("H100")}}
}

// BenchmarkPlace100k is one placement among 100,000 providers (the issue's
// figure), the planner alone over an in-memory State: a single
// job of 8 GPUs (the baseline), and gangs of 8 and 64 such members (in one
// region), with NVLink, and one that cannot be placed (64 NVLinked members
// in one region, which 100k providers do not have among the offers a
// placement may scan).
func BenchmarkPlace100k(b *testing.B) {
	st := benchState(100_000)
	single := gpuReq(8)
	single.MaxPricePerHour = 8 * 10_000
	cases := []struct {
		name string
		r    Request
		want int
	}{
		{"single", single, 1},
	}
	for _, g := range []struct {
		nodes  int
		nvlink bool
		want   int
	}{{8, false, 8}, {64, false, 64}, {8, true, 8}, {64, true, 0}} {
		r := single
		r.Gang, r.Need, r.Planned, r.NVLink = true, g.nodes, g.nodes, g.nvlink
		name := fmt.Sprintf("gang=%d", g.nodes)
		if g.nvlink {
			name += "/nvlink"
		}
		cases = append(cases, struct {
			name string
			r    Request
			want int
		}{name, r, g.want})
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			st.scanned["H100"] = 0
			n := 0
			for b.Loop() {
				n++
				r := tc.r
				plan, err := Place(st, &r)
				if err != nil {
					b.Fatal(err)
				}
				if len(plan.Picks) != tc.want {
					b.Fatalf("%d picks, want %d (%+v)", len(plan.Picks), tc.want, plan.Miss)
				}
			}
			b.ReportMetric(float64(st.scanned["H100"])/float64(n), "offers/op")
		})
	}
}
