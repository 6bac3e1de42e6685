// Package jobspec reads and validates job specs (YAML): the file a consumer
// writes to say what to run, on what hardware, for how long and at what
// price (DESIGN.md §7; docs/jobspec.md documents every field).
//
// [Parse] turns YAML into a [Spec] with defaults filled in and checks it;
// [Load] also checks that the local files it names exist. Problems come
// back all at once as [Errors], each naming the field (e.g.
// "resources.gpu.count" or "inputs[1].from"), its line and column, and
// what would be right. A parsed Spec marshals back to YAML (goccy/go-yaml)
// that parses to the same Spec.
//
// The package is pure apart from Load: it reads no clock and touches no
// files, so the CLI, the API server and tests can share one definition of
// a valid spec. That definition is the ledger's (internal/ledger/spec.go),
// which checks every submitted spec: this package checks the same rules
// through the ledger's names, explains each problem in the YAML's terms,
// and lastly asks the ledger's JobSpec.Validate about the on-chain form
// ([Spec.LedgerSpec]).
package jobspec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
)

// Spec is a job spec. Parse returns it with defaults filled in and local
// paths (Module, Inputs[].From) joined to the spec's directory.
type Spec struct {
	Name           string            `yaml:"name" json:"name"`                                           // [a-z0-9][a-z0-9._-]{0,63}
	Kind           string            `yaml:"kind,omitempty" json:"kind,omitempty"`                       // KindBatch (the default) or KindService
	Executor       string            `yaml:"executor" json:"executor"`                                   // ExecutorWASM or ExecutorOCI
	Module         string            `yaml:"module,omitempty" json:"module,omitempty"`                   // wasm: a local file or a blob "sha256:<hex>"
	Image          string            `yaml:"image,omitempty" json:"image,omitempty"`                     // oci: registry/repo@sha256:<hex>, always by digest
	Command        []string          `yaml:"command,omitempty" json:"command,omitempty"`                 // oci: replaces the image's entrypoint
	Args           []string          `yaml:"args,omitempty" json:"args,omitempty"`                       // arguments to the module or command
	Env            map[string]string `yaml:"env,omitempty" json:"env,omitempty"`                         // environment variables
	Inputs         []Input           `yaml:"inputs,omitempty" json:"inputs,omitempty"`                   // files and directories the job reads
	Outputs        []string          `yaml:"outputs" json:"outputs"`                                     // absolute guest paths collected after the job
	Resources      Resources         `yaml:"resources" json:"resources"`                                 // what the job needs
	MaxPrice       Price             `yaml:"max_price" json:"max_price"`                                 // usync per hour for the whole job, a ceiling
	Timeout        Duration          `yaml:"timeout" json:"timeout"`                                     // wall-clock limit, MinTimeout … MaxTimeout
	Verification   string            `yaml:"verification" json:"verification"`                           // VerifyNone, VerifySpot or VerifyFull
	Region         string            `yaml:"region,omitempty" json:"region,omitempty"`                   // preferred provider region
	RegionRequired bool              `yaml:"region_required,omitempty" json:"region_required,omitempty"` // Region is a hard constraint
	Tier           string            `yaml:"tier" json:"tier"`                                           // TierSpot, TierOnDemand or TierPriority
	Deterministic  *bool             `yaml:"deterministic" json:"deterministic"`                         // nil: true for wasm, false for oci
	Checkpoint     *Checkpoint       `yaml:"checkpoint,omitempty" json:"checkpoint,omitempty"`           // where the job keeps its state, resumed from on another provider
	Network        bool              `yaml:"network,omitempty" json:"network,omitempty"`                 // oci: the job needs network access (only providers that allow it)
	// Placement holds hard placement constraints: placement.region is
	// region with region_required (the same ledger fields).
	Placement *Placement `yaml:"placement,omitempty" json:"placement,omitempty"`
	// Trust is TrustTEE for a job that runs only on providers whose TEE
	// attestation the chain verified, and whose key goes only to the
	// attested key; TEEMeasurements pin their launch measurement (hex).
	Trust           string   `yaml:"trust,omitempty" json:"trust,omitempty"`
	TEEMeasurements []string `yaml:"tee_measurements,omitempty" json:"tee_measurements,omitempty"`
	// Compare says how replicas' outputs are judged the same when their
	// bytes differ (docs/jobspec.md, compare); nil is byte for byte.
	Compare *Compare `yaml:"compare,omitempty" json:"compare,omitempty"`

	// A service's own fields (kind: service; service.go). MaxPrice is
	// then per replica.
	Ports     []Port     `yaml:"ports,omitempty" json:"ports,omitempty"`         // what the container listens on
	Readiness *Readiness `yaml:"readiness,omitempty" json:"readiness,omitempty"` // how a provider checks a replica serves
	Replicas  int        `yaml:"replicas,omitempty" json:"replicas,omitempty"`   // 1 … MaxReplicas
	Budget    Amount     `yaml:"budget,omitempty" json:"budget,omitempty"`       // usync locked in escrow to pay the replicas
	OpenAI    *OpenAI    `yaml:"openai,omitempty" json:"openai,omitempty"`       // served as OpenAI's API on every node
	Public    bool       `yaml:"public,omitempty" json:"public,omitempty"`       // anyone may reach it, without a key

	// pos maps field paths to where their values were written, so that
	// Validate's errors can point at them. Empty for a Spec built in code.
	pos map[string]position
}

