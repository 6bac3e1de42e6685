package ledger

import "regexp"

// Bounds and patterns shared by provider declarations (msg_provider.go) and
// job specs (spec.go).

// Executors the ledger knows.
var knownExecutors = []string{"oci", "wasm"}

var (
	classRE       = regexp.MustCompile(`^[A-Z0-9][A-Z0-9_]{0,31}$`)
	regionRE      = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
	computeCapRE  = regexp.MustCompile(`^[0-9]{1,2}\.[0-9]{1,2}$`)
	maxGPUs       = 64
	maxCPUCores   = uint64(4096)
	maxRAM        = uint64(64) << 40 // 64 TiB
	maxDisk       = uint64(1) << 50  // 1 PiB
	maxVRAM       = uint64(1) << 40  // 1 TiB per GPU
	maxMaxJobs    = uint64(1024)
	maxPriceHour  = uint64(1_000_000_000_000) // 1M SYNC per unit-hour
	maxTextLength = 128
)
