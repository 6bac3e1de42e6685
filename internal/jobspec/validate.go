package jobspec

import (
	"encoding/hex"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gpunet/gpunet/internal/egress"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Validate checks everything about s that does not need the filesystem,
// and returns every problem found as [Errors], or nil. It expects defaults
// filled in (Parse and SetDefaults do that): an empty verification or tier
// is an error here.
func (s *Spec) Validate() error {
	return s.validate().err()
}

func (s *Spec) validate() Errors {
	v := &validator{s: s}
	switch s.Kind {
	case KindService:
		v.validateService()
		return v.errs
	case "", KindBatch:
	default:
		v.kind()
		return v.errs
	}
	v.batchHasServiceFields()
	v.name()
	v.program()
	v.env()
	v.inputs()
	v.outputs()
	v.resources()
	v.gang()
	v.terms()
	v.compare()
	v.onChain()
	return v.errs
}

type validator struct {
	s    *Spec
	errs Errors
}

func (v *validator) errorf(field, format string, args ...any) {
	p := v.s.posOf(field)
	v.errs = append(v.errs, &Error{Field: field, Line: p.line, Column: p.col, Msg: fmt.Sprintf(format, args...)})
}

// posOf returns where field, or the nearest field containing it, was
// written.
func (s *Spec) posOf(field string) position {
	for f := field; f != ""; {
		if p, ok := s.pos[f]; ok && p.line > 0 {
			return p
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			break
		}
		f = f[:i]
	}
	return position{}
}

// given reports whether the spec's YAML wrote a value for field.
func (s *Spec) given(field string) bool {
	return s.pos[field].given
}

// The rules below are the ledger's (ledger.ValidJobName and the like, and
// its bounds); what is jobspec's own is how a problem is explained: the
// field, its line, what would be right.

var nameBadCharsRE = regexp.MustCompile(`[^a-z0-9._-]+`)

func (v *validator) name() {
	name := v.s.Name
	switch {
	case name == "":
		v.errorf("name", "is required: a short name for the job, e.g. name: wordcount")
	case !ledger.ValidJobName(name):
		msg := fmt.Sprintf("%q is not a valid name: use 1 to 64 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit", clip(name))
		if alt := strings.TrimLeft(nameBadCharsRE.ReplaceAllString(strings.ToLower(name), "-"), "._-"); alt != "" {
			if len(alt) > 64 {
				alt = alt[:64]
			}
			if ledger.ValidJobName(alt) {
				msg += fmt.Sprintf(", e.g. %q", alt)
			}
		}
		v.errorf("name", "%s", msg)
	}
}

var executorAliases = map[string]string{
	"docker": ExecutorOCI, "container": ExecutorOCI, "podman": ExecutorOCI, "runc": ExecutorOCI,
	"wasi": ExecutorWASM, "webassembly": ExecutorWASM, "wasmtime": ExecutorWASM, "wazero": ExecutorWASM,
}

// program checks the executor and what it runs: module or image, command
// and args.
func (v *validator) program() {
	s := v.s
	switch s.Executor {
	case "":
		v.errorf("executor", `is required: "wasm" for a WebAssembly module or "oci" for a container image`)
	case ExecutorWASM:
		if s.Module == "" {
			v.errorf("module", "is required for the wasm executor: a local .wasm file (e.g. ./wc.wasm) or an uploaded blob (sha256:…)")
		}
		if s.Image != "" {
			v.errorf("image", "is for the oci executor; a wasm job runs its module (set executor: oci to run an image)")
		}
		if len(s.Command) > 0 {
			v.errorf("command", "is for the oci executor; a wasm job runs its module's _start, so pass arguments in args")
		}
	case ExecutorOCI:
		if s.Image == "" {
			v.errorf("image", "is required for the oci executor: an image by digest, e.g. ghcr.io/org/app@sha256:<64 hex digits>")
		}
		if s.Module != "" {
			v.errorf("module", "is for the wasm executor; an oci job runs its image (set executor: wasm to run a module)")
		}
	default:
		msg := fmt.Sprintf(`%q is not an executor; use "wasm" or "oci"`, clip(s.Executor))
		meant := suggest(s.Executor, []string{ExecutorWASM, ExecutorOCI})
		if meant == "" {
			meant = executorAliases[strings.ToLower(s.Executor)]
		}
		if meant != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", meant)
		}
		v.errorf("executor", "%s", msg)
	}
	if s.Module != "" {
		v.localOrBlob("module", s.Module)
	}
	if s.Image != "" {
		if msg := imageProblem(s.Image); msg != "" {
			v.errorf("image", "%s", msg)
		}
	}
	v.argv()
}

