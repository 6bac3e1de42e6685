package ledger

import (
	"testing"

	"github.com/gpunet/gpunet/internal/challenge"
)

// TestRecheckGap: a device whose latest ruling was late or missed is
// challengeable again after hw_recheck_permille of its plan's gap; one
// that passed waits the whole gap.
func TestRecheckGap(t *testing.T) {
	params := DefaultParams()
	plan, err := challenge.NewPlan(100, params.HWParams())
	if err != nil {
		t.Fatal(err)
	}
	gap := int64(plan.MinGapMillis)
	recheck := gap * int64(params.HWRecheckPermille) / 1000
	for _, c := range []struct {
		name    string
		ruling  DeviceProof
		waitFor int64
	}{
		{"passed", DeviceProof{Proven: true, ProvenGOPS: 100}, gap},
		{"late", DeviceProof{Proven: true, ProvenGOPS: 40, Recheck: true}, recheck},
		{"missed", DeviceProof{Proven: true, Recheck: true}, recheck},
	} {
		p := &Provider{}
		p.Measured.Int8GOPS = 100
		const at = 1_000_000
		p.challenged(0, at)
		p.setDeviceProof(0, c.ruling)
		for _, tc := range []struct {
			now  int64
			want bool
		}{{at + c.waitFor - 1, false}, {at + c.waitFor, true}} {
			got, err := p.challengeable(tc.now, params, noGPUWork)
			if err != nil {
				t.Fatal(err)
			}
			if (len(got) == 1) != tc.want {
				t.Errorf("%s: challengeable %d ms after = %v, want %v (gap %d ms, recheck %d ms)", c.name, tc.now-at, got, tc.want, gap, recheck)
			}
		}
		// The recheck borrows from the next gap: it counts at the end of
		// the gap it came early in, and the challenge after it waits a
		// whole gap from there.
		slot := p.slotFor(0, at+c.waitFor, plan)
		if want := at + gap; slot != want {
			t.Errorf("%s: a challenge %d ms after counts at %d ms, want %d", c.name, c.waitFor, slot-at, want-at)
		}
	}
}

// TestRecheckKeepsTheHourlyLoad: a device late on every challenge is
// challenged at most once per gap in the long run, so it spends no more
// than 60 s an hour on challenges either.
func TestRecheckKeepsTheHourlyLoad(t *testing.T) {
	params := DefaultParams()
	plan, err := challenge.NewPlan(100, params.HWParams())
	if err != nil {
		t.Fatal(err)
	}
	p := &Provider{}
	p.Measured.Int8GOPS = 100
	const start, step = 1_000_000, 1_000 // a block a second
	n := 0
	for now := int64(start); now < start+10*3_600_000; now += step {
		got, err := p.challengeable(now, params, noGPUWork)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			continue
		}
		n++
		p.challenged(0, p.slotFor(0, now, plan))
		p.setDeviceProof(0, DeviceProof{Proven: true, ProvenGOPS: 10, Recheck: true}) // late, every time
	}
	// One a gap (60 s an hour of proving at most), give or take the
	// first and an early recheck at the end of the window.
	gaps := 10 * 3_600_000 / int(plan.MinGapMillis)
	if n > gaps+2 || n < gaps {
		t.Fatalf("%d challenges in 10 hours, want one a gap (%d) give or take the ends", n, gaps)
	}
}

// noGPUWork is challengeable's view of a provider that runs no GPU work.
func noGPUWork() (bool, error) { return false, nil }
