package int8gemm_test

import (
	"testing"

	"github.com/gpunet/gpunet/internal/archtest"
)

// TestImportRule keeps the kernel deterministic and pure in the ledger's
// sense (DESIGN.md section 4), like package challenge whose products it
// computes: the standard library only, no OS, clock, randomness or
// goroutines. Callers parallelise it.
func TestImportRule(t *testing.T) {
	archtest.CheckPure(t, archtest.Purity{
		Allowed:      []string{"github.com/gpunet/gpunet/internal/int8gemm"},
		ForbiddenStd: []string{"os", "net", "net/http", "math/rand", "math/rand/v2", "crypto/rand", "sync", "sync/atomic", "io/fs", "syscall", "unsafe", "reflect", "runtime", "time"},
	})
}