// argv checks command and args together.
func (v *validator) argv() {
	s := v.s
	if n := len(s.Command) + len(s.Args); n > MaxArgs {
		v.errorf("args", "command and args have %d entries together; at most %d are allowed", n, MaxArgs)
	}
	for _, list := range []struct {
		field string
		args  []string
	}{{"command", s.Command}, {"args", s.Args}} {
		for i, a := range list.args {
			if strings.IndexByte(a, 0) >= 0 {
				v.errorf(fmt.Sprintf("%s[%d]", list.field, i), "contains a NUL byte, which a process argument cannot hold")
			}
		}
	}
}

// localOrBlob checks a module or input source: a blob reference or a
// local path.
func (v *validator) localOrBlob(field, p string) {
	switch {
	case IsBlobRef(p):
		if !ledger.ValidBlobRef(p) {
			v.errorf(field, "%q is not a blob reference: write sha256: followed by 64 lower-case hex digits (or ./%s for a local file of that name)", clip(p), clip(p))
		}
	case strings.IndexByte(p, 0) >= 0:
		v.errorf(field, "local path %q contains a NUL byte", clip(p))
	case len(p) > maxLocalPath:
		v.errorf(field, "local path is %d bytes long; at most %d are allowed", len(p), maxLocalPath)
	}
}

func (v *validator) env() {
	s := v.s
	if len(s.Env) > MaxEnv {
		v.errorf("env", "has %d variables; at most %d are allowed", len(s.Env), MaxEnv)
	}
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		field := envField("env", k)
		switch {
		case ledger.ValidEnvKey(k):
		case !identRE.MatchString(k):
			v.errorf(field, "%q is not a valid variable name: use letters, digits and _, not starting with a digit (e.g. LANG or MY_VAR)", clip(k))
		default:
			v.errorf(field, "the name is %d characters long; at most %d are allowed", len(k), ledger.MaxEnvKeyLen)
		}
		if strings.IndexByte(s.Env[k], 0) >= 0 {
			v.errorf(field, "the value contains a NUL byte, which an environment variable cannot hold")
		}
	}
}

func (v *validator) inputs() {
	s := v.s
	if len(s.Inputs) > MaxInputs {
		v.errorf("inputs", "has %d entries; at most %d are allowed (upload a directory instead)", len(s.Inputs), MaxInputs)
	}
	for i, in := range s.Inputs {
		field := fmt.Sprintf("inputs[%d]", i)
		if in.Path == "" {
			v.errorf(field+".path", "is required: where the job sees the input, e.g. path: /in/data.csv")
		} else if msg := guestPathProblem(in.Path); msg != "" {
			v.errorf(field+".path", "%s", msg)
		} else {
			v.conflicts(field+".path", in.Path, i, func(j int) string { return s.Inputs[j].Path },
				"%s is already the path of inputs[%d]; each input needs its own path",
				"%s is inside inputs[%d].path %s; inputs may not nest",
				"%s contains inputs[%d].path %s; inputs may not nest")
		}
		switch {
		case in.From == "":
			v.errorf(field+".from", "is required: a local file or directory (relative to the spec's directory), an uploaded blob (sha256:…) or an http(s) URL with its sha256")
		case IsURL(in.From):
			v.urlInput(field, in)
		default:
			v.localOrBlob(field+".from", in.From)
			if in.SHA256 != "" || in.Size != 0 {
				v.errorf(field+".sha256", "sha256 and size are for an input fetched from a URL; a local file or blob is checked by its upload")
			}
		}
	}
	if len(s.Inputs) > 0 {
		// The ledger's own rules: count, URL, hash, total size within
		// the disk (a single source of truth for what the chain takes).
		ls := s.LedgerSpec(PlaceholderModule)
		if len(ls.URLInputs) > ledger.MaxURLInputs {
			v.errorf("inputs", "has %d inputs from URLs; at most %d are allowed", len(ls.URLInputs), ledger.MaxURLInputs)
		}
		var total uint64
		for _, u := range ls.URLInputs {
			total += u.Size
		}
		if total > uint64(s.Resources.Disk) {
			v.errorf("inputs", "the inputs from URLs declare %d bytes in all, more than resources.disk (%d bytes)", total, uint64(s.Resources.Disk))
		}
	}
}

