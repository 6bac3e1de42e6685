package ledger

import (
	"fmt"
	"regexp"
	"strings"
)

// The job spec's on-chain form and its rules. The ledger is the authority on
// what a valid spec is: it checks every submitted spec with these rules
// (JobSpec.Validate), and jobspec, which reads the YAML a user writes,
// checks the same rules through the names below before a spec is sent,
// adding only what needs the YAML: the field's line and column, defaults,
// local files, and bounds a client keeps tighter than the chain's.

// JobSpec is the on-chain part of a job spec: what the scheduler matches and
// what providers run. Inputs travel as one encrypted blob.
type JobSpec struct {
	Name     string            `json:"name"`
	Executor string            `json:"executor"`
	Module   string            `json:"module,omitempty"` // wasm: blob "sha256:<hex>" of the module
	Image    string            `json:"image,omitempty"`  // oci: registry/repo@sha256:<hex>
	Command  []string          `json:"command,omitempty"`
	Args     []string          `json:"args,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Inputs   []string          `json:"inputs,omitempty"` // guest paths the input bundle provides
	Outputs  []string          `json:"outputs"`
	// Resources.
	CPUMilli      uint64   `json:"cpu_milli"` // thousandths of a core
	Memory        uint64   `json:"memory"`    // bytes
	Disk          uint64   `json:"disk"`      // bytes
	GPUCount      uint64   `json:"gpu_count"`
	GPUModels     []string `json:"gpu_models,omitempty"`
	MinVRAM       uint64   `json:"min_vram,omitempty"` // bytes
	MinComputeCap string   `json:"min_compute_cap,omitempty"`
	// MaxPricePerHour is the ceiling, usync per hour for the whole job
	// (per replica).
	MaxPricePerHour uint64 `json:"max_price_per_hour"`
	TimeoutSeconds  uint64 `json:"timeout_seconds"`
	Verification    string `json:"verification"` // VerifyNone, VerifySpot or VerifyFull
	Deterministic   bool   `json:"deterministic"`
	Region          string `json:"region,omitempty"`
	RegionRequired  bool   `json:"region_required,omitempty"`
	// Network asks for network access: only providers that allow it
	// (ProviderInfo.Network) take the job; oci only.
	Network bool `json:"network,omitempty"`
	// URLInputs are public inputs the provider fetches itself, pinned by
	// their hash (data.go).
	URLInputs []URLInput `json:"url_inputs,omitempty" rec:"since=4"`
	// Checkpoint, when set, is where the job keeps its state and how
	// often its provider commits it (checkpoint.go).
	Checkpoint *CheckpointSpec `json:"checkpoint,omitempty" rec:"since=4"`
	// Tier is how the job is placed and what it pays the market
	// (market.go): TierSpot, TierOnDemand or TierPriority; "" is
	// on-demand.
	Tier string `json:"tier,omitempty" rec:"since=4"`
	// Trust is TrustTEE for a job placed only on providers with valid
	// TEE attestation, whose key is granted only to the attested key
	// (tee.go); "" for none. TEEMeasurements, when set, pin the guest's
	// launch measurement (lower-case hex) to one of them.
	Trust           string   `json:"trust,omitempty" rec:"since=8"`
	TEEMeasurements []string `json:"tee_measurements,omitempty" rec:"since=8"`
	// Compare, when set, says how replicas' outputs are judged the same
	// when their bytes differ (docs/ledger.md, "Outputs judged within a
	// tolerance"); nil is byte for byte.
	Compare *CompareSpec `json:"compare,omitempty" rec:"since=8"`
	// Nodes is how many members the job runs as, each on its own
	// provider with the resources above, placed all together or not at
	// all (a gang, gang.go); 0 and 1 are a single provider. Shm is the
	// bytes of /dev/shm inside each member, within its memory (0: the
	// executor's default). Interconnect is what the GPUs of each member
	// must be linked by: InterconnectNVLink, InterconnectPCIe (any) or ""
	// (any).
	Nodes        uint64 `json:"nodes,omitempty" rec:"since=8"`
	Shm          uint64 `json:"shm,omitempty" rec:"since=8"`
	Interconnect string `json:"interconnect,omitempty" rec:"since=8"`
}

// CompareSpec is a job's rule for judging replicas' outputs the same:
// numbers within |a-b| <= atol + rtol*max(|a|,|b|) (internal/compare), or,
// when Program is set, a judge program's verdict. The tolerances are
// integers in parts per 10^18, so that no float enters the state: 1e-5 is
// 10^13, 1 is 10^18.
type CompareSpec struct {
	RTolE18 uint64 `json:"rtol_e18"`
	ATolE18 uint64 `json:"atol_e18"`
	// Program is the blob "sha256:<hex>" of a WASI judge, sealed to the
	// job key like a wasm job's module: run with two replicas' output
	// trees as /a and /b, exit 0 says they are the same. The tolerances
	// are then 0 (the two rules are exclusive).
	Program string `json:"program,omitempty" rec:"since=8"`
	// Fuel is the program's budget per pair of outputs, in wasmtime fuel
	// (about one unit per WebAssembly operator executed): the bound every
	// judge runs it under, so that its verdict is the same on every
	// machine. Only with Program; at most params.max_judge_fuel. A spec
	// submitted with 0 is recorded with max_judge_fuel (judgeFuel),
	// so every judge reads the same number from the chain.
	Fuel uint64 `json:"fuel,omitempty" rec:"since=8"`
}

// MaxJudgeFuelLimit is the most fuel any spec may give its judge
// program, the upper bound of params.max_judge_fuel: at about 10^9 fuel a
// second, some 17 minutes per pair.
const MaxJudgeFuelLimit = 1_000_000_000_000

// MaxToleranceE18 is a tolerance of 1, the most a spec may ask for.
const MaxToleranceE18 = 1_000_000_000_000_000_000

// judgeFuel checks a submitted spec's judge fuel against
// params.max_judge_fuel and returns the spec to record: a judge program
// that names no fuel gets max_judge_fuel, so that the spec on chain always
// carries its budget. s itself (a message's) is left as it is.
func judgeFuel(s JobSpec, p Params) (JobSpec, error) {
	c := s.Compare
	if c == nil || c.Program == "" {
		return s, nil
	}
	if c.Fuel > p.MaxJudgeFuel {
		return s, invalid("compare.fuel %d is more than params.max_judge_fuel %d", c.Fuel, p.MaxJudgeFuel)
	}
	if c.Fuel == 0 {
		cc := *c
		cc.Fuel = p.MaxJudgeFuel
		s.Compare = &cc
	}
	return s, nil
}

func (c *CompareSpec) validate(s *JobSpec) error {
	switch {
	case c.Program != "" && !ValidBlobRef(c.Program):
		return invalid("compare.program %q: a judge program is named by blob hash (sha256:<64 hex>)", c.Program)
	case c.Program != "" && (c.RTolE18 != 0 || c.ATolE18 != 0):
		return invalid("compare.program and compare's tolerances are exclusive: a judge program decides alone")
	case c.Fuel != 0 && c.Program == "":
		return invalid("compare.fuel %d without compare.program: fuel bounds a judge program, and there is none", c.Fuel)
	case c.Fuel > MaxJudgeFuelLimit:
		return invalid("compare.fuel %d is more than %d, the most params.max_judge_fuel can be", c.Fuel, uint64(MaxJudgeFuelLimit))
	case c.RTolE18 > MaxToleranceE18:
		return invalid("compare.rtol_e18 %d is more than 10^18 (a tolerance of 1)", c.RTolE18)
	case c.ATolE18 > MaxToleranceE18:
		return invalid("compare.atol_e18 %d is more than 10^18 (a tolerance of 1)", c.ATolE18)
	case !s.Checked():
		return invalid("compare judges replicas' outputs, so the job must be checked: deterministic, verification spot or full")
	}
	return nil
}

// Executors a job may name (JobSpec.Executor).
const (
	ExecutorWASM = "wasm" // a WebAssembly module, named by its blob
	ExecutorOCI  = "oci"  // an OCI container image, named by digest
)

// Verification levels (JobSpec.Verification; verification.go).
const (
	VerifyNone = "none" // no replica is compared
	VerifySpot = "spot" // an audit replica is drawn at random, at an adaptive rate
	VerifyFull = "full" // two replicas from the start; needs a deterministic job
)

// MinJobDisk is the least disk, in bytes, a job may ask for: the minimum
// that the job spec (jobspec.MinDisk) enforces, so that the ledger refuses
// what the CLI refuses. A provider budgets a job's files against it; a
// spec without it would leave the provider to guess.
const MinJobDisk = 1 << 20

// The other bounds of a spec.
const (
	MaxJobItems          = 128                    // command and args together, env entries, inputs, outputs: each
	MaxJobCPUMilli       = 1024_000               // 1024 cores
	MaxJobMemory         = maxRAM                 // bytes
	MaxJobDisk           = maxDisk                // bytes
	MaxJobGPUs           = maxGPUs                // per replica
	MaxJobPricePerHour   = maxPriceHour * maxGPUs // usync
	MaxJobTimeoutSeconds = 7 * 24 * 3600
	MaxGuestPathLen      = 4096 // bytes, for inputs and outputs
	MaxEnvKeyLen         = 128
)

var (
	jobNameRE  = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	blobRefRE  = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	imageRefRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._:/-]{0,254}@sha256:[0-9a-f]{64}$`)
	envKeyRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// ValidJobName reports whether name may name a job: 1 to 64 of a-z 0-9 . _