// Checkpoint is where the job keeps its state and how often its provider
// takes it (docs/jobspec.md, checkpoint). The old form, checkpoint: /path,
// is still read: the path, at DefaultCheckpointInterval.
type Checkpoint struct {
	Path     string   `yaml:"path" json:"path"`         // absolute guest path of a directory
	Interval Duration `yaml:"interval" json:"interval"` // how often; whole seconds, 1s … 24h (the chain's minimum applies)
}

// Compare is how replicas' outputs are judged the same (docs/jobspec.md,
// compare): Numeric, or Program, exactly one.
type Compare struct {
	Numeric *Numeric `yaml:"numeric,omitempty" json:"numeric,omitempty"`
	// Program is a WASI judge: a local .wasm file (joined to the spec's
	// directory, like module) or a blob "sha256:<hex>". It runs with two
	// replicas' output trees as /a and /b (its args); exit 0 says they
	// are the same.
	Program string `yaml:"program,omitempty" json:"program,omitempty"`
	// Fuel is the judge program's budget per pair of outputs, in
	// WebAssembly operators (wasmtime fuel): every judge runs it under
	// this bound, so its verdict is the same on every machine. 0 (left
	// out): the chain's params.max_judge_fuel, which also bounds it.
	Fuel uint64 `yaml:"fuel,omitempty" json:"fuel,omitempty"`
}

// LocalProgram returns the judge program's local path; ok is false when
// there is none, or it is a blob reference.
func (c *Compare) LocalProgram() (path string, ok bool) {
	if c == nil {
		return "", false
	}
	return localPath(c.Program)
}

// Numeric judges two numbers the same when |a-b| <= ATol + RTol*max(|a|,|b|)
// (internal/compare).
type Numeric struct {
	RTol Tolerance `yaml:"rtol" json:"rtol_e18"`
	ATol Tolerance `yaml:"atol" json:"atol_e18"`
}

// Bounds and default of a checkpoint's interval. The chain refuses an
// interval shorter than its params.checkpoint_min_interval (60 s by
// default); this client checks only the outer bounds.
const (
	DefaultCheckpointInterval = Duration(10 * time.Minute)
	MinCheckpointInterval     = Duration(time.Second)
	MaxCheckpointInterval     = Duration(24 * time.Hour)
)

// Input is a file or directory the job reads.
type Input struct {
	Path string `yaml:"path" json:"path"` // absolute guest path where the job sees it
	From string `yaml:"from" json:"from"` // local file or directory, a blob "sha256:<hex>", or an http(s) URL
	// SHA256 pins a URL input's content (64 hex digits, sha256: optional);
	// required with a URL, not allowed otherwise. Size, when given, is the
	// content's length: the provider reads no more.
	SHA256 string `yaml:"sha256,omitempty" json:"sha256,omitempty"`
	Size   Bytes  `yaml:"size,omitempty" json:"size,omitempty"`
}

