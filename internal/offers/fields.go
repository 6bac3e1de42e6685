package offers

import (
	"slices"
	"strings"

	"github.com/gpunet/gpunet/internal/typo"
)

// kind is a field's type; it decides which operators and values a term may
// use and how values compare.
type kind int

const (
	kindString  kind = iota // case-insensitive equality
	kindGPU                 // like kindString, and spaces and dashes match underscores
	kindInt                 // exact integer comparison
	kindNumber              // float64 comparison
	kindSize                // float64 GiB; values may carry a unit
	kindBool                // true or false
	kindVersion             // dotted integers: 8.6 < 9.0 < 10.0
	kindSet                 // a set of names; = means "contains"
	kindTEE                 // a TEE kind, or any or none
)

func (k kind) String() string {
	return [...]string{"string", "string", "integer", "number", "size", "bool", "version", "set", "TEE kind"}[k]
}

// ops lists the operators a kind allows, in canonical spelling.
func (k kind) ops() []op {
	switch k {
	case kindString, kindGPU, kindBool, kindSet, kindTEE:
		return []op{opEQ, opNE, opIn, opNotIn}
	default:
		return []op{opLT, opLE, opEQ, opNE, opGE, opGT, opIn, opNotIn}
	}
}

func (k kind) allows(o op) bool { return slices.Contains(k.ops(), o) }

// field describes one searchable attribute of an Offer. Exactly one accessor
// is set, the one that fits kind.
type field struct {
	name    string
	aliases []string
	kind    kind
	unit    string
	desc    string

	str  func(*Offer) string                 // kindString, kindGPU, kindVersion, kindTEE
	num  func(*Offer) float64                // kindNumber, kindSize
	intv func(*Offer) (neg bool, mag uint64) // kindInt
	bool func(*Offer) bool                   // kindBool
	set  func(*Offer) []string               // kindSet
}

func fromInt(get func(*Offer) int) func(*Offer) (bool, uint64) {
	return func(o *Offer) (bool, uint64) {
		v := get(o)
		if v < 0 {
			return true, uint64(-(v + 1)) + 1 // no overflow at math.MinInt
		}
		return false, uint64(v)
	}
}

// fields is the field table, in the order help text lists them: the fields
// DESIGN.md §7 requires first, then the rest.
var fields = []*field{
	{name: "gpu", aliases: []string{"gpu_name"}, kind: kindGPU,
		desc: `GPU hardware class, e.g. RTX_4090 or H100_80GB; "cpu" for a CPU-only provider; spaces and dashes match underscores`,
		str:  func(o *Offer) string { return o.GPU }},
	{name: "count", aliases: []string{"num_gpus"}, kind: kindInt,
		desc: "number of GPUs (0 for CPU-only)",
		intv: fromInt(func(o *Offer) int { return o.Count })},
	{name: "vram", aliases: []string{"gpu_ram"}, kind: kindSize, unit: "GiB",
		desc: "memory per GPU",
		num:  func(o *Offer) float64 { return o.VRAM }},
	{name: "cpu", aliases: []string{"cpu_cores"}, kind: kindInt, unit: "cores",
		desc: "CPU cores",
		intv: fromInt(func(o *Offer) int { return o.CPU })},
	{name: "ram", aliases: []string{"cpu_ram"}, kind: kindSize, unit: "GiB",
		desc: "system memory",
		num:  func(o *Offer) float64 { return o.RAM }},
	{name: "disk", aliases: []string{"disk_space"}, kind: kindSize, unit: "GiB",
		desc: "free disk",
		num:  func(o *Offer) float64 { return o.Disk }},
	{name: "price", aliases: []string{"dph"}, kind: kindNumber, unit: "SYNC/h",
		desc: "price per hour per unit: per GPU, or per CPU core for a CPU-only provider",
		num:  func(o *Offer) float64 { return o.Price }},
	{name: "region", aliases: []string{"geolocation"}, kind: kindString,
		desc: "region, e.g. eu or us-east",
		str:  func(o *Offer) string { return o.Region }},
	{name: "reputation", kind: kindNumber, unit: "0..1",
		desc: "reputation from verified work",
		num:  func(o *Offer) float64 { return o.Reputation }},
	{name: "uptime", aliases: []string{"reliability"}, kind: kindNumber, unit: "0..1",
		desc: "fraction of liveness challenges answered",
		num:  func(o *Offer) float64 { return o.Uptime }},
	{name: "tops", kind: kindNumber, unit: "TOPS",
		desc: "int8 throughput of the whole machine: as measured, capped by what hardware challenges proved",
		num:  func(o *Offer) float64 { return o.TOPS }},
	{name: "executor", kind: kindSet,
		desc: "supported executors (oci, wasm); executor=oci means oci is supported, executor!=oci that it is not",
		set:  func(o *Offer) []string { return o.Executor }},
	{name: "wasm_engine", kind: kindString,
		desc: `wasm engine, version, platform and settings the provider runs wasm jobs on, e.g. "wazero-1.12.0/linux-amd64/wasi-gpunet-1" (quote one with commas); the replicas of a verified wasm job run on one engine`,
		str:  func(o *Offer) string { return o.WasmEngine }},
	{name: "tee", kind: kindTEE,
		desc: "attested confidential guest: tdx, sev-snp, any (either) or none; an attestation counts while it is unexpired and over the provider's current encryption key",
		str:  func(o *Offer) string { return o.TEE }},
	{name: "tee_expiry", kind: kindInt, unit: "unix seconds",
		desc: "when the provider's TEE attestation stops counting (0 for none)",
		intv: func(o *Offer) (bool, uint64) {
			if o.TEEExpiry < 0 {
				return true, uint64(-(o.TEEExpiry + 1)) + 1
			}
			return false, uint64(o.TEEExpiry)
		}},
	{name: "validated", kind: kindInt,
		desc: "results another replica confirmed",
		intv: func(o *Offer) (bool, uint64) { return false, o.Validated }},
	{name: "invalid", kind: kindInt,
		desc: "results outvoted by other replicas",
		intv: func(o *Offer) (bool, uint64) { return false, o.Invalid }},
	{name: "challenge_pass", kind: kindNumber, unit: "0..1",
		desc: "share of hardware challenges passed",
		num:  func(o *Offer) float64 { return o.ChallengePass }},
	{name: "slashed", kind: kindInt, unit: "usync",
		desc: "stake ever slashed",
		intv: func(o *Offer) (bool, uint64) { return false, o.Slashed }},
	{name: "address", kind: kindString,
		desc: "provider account (gpu1…)",
		str:  func(o *Offer) string { return o.Address }},
	{name: "label", kind: kindString,
		desc: `the name the provider gives itself, e.g. label="Acme GPUs #2" (self-declared: two providers may share one)`,
		str:  func(o *Offer) string { return o.Label }},
	{name: "stake", kind: kindInt, unit: "usync",
		desc: "stake bonded",
		intv: func(o *Offer) (bool, uint64) { return false, o.Stake }},
	{name: "online", kind: kindBool,
		desc: "reachable now",
		bool: func(o *Offer) bool { return o.Online }},
	{name: "compute_cap", kind: kindVersion,
		desc: "CUDA compute capability, compared as a version (8.6 < 9.0 < 10.0)",
		str:  func(o *Offer) string { return o.ComputeCap }},
	{name: "interconnect", aliases: []string{"nvlink_topology"}, kind: kindString,
		desc: `what links the provider's GPUs: nvlink (every pair over NVLink, as a job's gpu.interconnect: nvlink asks), pcie, or "" (fewer than two GPUs)`,
		str:  func(o *Offer) string { return o.Interconnect }},
	{name: "bandwidth", aliases: []string{"gpu_mem_bw"}, kind: kindNumber, unit: "GB/s",
		desc: "measured memory bandwidth",
		num:  func(o *Offer) float64 { return o.Bandwidth }},
	{name: "max_jobs", kind: kindInt,
		desc: "most jobs the provider runs at once",
		intv: fromInt(func(o *Offer) int { return o.MaxJobs })},
	{name: "jobs", kind: kindInt,
		desc: "jobs running now",
		intv: fromInt(func(o *Offer) int { return o.Jobs })},
}