// -, starting with a letter or digit.
func ValidJobName(name string) bool { return jobNameRE.MatchString(name) }

// ValidBlobRef reports whether ref names a blob by its hash:
// sha256:<64 lower-case hex digits>.
func ValidBlobRef(ref string) bool { return blobRefRE.MatchString(ref) }

// ValidEnvKey reports whether k may name an environment variable: letters,
// digits and _, not starting with a digit, at most MaxEnvKeyLen.
func ValidEnvKey(k string) bool { return len(k) <= MaxEnvKeyLen && envKeyRE.MatchString(k) }

// PlannedReplicas is how many providers run a job of this verification
// level from the start.
func (s *JobSpec) PlannedReplicas() uint64 {
	if s.Gang() {
		// One assignment per member of each replica gang (gang.go).
		return s.Nodes * s.ReplicaGangs()
	}
	if s.Verification == VerifyFull {
		return 2
	}
	return 1
}

// Units is what a provider's ask multiplies by: GPUs for a GPU job, whole
// cores for a CPU job.
func (s *JobSpec) Units() uint64 {
	if s.GPUCount > 0 {
		return s.GPUCount
	}
	return max(1, (s.CPUMilli+999)/1000)
}

// Checked reports whether replicas of the job are compared: only
// deterministic jobs can be, and verification none opts out.
func (s *JobSpec) Checked() bool { return s.Deterministic && s.Verification != VerifyNone }