// IsURL reports whether an input's from is an http or https URL: a public
// input the provider fetches itself, pinned by its hash.
func IsURL(s string) bool {
	return strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://")
}

// urlInputHash is an input's sha256 in the ledger's form, sha256:<hex>.
func urlInputHash(s string) string {
	return blobPrefix + strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), blobPrefix)
}

// Resources is what a job needs from one provider: for a gang (Nodes >
// 1), what each member needs from its own.
type Resources struct {
	CPU    float64 `yaml:"cpu" json:"cpu"`       // cores
	Memory Bytes   `yaml:"memory" json:"memory"` // RAM
	Disk   Bytes   `yaml:"disk" json:"disk"`     // scratch space for inputs, outputs and the job's files
	GPU    GPU     `yaml:"gpu" json:"gpu"`       // GPUs; none when Count is 0
	// Nodes is how many members the job runs as, each on its own
	// provider, placed together or not at all (1 … MaxNodes; left out,
	// 0, is one).
	Nodes int `yaml:"nodes,omitempty" json:"nodes,omitempty"`
	// Shm is the size of /dev/shm inside each member (oci), held within
	// Memory; 0 leaves the executor's default.
	Shm Bytes `yaml:"shm,omitempty" json:"shm,omitempty"`
}

// Placement is where a job must run (docs/jobspec.md, placement).
type Placement struct {
	Region string `yaml:"region,omitempty" json:"region,omitempty"` // the providers' region, required
}

// MaxNodes is the most members a job may ask for: the ledger's bound.
const MaxNodes = ledger.MaxGangNodes

// GPU is a job's GPU requirement. Models, MinVRAM and MinComputeCap narrow
// which GPUs qualify; each needs Count ≥ 1.
type GPU struct {
	Count         int      `yaml:"count" json:"count"`                                         // 0 … MaxGPUs
	Models        []string `yaml:"models,omitempty" json:"models,omitempty"`                   // hardware classes, any of which will do, e.g. RTX_4090
	MinVRAM       Bytes    `yaml:"min_vram,omitempty" json:"min_vram,omitempty"`               // memory per GPU
	MinComputeCap string   `yaml:"min_compute_cap,omitempty" json:"min_compute_cap,omitempty"` // CUDA compute capability, e.g. "8.0"
	// Interconnect is what must link the GPUs of the provider (of each
	// member): InterconnectNVLink, InterconnectPCIe (any), or empty (any).
	Interconnect string `yaml:"interconnect,omitempty" json:"interconnect,omitempty"`
}

// Values of GPU.Interconnect: the ledger's.
const (
	InterconnectNVLink = ledger.InterconnectNVLink
	InterconnectPCIe   = ledger.InterconnectPCIe
)

// Values of Spec.Executor: the ledger's.
const (
	ExecutorWASM = ledger.ExecutorWASM // a WebAssembly module run with WASI
	ExecutorOCI  = ledger.ExecutorOCI  // an OCI container image
)

// Values of Spec.Verification (DESIGN.md §5): the ledger's.
const (
	VerifyNone = ledger.VerifyNone // reputation only
	VerifySpot = ledger.VerifySpot // replicated at random, at an adaptive rate
	VerifyFull = ledger.VerifyFull // always at least two replicas; needs a deterministic job
)

// TrustTEE is Spec.Trust for jobs placed only on attested providers.
const TrustTEE = ledger.TrustTEE

// Values of Spec.Tier.
const (
	TierSpot     = "spot"      // cheapest; may be interrupted
	TierOnDemand = "on-demand" // runs to completion at the agreed price
	TierPriority = "priority"  // placed first, at a higher price
)

