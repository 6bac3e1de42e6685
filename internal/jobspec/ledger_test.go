package jobspec_test

import (
	"testing"

	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/ledger"
)

// TestDiskMinimumMatchesLedger: the CLI and the ledger refuse the same
// disks; a spec the CLI lets through must not be refused on chain, and the
// ledger must not accept what the CLI calls too small (disk 0 once meant
// unlimited on a provider).
func TestDiskMinimumMatchesLedger(t *testing.T) {
	if got, want := uint64(jobspec.MinDisk), uint64(ledger.MinJobDisk); got != want {
		t.Fatalf("jobspec.MinDisk = %d, ledger.MinJobDisk = %d: they must agree", got, want)
	}
}
