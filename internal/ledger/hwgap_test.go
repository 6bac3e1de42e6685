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
	plan, err := challenge.NewPlan(100, params.challengeParams())
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
			got, err := p.challengeable(tc.now, params)
			if err != nil {
				t.Fatal(err)
			}
			if (len(got) == 1) != tc.want {
				t.Errorf("%s: challengeable %d ms after = %v, want %v (gap %d ms, recheck %d ms)", c.name, tc.now-at, got, tc.want, gap, recheck)
			}
		}
	}
}