// Defaults and limits. The limits are the ledger's (spec.go in
// internal/ledger), except those a client keeps tighter than the chain
// (MinMemory, MaxMemory, MaxDisk, MaxVRAM, MaxOutputs, MaxPriceLimit): a
// spec that passes here is not refused on chain for its shape, and
// Validate asks the ledger to be sure.
const (
	DefaultCPU          = 1.0
	DefaultMemory       = 256 * MiB
	DefaultDisk         = 1 * GiB
	DefaultVerification = VerifySpot
	DefaultTier         = TierOnDemand

	MaxCPU     = ledger.MaxJobCPUMilli / 1000
	MinMemory  = 1 * MiB
	MaxMemory  = 4 * TiB
	MinDisk    = Bytes(ledger.MinJobDisk)
	MaxDisk    = 64 * TiB
	MaxVRAM    = 4 * TiB
	MaxGPUs    = ledger.MaxJobGPUs
	MinTimeout = Duration(1e9)                               // 1s
	MaxTimeout = Duration(ledger.MaxJobTimeoutSeconds * 1e9) // 7 days
	MaxEnv     = ledger.MaxJobItems
	MaxInputs  = ledger.MaxJobItems
	MaxOutputs = 64
	MaxArgs    = ledger.MaxJobItems // command and args together

	// MaxPriceLimit bounds max_price (10^6 SYNC per hour) far above any
	// real price, so that escrow arithmetic cannot overflow.
	MaxPriceLimit Price = 1e6 * usyncPerSync

	// MaxSpecSize bounds a spec file. Specs travel in transactions; data
	// belongs in inputs.
	MaxSpecSize = 64 << 10
)

// Parse reads a spec from YAML, fills in defaults, joins relative local
// paths (module, inputs[].from) to baseDir and validates the result. It
// does not touch the filesystem; Load also checks the files. On error it
// returns nil and an [Errors] listing every problem found.
func Parse(data []byte, baseDir string) (*Spec, error) {
	s, errs := decode(data)
	if s == nil {
		return nil, errs.err()
	}
	s.setDefaults(func(field string) bool { return s.pos[field].given })
	s.Module = resolve(baseDir, s.Module)
	for i := range s.Inputs {
		s.Inputs[i].From = resolve(baseDir, s.Inputs[i].From)
	}
	if s.Compare != nil {
		s.Compare.Program = resolve(baseDir, s.Compare.Program)
	}
	for _, e := range s.validate() {
		if !errs.covers(e.Field) {
			errs = append(errs, e)
		}
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	return s, nil
}

// Load reads the spec file at path, parses it with the file's directory as
// the base for relative paths, and checks that the local files it names
// exist: the module a readable WebAssembly file, each input's from a
// regular file or a directory. Each error names the file.
func Load(path string) (*Spec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read job spec: %w", err)
	}
	defer f.Close()
	return LoadFrom(f, path, filepath.Dir(path))
}

