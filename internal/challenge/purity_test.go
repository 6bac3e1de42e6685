package challenge_test

import (
	"testing"

	"github.com/gpunet/gpunet/internal/archtest"
)

// TestImportRule keeps this package importable by the ledger (DESIGN.md
// section 4, internal/ledger/purity_test.go): the standard library only,
// no OS, network, randomness, clock or goroutines. The prover, which may
// use all of those, lives in the subpackage prove.
func TestImportRule(t *testing.T) {
	archtest.CheckPure(t, archtest.Purity{
		Allowed:      []string{"github.com/gpunet/gpunet/internal/challenge"},
		ForbiddenStd: []string{"os", "net", "net/http", "math/rand", "math/rand/v2", "crypto/rand", "sync", "sync/atomic", "io/fs", "syscall", "unsafe", "reflect", "runtime", "time"},
	})
}
