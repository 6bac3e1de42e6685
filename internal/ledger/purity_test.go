package ledger_test

import (
	"testing"

	"github.com/gpunet/gpunet/internal/archtest"
)

// TestImportRule enforces DESIGN.md section 4: the ledger depends on the
// standard library and gpunet's pure packages only, never on CometBFT, the
// OS, the network or a source of randomness.
func TestImportRule(t *testing.T) {
	archtest.CheckPure(t, archtest.Purity{
		Allowed: []string{
			"github.com/gpunet/gpunet/internal/ledger",
			"github.com/gpunet/gpunet/internal/ledger/verify",  // pure too: its own TestImportRule
			"github.com/gpunet/gpunet/internal/ledger/sched",   // the placement planner: pure too, its own TestImportRule
			"github.com/gpunet/gpunet/internal/ledger/logprob", // pure too: its own TestImportRule
			"github.com/gpunet/gpunet/internal/address",
			"github.com/gpunet/gpunet/internal/challenge", // pure too: its own TestImportRule
		},
		ForbiddenStd:   []string{"os", "net", "net/http", "math/rand", "math/rand/v2", "crypto/rand", "sync", "io/fs", "syscall", "unsafe", "reflect"},
		ForbiddenCalls: []string{"time.Now", "time.Since", "time.Until", "time.Sleep", "time.After", "time.Tick", "time.NewTimer"},
	})
}