// byName maps every field name and alias to its field.
var byName = func() map[string]*field {
	m := make(map[string]*field)
	for _, f := range fields {
		m[f.name] = f
		for _, a := range f.aliases {
			m[a] = f
		}
	}
	return m
}()

// lookup finds a field by name or alias, ignoring case.
func lookup(name string) *field {
	if f := byName[name]; f != nil {
		return f
	}
	return byName[strings.ToLower(name)]
}

// FieldInfo describes a query field for help text and documentation.
type FieldInfo struct {
	Name        string   // canonical name, as String and ParseSort write it
	Aliases     []string // other names accepted for it (Vast.ai's, mostly)
	Type        string   // string, integer, number, size, bool, version or set
	Unit        string   // unit of its values, e.g. "GiB" or "SYNC/h"; "" if none
	Ops         []string // operators it accepts
	Description string
}

// Fields describes every query field, the required ones first. The caller
// may modify the result.
func Fields() []FieldInfo {
	out := make([]FieldInfo, len(fields))
	for i, f := range fields {
		var ops []string
		for _, o := range f.kind.ops() {
			ops = append(ops, o.String())
		}
		out[i] = FieldInfo{
			Name:        f.name,
			Aliases:     append([]string(nil), f.aliases...),
			Type:        f.kind.String(),
			Unit:        f.unit,
			Ops:         ops,
			Description: f.desc,
		}
	}
	return out
}

// fieldNames is the list of canonical names for error messages.
func fieldNames() string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	return strings.Join(names, ", ")
}

// suggest returns the field name or alias closest to name by edit
// distance, or "" when none is close enough to be a plausible typo.
func suggest(name string) string {
	name = strings.ToLower(name)
	best, bestD := "", len(name)+1
	consider := func(cand string) {
		if d := typo.Distance(name, cand); d < bestD {
			best, bestD = cand, d
		}
	}
	for _, f := range fields {
		consider(f.name)
		for _, a := range f.aliases {
			consider(a)
		}
	}
	// One edit in three characters: "vrm" → "vram", "regoin" → "region",
	// but not "x" → "cpu".
	if best == "" || 3*bestD > len(name)+2 {
		return ""
	}
	return best
}