func checkGuestPath(field, p string) error {
	if !strings.HasPrefix(p, "/") || strings.Contains(p, "\x00") || len(p) > MaxGuestPathLen {
		return invalid("%s %q: want an absolute path", field, p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return invalid("%s %q: must not contain ..", field, p)
		}
	}
	return nil
}

// Validate checks what the ledger can check of a spec without state.
// Its parts that are not about a job's run (the program, the resources and
// the placement constraints) are separate functions that ServiceSpec's
// Validate applies to its JobView: one definition of each rule.
func (s *JobSpec) Validate() error {
	if !ValidJobName(s.Name) {
		return invalid("name %q: want 1-64 of a-z 0-9 . _ -, starting with a letter or digit", s.Name)
	}
	if err := s.validateProgram(); err != nil {
		return err
	}
	if err := s.checkTrust(); err != nil {
		return err
	}
	if len(s.Inputs) > MaxJobItems || len(s.Outputs) > MaxJobItems {
		return invalid("too many args, env entries, inputs or outputs (at most %d each)", MaxJobItems)
	}
	for i, p := range s.Inputs {
		if err := checkGuestPath(fmt.Sprintf("inputs[%d]", i), p); err != nil {
			return err
		}
	}
	if len(s.Outputs) == 0 {
		return invalid("outputs is empty: name at least one path the job writes, e.g. /out")
	}
	for i, p := range s.Outputs {
		if err := checkGuestPath(fmt.Sprintf("outputs[%d]", i), p); err != nil {
			return err
		}
	}
	if err := s.validateResources(); err != nil {
		return err
	}
	if s.TimeoutSeconds == 0 || s.TimeoutSeconds > MaxJobTimeoutSeconds {
		return invalid("timeout %ds out of range [1s, 7 days]", s.TimeoutSeconds)
	}
	switch s.Verification {
	case VerifyNone, VerifySpot:
	case VerifyFull:
		if !s.Deterministic {
			return invalid("verification full compares replicas' outputs, so the job must be deterministic")
		}
	default:
		return invalid("verification %q: want none, spot or full", s.Verification)
	}
	if err := s.validatePlacement(); err != nil {
		return err
	}
	if err := s.validateGang(); err != nil {
		return err
	}
	if s.Tier != "" && tierRank(s.Tier) < 0 {
		return invalid("tier %q: want spot, on-demand or priority", s.Tier)
	}
	if s.Checkpoint != nil {
		if err := s.Checkpoint.validate(); err != nil {
			return err
		}
	}
	if s.Compare != nil {
		if err := s.Compare.validate(s); err != nil {
			return err
		}
	}
	return s.validateURLInputs()
}