// urlInput checks an input fetched from a URL: an http(s) URL the ledger
// takes, and the content's sha256.
func (v *validator) urlInput(field string, in Input) {
	probe := ledger.JobSpec{Disk: ^uint64(0), URLInputs: []ledger.URLInput{{Path: "/x", URL: in.From, SHA256: urlInputHash(in.SHA256)}}}
	if in.SHA256 == "" {
		v.errorf(field+".sha256", "is required with a URL: the SHA-256 of the content (64 hex digits, e.g. from sha256sum), which the provider checks")
	} else if !ledger.ValidBlobRef(urlInputHash(in.SHA256)) {
		v.errorf(field+".sha256", "%q: want 64 hex digits (sha256: may come first)", clip(in.SHA256))
	}
	if err := probe.URLInputsValid(); err != nil && !strings.Contains(err.Error(), "sha256") {
		msg := err.Error()
		if i := strings.Index(msg, ".from "); i >= 0 {
			msg = msg[i+len(".from "):]
		}
		v.errorf(field+".from", "%s", strings.TrimSuffix(msg, ": "+ledger.ErrInvalidMsg.Error()))
	} else if msg := urlHostProblem(in.From); msg != "" {
		v.errorf(field+".from", "%s", msg)
	}
}

// urlHostProblem says why no provider would fetch from the URL s because
// of its host, which is an address that is not public (loopback, private,
// link-local, …), or "" when its host is a name or a public address.
// Providers check again the address they dial, after resolving the name
// and on every redirect (package egress): this only refuses early what is
// sure to fail, with a clear error instead of a job handed back.
func urlHostProblem(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	host := u.Hostname()
	ip, err := netip.ParseAddr(host)
	switch {
	case err == nil:
		if class := egress.Classify(ip); class != "" {
			return fmt.Sprintf("%s is not a public address (%s): providers fetch URL inputs from public addresses only, never from their own networks", host, class)
		}
	case egress.EndsInNumber(host):
		return fmt.Sprintf("host %q is read as an IPv4 address in a nonstandard form: write an address as four decimal numbers (e.g. 192.0.2.10) or use a host name", host)
	}
	return ""
}

func (v *validator) outputs() {
	s := v.s
	if len(s.Outputs) == 0 {
		v.errorf("outputs", "at least one is required: a path in the job's filesystem collected after it ends, e.g. outputs: [/out]")
	}
	if len(s.Outputs) > MaxOutputs {
		v.errorf("outputs", "has %d entries; at most %d are allowed (collect a directory instead)", len(s.Outputs), MaxOutputs)
	}
	for i, out := range s.Outputs {
		field := fmt.Sprintf("outputs[%d]", i)
		if msg := guestPathProblem(out); msg != "" {
			v.errorf(field, "%s", msg)
			continue
		}
		v.conflicts(field, out, i, func(j int) string { return s.Outputs[j] },
			"%s is listed twice (also outputs[%d])",
			"%s is inside outputs[%d] %s, which is collected already",
			"%s contains outputs[%d] %s; collect only one of them")
	}
	if c := s.Checkpoint; c != nil {
		switch msg := guestPathProblem(c.Path); {
		case c.Path == "":
			v.errorf("checkpoint.path", "is required: the directory the job keeps its state in, e.g. checkpoint: {path: /ckpt, interval: 10m}")
		case msg != "":
			v.errorf("checkpoint.path", "%s", msg)
		}
		switch {
		case c.Interval < MinCheckpointInterval || c.Interval > MaxCheckpointInterval:
			v.errorf("checkpoint.interval", "%s out of range [%s, %s] (the chain also refuses less than its checkpoint_min_interval, 60s by default)", c.Interval, MinCheckpointInterval, MaxCheckpointInterval)
		case time.Duration(c.Interval)%time.Second != 0:
			v.errorf("checkpoint.interval", "%s: want whole seconds", c.Interval)
		}
	}
}