// LoadFrom is Load of the spec read from r (e.g. stdin), named name in
// errors, with baseDir as the base for relative paths.
func LoadFrom(r io.Reader, name, baseDir string) (*Spec, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxSpecSize+1))
	if err != nil {
		return nil, fmt.Errorf("read job spec: %w", err)
	}
	path := name
	s, err := Parse(data, baseDir)
	if err == nil {
		err = s.checkFiles()
	}
	var es Errors
	if errors.As(err, &es) {
		for _, e := range es {
			e.File = path
		}
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// IsDeterministic reports whether the job's output is a function of its
// inputs alone, so that replicas can be compared by hash: Deterministic
// when set, otherwise true for wasm and false for oci.
func (s *Spec) IsDeterministic() bool {
	if s.Deterministic != nil {
		return *s.Deterministic
	}
	return s.Executor == ExecutorWASM
}

// LedgerSpec is the on-chain part of s (what MsgSubmitJob carries), with
// module the blob of its sealed module; a caller that has not uploaded it
// (a quote, a check) may pass PlaceholderModule.
func (s *Spec) LedgerSpec(module string) ledger.JobSpec {
	ls := ledger.JobSpec{
		Name: s.Name, Executor: s.Executor, Module: module, Image: s.Image,
		Command: s.Command, Args: s.Args, Env: s.Env, Outputs: s.Outputs,
		CPUMilli: uint64(math.Ceil(s.Resources.CPU * 1000)), Memory: uint64(s.Resources.Memory), Disk: uint64(s.Resources.Disk),
		GPUCount: uint64(s.Resources.GPU.Count), GPUModels: s.Resources.GPU.Models,
		MinVRAM: uint64(s.Resources.GPU.MinVRAM), MinComputeCap: s.Resources.GPU.MinComputeCap,
		MaxPricePerHour: uint64(s.MaxPrice), TimeoutSeconds: uint64(time.Duration(s.Timeout) / time.Second),
		Verification: s.Verification, Deterministic: s.IsDeterministic(),
		Region: s.Region, RegionRequired: s.RegionRequired, Network: s.Network,
		Shm: uint64(s.Resources.Shm), Interconnect: s.Resources.GPU.Interconnect,
	}
	if s.Resources.Nodes > 1 {
		// One node is the ledger's default (0): a spec without nodes
		// submits what it did before gangs existed.
		ls.Nodes = uint64(s.Resources.Nodes)
	}
	if pl := s.Placement; pl != nil && pl.Region != "" {
		ls.Region, ls.RegionRequired = pl.Region, true
	}
	ls.Trust, ls.TEEMeasurements = s.Trust, s.TEEMeasurements
	if s.Tier != TierOnDemand {
		// On-demand is the ledger's default (""): a spec that does not
		// name another tier submits what it did before tiers existed.
		ls.Tier = s.Tier
	}
	if c := s.Compare; c != nil && c.Numeric != nil {
		ls.Compare = &ledger.CompareSpec{RTolE18: uint64(c.Numeric.RTol), ATolE18: uint64(c.Numeric.ATol)}
	} else if c != nil && c.Program != "" {
		// A local program's blob exists only once it is sealed to the
		// job key and uploaded (jobclient.Prepare sets it then).
		p := c.Program
		if !IsBlobRef(p) {
			p = PlaceholderModule
		}
		ls.Compare = &ledger.CompareSpec{Program: p, Fuel: c.Fuel}
	}
	if c := s.Checkpoint; c != nil {
		ls.Checkpoint = &ledger.CheckpointSpec{Path: c.Path, IntervalSeconds: uint64(time.Duration(c.Interval) / time.Second)}
	}
	for _, in := range s.Inputs {
		if IsURL(in.From) {
			ls.URLInputs = append(ls.URLInputs, ledger.URLInput{Path: in.Path, URL: in.From, SHA256: urlInputHash(in.SHA256), Size: uint64(in.Size)})
			continue
		}
		ls.Inputs = append(ls.Inputs, in.Path)
	}
	return ls
}

// PlaceholderModule is a well-formed module blob reference that names no
// module, for a spec's on-chain form before its module is uploaded.
const PlaceholderModule = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

// LocalModule returns the module's local path; ok is false when Module is
// a blob reference or empty.
func (s *Spec) LocalModule() (path string, ok bool) {
	return localPath(s.Module)
}

// LocalPath returns the input's local path; ok is false when From is a
// blob reference or empty.
func (in *Input) LocalPath() (path string, ok bool) {
	return localPath(in.From)
}

// IsBlobRef reports whether s refers to an uploaded blob ("sha256:…")
// rather than a local path. It does not check the digest's syntax.
func IsBlobRef(s string) bool {
	return strings.HasPrefix(s, blobPrefix)
}

const blobPrefix = "sha256:"

func localPath(s string) (string, bool) {
	if s == "" || IsBlobRef(s) || IsURL(s) {
		return "", false
	}
	return s, true
}

// SetDefaults fills in the fields a spec may leave out: kind (batch),
// resources.cpu, memory and disk when zero, verification and tier when
// empty, and deterministic when nil (true for wasm, false for oci); for a
// service, executor (oci), replicas, each port's protocol (http) and
// readiness (port: the first port, interval 5s, timeout 2s,
// failure_threshold 3, start 5m) and openai.port (the first port) instead
// of verification, tier and deterministic. Parse has done this already;
// it is for specs built in code.
func (s *Spec) SetDefaults() {
	s.setDefaults(func(string) bool { return false })
}

// setDefaults fills in the zero fields that were not given.
func (s *Spec) setDefaults(given func(field string) bool) {
	if s.Kind == "" {
		s.Kind = KindBatch
	}
	switch s.Kind {
	case KindService:
		s.setServiceDefaults(given)
	case KindBatch:
	default:
		return // an unknown kind is reported as such, not as missing fields
	}
	if s.Resources.CPU == 0 && !given("resources.cpu") {
		s.Resources.CPU = DefaultCPU
	}
	if s.Resources.Memory == 0 && !given("resources.memory") {
		s.Resources.Memory = DefaultMemory
	}
	if s.Resources.Disk == 0 && !given("resources.disk") {
		s.Resources.Disk = DefaultDisk
	}
	if s.Kind == KindService {
		return
	}
	if s.Verification == "" {
		s.Verification = DefaultVerification
		if s.Resources.Nodes > 1 {
			// A gang is not replicated (docs/jobspec.md, nodes).
			s.Verification = VerifyNone
		}
	}
	if s.Tier == "" {
		s.Tier = DefaultTier
	}
	if s.Checkpoint != nil && s.Checkpoint.Interval == 0 && !given("checkpoint.interval") {
		s.Checkpoint.Interval = DefaultCheckpointInterval
	}
	if s.Deterministic == nil && (s.Executor == ExecutorWASM || s.Executor == ExecutorOCI) {
		d := s.Executor == ExecutorWASM
		s.Deterministic = &d
	}
}

// resolve joins a relative local path to baseDir.
func resolve(baseDir, p string) string {
	if p == "" || IsBlobRef(p) || IsURL(p) || baseDir == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(baseDir, p)
}

// wasmMagic starts every WebAssembly binary.
var wasmMagic = []byte("\x00asm")

// checkFiles checks that the local files the spec names exist and are of
// the right kind.
func (s *Spec) checkFiles() error {
	var errs Errors
	add := func(field, msg string) {
		p := s.posOf(field)
		errs = append(errs, &Error{Field: field, Line: p.line, Column: p.col, Msg: msg})
	}
	if path, ok := s.LocalModule(); ok {
		if msg := checkFile(path, false); msg != "" {
			add("module", msg)
		} else if head, err := readHead(path, len(wasmMagic)); err != nil {
			add("module", fmt.Sprintf("cannot read %s: %v", path, unwrapPathError(err)))
		} else if !bytes.Equal(head, wasmMagic) {
			add("module", fmt.Sprintf("%s is not a WebAssembly binary (it does not start with \\0asm); compile it to .wasm first", path))
		}
	}
	if path, ok := s.Compare.LocalProgram(); ok {
		if msg := checkFile(path, false); msg != "" {
			add("compare.program", msg)
		} else if head, err := readHead(path, len(wasmMagic)); err != nil {
			add("compare.program", fmt.Sprintf("cannot read %s: %v", path, unwrapPathError(err)))
		} else if !bytes.Equal(head, wasmMagic) {
			add("compare.program", fmt.Sprintf("%s is not a WebAssembly binary (it does not start with \\0asm); build the judge for wasip1 first", path))
		}
	}
	for i := range s.Inputs {
		if path, ok := s.Inputs[i].LocalPath(); ok {
			if msg := checkFile(path, true); msg != "" {
				add(fmt.Sprintf("inputs[%d].from", i), msg)
			}
		}
	}
	return errs.err()
}

// checkFile returns what is wrong with the local file at path, or "".
func checkFile(path string, dirOK bool) string {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("%s does not exist (relative paths are relative to the spec's directory)", path)
	case err != nil:
		return fmt.Sprintf("cannot read %s: %v", path, unwrapPathError(err))
	case fi.IsDir() && !dirOK:
		return fmt.Sprintf("%s is a directory; want a file", path)
	case fi.IsDir(), fi.Mode().IsRegular():
	default:
		want := "a regular file or a directory"
		if !dirOK {
			want = "a regular file"
		}
		return fmt.Sprintf("%s is a %s; want %s", path, fileKind(fi.Mode()), want)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("cannot read %s: %v", path, unwrapPathError(err))
	}
	f.Close()
	return ""
}

func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// readHead returns up to n bytes from the start of the file at path.
func readHead(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, n)
	k, err := f.Read(buf)
	if k > 0 {
		err = nil
	}
	return buf[:k], err
}

// unwrapPathError drops the operation and path that a message already
// names.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