// validateProgram checks what runs: the executor and its module or image,
// the command, args and environment.
func (s *JobSpec) validateProgram() error {
	switch s.Executor {
	case ExecutorWASM:
		if !ValidBlobRef(s.Module) {
			return invalid("module %q: a wasm job names its module by blob hash (sha256:<64 hex>)", s.Module)
		}
		if s.Image != "" {
			return invalid("image is for oci jobs; this job's executor is wasm")
		}
	case ExecutorOCI:
		if !imageRefRE.MatchString(s.Image) {
			return invalid("image %q: an oci job names its image by digest, registry/repo@sha256:<64 hex>", s.Image)
		}
		if s.Module != "" {
			return invalid("module is for wasm jobs; this job's executor is oci")
		}
	default:
		return invalid("executor %q: want wasm or oci", s.Executor)
	}
	if len(s.Args)+len(s.Command) > MaxJobItems || len(s.Env) > MaxJobItems {
		return invalid("too many args, env entries, inputs or outputs (at most %d each)", MaxJobItems)
	}
	for k := range s.Env {
		if !ValidEnvKey(k) {
			return invalid("env key %q: want [A-Za-z_][A-Za-z0-9_]*", k)
		}
	}
	return nil
}

// validateResources checks the resources asked for and the price ceiling.
func (s *JobSpec) validateResources() error {
	switch {
	case s.CPUMilli == 0 || s.CPUMilli > MaxJobCPUMilli:
		return invalid("resources.cpu out of range (0, 1024] cores")
	case s.Memory == 0 || s.Memory > MaxJobMemory:
		return invalid("resources.memory %d bytes out of range (0, 64 TiB]", s.Memory)
	case s.Disk < MinJobDisk:
		return invalid("resources.disk %d bytes is below the minimum %d (1 MiB): a job's disk is the scratch space for its inputs, files and outputs, and 0 does not mean unlimited", s.Disk, MinJobDisk)
	case s.Disk > MaxJobDisk:
		return invalid("resources.disk %d bytes is more than 1 PiB", s.Disk)
	case s.GPUCount > MaxJobGPUs:
		return invalid("resources.gpu.count %d is more than %d", s.GPUCount, MaxJobGPUs)
	case s.GPUCount == 0 && (len(s.GPUModels) > 0 || s.MinVRAM > 0 || s.MinComputeCap != ""):
		return invalid("resources.gpu sets models, min_vram or min_compute_cap but count is 0")
	case s.Interconnect != "" && s.Interconnect != InterconnectNVLink && s.Interconnect != InterconnectPCIe:
		return invalid("resources.gpu.interconnect %q: want nvlink or pcie", s.Interconnect)
	case s.Interconnect == InterconnectNVLink && s.GPUCount < 2:
		return invalid("resources.gpu.interconnect nvlink links a member's GPUs to each other, so count must be at least 2, not %d", s.GPUCount)
	case s.Nodes > MaxGangNodes:
		return invalid("resources.nodes %d is more than %d", s.Nodes, MaxGangNodes)
	case s.Shm > s.Memory:
		return invalid("resources.shm %d bytes is more than resources.memory %d bytes: /dev/shm is held in the member's memory", s.Shm, s.Memory)
	case s.Shm > 0 && s.Executor != ExecutorOCI:
		return invalid("resources.shm: only oci jobs have a /dev/shm")
	case s.MinComputeCap != "" && !ValidComputeCap(s.MinComputeCap):
		return invalid("resources.gpu.min_compute_cap %q: want MAJOR.MINOR", s.MinComputeCap)
	case s.MaxPricePerHour == 0 || s.MaxPricePerHour > MaxJobPricePerHour:
		return invalid("max_price %d usync/hour out of range", s.MaxPricePerHour)
	}
	for _, m := range s.GPUModels {
		if !ValidHardwareClass(m) {
			return invalid("resources.gpu.models: %q is not a hardware class like RTX_4090", m)
		}
	}
	return nil
}

// validatePlacement checks the region and network constraints.
func (s *JobSpec) validatePlacement() error {
	if s.Region != "" && !ValidRegion(s.Region) {
		return invalid("region %q: want lower-case letters, digits and -", s.Region)
	}
	if s.RegionRequired && s.Region == "" {
		return invalid("region_required without a region")
	}
	if s.Network && s.Executor != ExecutorOCI {
		return invalid("network: only oci jobs can have network access")
	}
	return nil
}