// conflicts reports the first of the guest paths before index i (read by
// at) that p repeats, lies inside or contains.
func (v *validator) conflicts(field, p string, i int, at func(int) string, same, inside, contains string) {
	if i >= max(MaxInputs, MaxOutputs) {
		return // too many to compare, and reported as such
	}
	for j := range i {
		other := at(j)
		switch {
		case p == other:
			v.errorf(field, same, p, j)
		case within(p, other):
			v.errorf(field, inside, p, j, other)
		case within(other, p):
			v.errorf(field, contains, p, j, other)
		default:
			continue
		}
		return
	}
}

// within reports whether guest path p is strictly inside dir.
func within(p, dir string) bool {
	return strings.HasPrefix(p, dir+"/")
}

// guestPathProblem says what is wrong with a path in the job's filesystem,
// or returns "".
func guestPathProblem(p string) string {
	switch {
	case p == "":
		return "is empty; write an absolute path such as /out"
	case strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Sprintf("%q contains a control character", clip(p))
	case len(p) > ledger.MaxGuestPathLen:
		return fmt.Sprintf("is %d bytes long; at most %d are allowed", len(p), ledger.MaxGuestPathLen)
	case !strings.HasPrefix(p, "/"):
		msg := fmt.Sprintf("%q is not absolute: paths in the job's filesystem start with /", clip(p))
		if c := path.Clean(p); c != ".." && !strings.HasPrefix(c, "../") {
			msg += fmt.Sprintf(", e.g. %q", clip("/"+c))
		}
		return msg
	case slices.Contains(strings.Split(p, "/"), ".."):
		return fmt.Sprintf("%q contains \"..\"; write the path without it", clip(p))
	case p == "/":
		return "cannot be / itself; use a directory such as /in or /out"
	case path.Clean(p) != p:
		return fmt.Sprintf("%q is not in its simplest form; write %q", clip(p), clip(path.Clean(p)))
	}
	return ""
}

func (v *validator) resources() {
	r := v.s.Resources
	switch {
	case math.IsNaN(r.CPU) || math.IsInf(r.CPU, 0):
		v.errorf("resources.cpu", "must be a number of cores, e.g. 1 or 0.5")
	case r.CPU <= 0:
		v.errorf("resources.cpu", "%g cores: must be more than 0, e.g. 1 or 0.5", r.CPU)
	case r.CPU > MaxCPU:
		v.errorf("resources.cpu", "%g cores is more than the %d a job may ask for", r.CPU, MaxCPU)
	}
	v.size("resources.memory", r.Memory, MinMemory, MaxMemory, "256MiB")
	v.size("resources.disk", r.Disk, MinDisk, MaxDisk, "1GiB")

	g := r.GPU
	switch {
	case g.Count < 0:
		v.errorf("resources.gpu.count", "%d: must not be negative (0 for no GPU)", g.Count)
	case g.Count > MaxGPUs:
		v.errorf("resources.gpu.count", "%d GPUs is more than the %d a job may ask for", g.Count, MaxGPUs)
	}
	if g.Count == 0 {
		var asks []string
		if len(g.Models) > 0 {
			asks = append(asks, "models")
		}
		if g.MinVRAM > 0 {
			asks = append(asks, "min_vram")
		}
		if g.MinComputeCap != "" {
			asks = append(asks, "min_compute_cap")
		}
		if len(asks) > 0 {
			v.errorf("resources.gpu.count", "is 0, but %s describe the GPU wanted: set count: 1 or more, or remove them", strings.Join(asks, " and "))
		}
	}
	for i, m := range g.Models {
		field := fmt.Sprintf("resources.gpu.models[%d]", i)
		switch n := NormalizeGPUModel(m); {
		case m == "":
			v.errorf(field, "is empty; write a hardware class such as RTX_4090 or A100_80GB")
		case n == "CPU":
			v.errorf(field, "cpu is not a GPU class; a CPU-only job sets gpu.count: 0")
		case !ledger.ValidHardwareClass(n):
			v.errorf(field, "%q is not a hardware class: use up to 32 letters, digits and _, e.g. RTX_4090 or A100_80GB (see gpunet offers)", clip(m))
		case n != m:
			v.errorf(field, "%q is written %q", clip(m), clip(n))
		case slices.Contains(g.Models[:i], m):
			v.errorf(field, "%s is listed twice", m)
		}
	}
	if g.MinVRAM != 0 {
		v.size("resources.gpu.min_vram", g.MinVRAM, MinMemory, MaxVRAM, "24GiB")
	}
	if c := g.MinComputeCap; c != "" && !ledger.ValidComputeCap(c) {
		v.errorf("resources.gpu.min_compute_cap", `%q is not a compute capability: write major.minor, e.g. "8.0" or "8.6"`, clip(c))
	}
}

