package sched_test

import (
	"testing"

	"github.com/gpunet/gpunet/internal/archtest"
)

// TestImportRule: the planner is as deterministic as the ledger that runs
// it (DESIGN.md section 4), and never imports the ledger, which imports it.
func TestImportRule(t *testing.T) {
	archtest.CheckPure(t, archtest.Purity{
		Allowed: []string{
			"github.com/gpunet/gpunet/internal/ledger/sched",
			"github.com/gpunet/gpunet/internal/address",
		},
		ForbiddenStd:   []string{"os", "net", "net/http", "math/rand", "math/rand/v2", "crypto/rand", "sync", "io/fs", "syscall", "unsafe", "reflect", "time"},
		ForbiddenCalls: []string{"time.Now", "time.Since", "time.Until", "time.Sleep", "time.After", "time.Tick", "time.NewTimer"},
	})
}
