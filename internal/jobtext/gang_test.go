package jobtext

import (
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
)

// TestGangMiss: why a gang waits, in words: enough providers fit but not
// in one region; too few fit; none with NVLink.
func TestGangMiss(t *testing.T) {
	gang := &ledger.JobSpec{Executor: "oci", Verification: ledger.VerifyNone, MaxPricePerHour: 10_000, GPUCount: 8, Interconnect: ledger.InterconnectNVLink, Nodes: 3}
	for _, c := range []struct {
		name string
		m    ledger.PlacementMiss
		want string
	}{
		{"apart", ledger.PlacementMiss{Classes: 1, Seen: 5, Fit: 4, Need: 3, Sites: 2, Together: 2},
			"needs 3 members together in one region for its gang: 4 providers fit, in 2 region(s), at most 2 in one"},
		{"too few", ledger.PlacementMiss{Classes: 1, Seen: 4, NVLink: 2, Fit: 2, Need: 3, Sites: 1, Together: 2},
			"needs 3 distinct providers in one region for its gang, 2 fit; 0 of 4 providers within the price can run it: 2 lack NVLink between their GPUs"},
		{"none", ledger.PlacementMiss{Classes: 1, Seen: 3, NVLink: 3, Need: 3},
			"0 of 3 providers within the price can run it: 3 lack NVLink between their GPUs"},
	} {
		if got := JobMiss(&c.m, gang); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}