// gang checks resources.nodes, resources.shm, resources.gpu.interconnect
// and placement: the ledger's rules (ledger.JobSpec's validateGang and
// validateResources) in the YAML's terms.
func (v *validator) gang() {
	s := v.s
	r := s.Resources
	switch {
	case r.Nodes < 1 && s.given("resources.nodes"):
		v.errorf("resources.nodes", "%d: a job runs as at least 1 member (leave nodes out for one)", r.Nodes)
	case r.Nodes > MaxNodes:
		v.errorf("resources.nodes", "%d members is more than the %d a job may ask for", r.Nodes, MaxNodes)
	case r.Nodes > 1 && s.Executor == ExecutorWASM:
		v.errorf("resources.nodes", "is %d, but a gang's members talk over a private network, which wasm jobs do not have: use executor: oci", r.Nodes)
	case r.Nodes > 1 && s.Verification != VerifyNone && s.Verification != VerifyFull && s.Verification != "":
		v.errorf("verification", "is %s, but a gang (resources.nodes: %d) is verified only by running whole replica gangs: use verification: full (deterministic: true) or verification: none", s.Verification, r.Nodes)
	case r.Nodes > 1 && s.Verification == VerifyFull && s.Checkpoint != nil:
		v.errorf("checkpoint", "is set, but a gang at verification: full (resources.nodes: %d) does not resume from checkpoints yet: drop checkpoint, or use verification: none", r.Nodes)
	case r.Nodes > 1 && s.Verification == VerifyFull && s.Compare != nil:
		v.errorf("compare", "is set, but the replica gangs of a gang at verification: full (resources.nodes: %d) are compared exactly: drop compare", r.Nodes)
	case r.Nodes > 1 && s.Trust != "":
		v.errorf("trust", "is %s, but a gang's (resources.nodes: %d) private network leaves each member's enclave: run a trusted job on one node", s.Trust, r.Nodes)
	}
	if r.Shm > 0 {
		switch {
		case s.Executor == ExecutorWASM:
			v.errorf("resources.shm", "is for oci jobs: a wasm job has no /dev/shm")
		case r.Shm > r.Memory:
			v.errorf("resources.shm", "%s is more than resources.memory %s: /dev/shm is held in the job's memory; raise memory or lower shm", r.Shm, r.Memory)
		}
	}
	switch ic := r.GPU.Interconnect; {
	case ic == "":
	case ic != InterconnectNVLink && ic != InterconnectPCIe:
		v.errorf("resources.gpu.interconnect", "%q is not an interconnect: use nvlink (every pair of GPUs linked by NVLink) or pcie (any), or leave it out", clip(ic))
	case ic == InterconnectNVLink && r.GPU.Count < 2:
		v.errorf("resources.gpu.interconnect", "nvlink links a provider's GPUs to each other, so gpu.count must be at least 2, not %d", r.GPU.Count)
	}
	if pl := s.Placement; pl != nil && pl.Region != "" {
		switch {
		case !ledger.ValidRegion(pl.Region):
			v.errorf("placement.region", "%q is not a region: use up to 32 lower-case letters, digits and '-', e.g. eu or us-east", clip(pl.Region))
		case s.Region != "" || s.RegionRequired:
			v.errorf("placement.region", "and region are both set: placement.region is region with region_required: true; keep one")
		}
	}
}

