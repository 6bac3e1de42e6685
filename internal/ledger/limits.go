package ledger

import "regexp"

// Bounds and patterns shared by provider declarations (msg_provider.go) and
// job specs (spec.go).

// Executors the ledger knows.
var knownExecutors = []string{ExecutorOCI, ExecutorWASM}

var (
	classRE      = regexp.MustCompile(`^[A-Z0-9][A-Z0-9_]{0,31}$`)
	regionRE     = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
	computeCapRE = regexp.MustCompile(`^[0-9]{1,2}\.[0-9]{1,2}$`)
)

// ValidHardwareClass reports whether class is written as a hardware class
// (a GPU's, as in a declaration's gpus[].class or a job's models): 1 to 32
// of A-Z 0-9 _, starting with a letter or digit, e.g. RTX_4090.
func ValidHardwareClass(class string) bool { return classRE.MatchString(class) }

// ValidRegion reports whether region is written as a region: 1 to 32
// lower-case letters, digits and -, starting with a letter or digit.
func ValidRegion(region string) bool { return regionRE.MatchString(region) }

// ValidComputeCap reports whether cc is a CUDA compute capability written
// MAJOR.MINOR, e.g. 8.6.
func ValidComputeCap(cc string) bool { return computeCapRE.MatchString(cc) }

const (
	maxGPUs       = 64
	maxCPUCores   = uint64(4096)
	maxRAM        = uint64(64) << 40 // 64 TiB
	maxDisk       = uint64(1) << 50  // 1 PiB
	maxVRAM       = uint64(1) << 40  // 1 TiB per GPU
	maxMaxJobs    = uint64(1024)
	maxPriceHour  = uint64(1_000_000_000_000) // 1M SYNC per unit-hour
	maxTextLength = 128
)