// size checks that b is within [lo, hi].
func (v *validator) size(field string, b, lo, hi Bytes, example string) {
	switch {
	case b == 0:
		v.errorf(field, "must be more than 0, e.g. %s", example)
	case b < lo:
		v.errorf(field, "%s is less than the minimum %s (a number without a unit is bytes: write e.g. %s)", b, lo, example)
	case b > hi:
		v.errorf(field, "%s is more than the maximum %s", b, hi)
	}
}

var (
	verifications = []string{VerifyNone, VerifySpot, VerifyFull}
	tiers         = []string{TierSpot, TierOnDemand, TierPriority}
)

// terms checks price, timeout, verification, placement and checkpoint.
func (v *validator) terms() {
	s := v.s
	switch {
	case s.MaxPrice == 0 && !s.given("max_price"):
		v.errorf("max_price", "is required: the most the job may cost, in SYNC per hour for the whole job, e.g. max_price: 0.5")
	case s.MaxPrice == 0:
		v.errorf("max_price", "must be more than 0 SYNC per hour, e.g. 0.5 or 500000usync")
	case s.MaxPrice > MaxPriceLimit:
		v.errorf("max_price", "%s is more than the maximum %s", s.MaxPrice, MaxPriceLimit)
	}

	switch {
	case s.Timeout == 0 && !s.given("timeout"):
		v.errorf("timeout", "is required: how long the job may run, e.g. timeout: 10m")
	case s.Timeout < MinTimeout:
		v.errorf("timeout", "%s is shorter than the minimum %s", s.Timeout, MinTimeout)
	case s.Timeout > MaxTimeout:
		v.errorf("timeout", "%s is longer than the maximum %s (168h); split the work, and use checkpoint to resume", s.Timeout, MaxTimeout)
	}

	v.oneOf("verification", s.Verification, verifications)
	v.oneOf("tier", s.Tier, tiers)
	v.trust()

	if s.Verification == VerifyFull && !s.IsDeterministic() {
		const full = "full needs a deterministic job, because replicas' outputs are compared by hash"
		if s.given("deterministic") {
			v.errorf("verification", "%s, but this one says deterministic: false; use verification: spot or none", full)
		} else {
			v.errorf("verification", "%s, and an oci job is not deterministic unless it says so: add deterministic: true if the same inputs always give byte-identical outputs, or use verification: spot or none", full)
		}
	}

	v.region()
	if s.Network && s.Executor == ExecutorWASM {
		v.errorf("network", "is true, but wasm jobs have no network: use executor: oci, or remove network")
	}
}

// region checks region and region_required.
func (v *validator) region() {
	s := v.s
	if s.Region != "" && !ledger.ValidRegion(s.Region) {
		msg := fmt.Sprintf("%q is not a region: use up to 32 lower-case letters, digits and '-', e.g. eu or us-east", clip(s.Region))
		if lower := strings.ToLower(s.Region); ledger.ValidRegion(lower) {
			msg += fmt.Sprintf(" (write %q)", lower)
		}
		v.errorf("region", "%s", msg)
	}
	if s.RegionRequired && s.Region == "" {
		v.errorf("region_required", "is true, but no region is given: set region (e.g. region: eu) or remove region_required")
	}
}

// kind explains a kind that is neither batch nor service.
func (v *validator) kind() {
	kinds := []string{KindBatch, KindService}
	msg := fmt.Sprintf("%q is not a kind; use %s", clip(v.s.Kind), quoteList(kinds))
	if meant := suggest(v.s.Kind, kinds); meant != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", meant)
	}
	v.errorf("kind", "%s", msg)
}

// compare checks that a compare rule names its kind and that the job is
// one whose replicas are compared at all. The tolerances' range is checked
// as they are read (ParseTolerance).
func (v *validator) compare() {
	c := v.s.Compare
	if c == nil {
		return
	}
	switch {
	case c.Numeric == nil && c.Program == "":
		v.errorf("compare", "names no rule: give numeric (compare: {numeric: {rtol: 1e-5, atol: 1e-8}}) or a judge program (compare: {program: ./same.wasm})")
	case c.Numeric != nil && c.Program != "":
		v.errorf("compare.program", "and compare.numeric are exclusive: a judge program decides alone; keep one")
	case c.Program != "":
		v.localOrBlob("compare.program", c.Program)
	}
	if c.Fuel != 0 && c.Program == "" {
		v.errorf("compare.fuel", "bounds a judge program, and compare names none: give compare.program, or leave fuel out")
	}
	if !v.s.IsDeterministic() || v.s.Verification == VerifyNone {
		v.errorf("compare", "judges replicas' outputs against each other, so the job must be checked: deterministic, with verification spot or full")
	}
}

// onChain asks the ledger, the authority, about the spec's on-chain form
// once every check above passed. Those checks explain each of the ledger's
// rules in the YAML's terms, so this finds nothing unless the two drift
// apart; then the spec is refused here, with the ledger's words, rather
// than on chain.
func (v *validator) onChain() {
	if len(v.errs) > 0 {
		return
	}
	module := v.s.Module
	if _, local := v.s.LocalModule(); local {
		module = PlaceholderModule // its blob exists only once it is sealed and uploaded
	}
	ls := v.s.LedgerSpec(module)
	if err := ls.Validate(); err != nil {
		v.errs = append(v.errs, &Error{Msg: "the ledger would refuse this spec: " + err.Error()})
	}
}

// oneOf checks that an enumerated field has one of its values.
func (v *validator) oneOf(field, value string, values []string) {
	if slices.Contains(values, value) {
		return
	}
	if value == "" {
		v.errorf(field, "is empty; use %s", quoteList(values))
		return
	}
	msg := fmt.Sprintf("%q is not one of %s", clip(value), quoteList(values))
	if meant := suggest(value, values); meant != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", meant)
	}
	v.errorf(field, "%s", msg)
}

// imageNameRE is an image reference before its digest, after the grammar
// of distribution/reference: an optional registry host, lower-case path
// components and an optional tag. It is stricter than the ledger's check,
// which a reference it accepts always passes; the digest is the ledger's
// (ledger.ValidBlobRef).
var imageNameRE = regexp.MustCompile(`^` +
	`(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?/)?` +
	`[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*` +
	`(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$`)

const (
	maxImageName = 255  // the reference before @sha256:…
	maxLocalPath = 4096 // module and inputs[].from on this machine
)

// DigestHint says how to find an image's digest; error messages about
// images without one end with it.
const DigestHint = "find the digest with `gpunet image digest REF`"

// imageProblem says what is wrong with an image reference, or returns "".
func imageProblem(ref string) string {
	name, digest, hasDigest := strings.Cut(ref, "@")
	if len(name) > maxImageName {
		return fmt.Sprintf("the name before @ is %d characters long; at most %d are allowed", len(name), maxImageName)
	}
	if !imageNameRE.MatchString(name) {
		return fmt.Sprintf("%q is not an image reference: write registry/repository@sha256:<64 hex digits>, with the repository in lower case", clip(ref))
	}
	if !hasDigest {
		bare := name
		if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
			bare = name[:i]
		}
		return fmt.Sprintf("%q is not pinned by digest; write %s@sha256:<64 hex digits> so that every provider runs the same bytes (%s)",
			ref, bare, strings.ReplaceAll(DigestHint, "REF", name))
	}
	if !ledger.ValidBlobRef(digest) {
		return fmt.Sprintf("%q has a bad digest %q: write sha256: followed by 64 lower-case hex digits (%s)", ref, clip(digest), strings.ReplaceAll(DigestHint, "REF", name))
	}
	return ""
}

// clip shortens a value quoted in an error message.
func clip(s string) string {
	const most = 80
	if len(s) <= most {
		return s
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// trust checks trust and tee_measurements, of a job or a service.
func (v *validator) trust() {
	s := v.s
	switch {
	case s.Trust != "" && s.Trust != TrustTEE:
		v.errorf("trust", "%q: want tee (only providers with verified TEE attestation), or leave it out", s.Trust)
	case len(s.TEEMeasurements) > 0 && s.Trust != TrustTEE:
		v.errorf("tee_measurements", "pins the measurement of attested providers: it needs trust: tee")
	}
	for i, m := range s.TEEMeasurements {
		if b, err := hex.DecodeString(m); err != nil || len(b) == 0 || len(m) > 128 || strings.ToLower(m) != m {
			v.errorf("tee_measurements", "[%d] %q: want a launch measurement in lower-case hex (TDX MRTD, SEV-SNP MEASUREMENT: 96 digits)", i, m)
		}
	}
}
