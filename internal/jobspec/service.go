package jobspec

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/goccy/go-yaml/ast"

	"github.com/gpunet/gpunet/internal/ledger"
)

// Services (kind: service, docs/jobspec.md "Services"): a long-running oci
// container with ports, placed as Replicas replicas, each paid per second
// at up to MaxPrice per hour from Budget, until it is stopped or the
// budget runs out. A service spec shares a batch job's name, image,
// command, args, env, resources, max_price, region and network fields
// (max_price is per replica); it has no module, inputs, outputs, timeout,
// verification, checkpoint, tier or deterministic, and Parse refuses them
// with the reason.

// Values of Spec.Kind.
const (
	KindBatch   = "batch"   // runs to completion: outputs, timeout, verification
	KindService = "service" // runs until stopped: ports, replicas, budget
	// kindInvalid stands for a kind that was not a string, reported as
	// such, so that the rest is not checked as a batch job's.
	kindInvalid = "(invalid)"
)

// Port is a port a service's container listens on.
type Port struct {
	Port     int    `yaml:"port" json:"port"`                     // 1 … 65535
	Name     string `yaml:"name,omitempty" json:"name,omitempty"` // [a-z0-9-]{0,15}
	Protocol string `yaml:"protocol" json:"protocol"`             // PortHTTP (default) or PortTCP
}

// Values of Port.Protocol: the ledger's.
const (
	PortHTTP = ledger.PortHTTP // relayed as HTTP at {node}/svc/{id}/{port}/
	PortTCP  = ledger.PortTCP  // a byte stream only (gpunet service connect)
)

// Readiness is how a provider checks that a replica serves: GET Path on
// Port answering 2xx (no path: a TCP connect) every Interval, each within
// Timeout. FailureThreshold failures in a row after it was ready, or not
// being ready within Start of its placement, make the provider give the
// replica back, to be placed elsewhere.
type Readiness struct {
	Port             int      `yaml:"port" json:"port"`                     // one of ports; default the first
	Path             string   `yaml:"path,omitempty" json:"path,omitempty"` // "/health"; empty: TCP connect
	Interval         Duration `yaml:"interval" json:"interval"`
	Timeout          Duration `yaml:"timeout" json:"timeout"`
	FailureThreshold int      `yaml:"failure_threshold" json:"failure_threshold"`
	Start            Duration `yaml:"start" json:"start"`
}

// OpenAI says the service speaks OpenAI's chat completions API on Port
// for Models: every node's /openai/v1 routes requests for them to it.
//
// Exact is the owner's statement that the models' deterministic answers
// are bit-exact on any hardware (int8 kernels, integer or CPU code): only
// then can a replica outvoted on a checked request be disputed and
// slashed (docs/ledger.md, "Service disputes").
//
// Tolerance is, for a float model, the owner's tolerance on
// log-probabilities: a replica whose answer two others judge different
// beyond it (a different model, not a near tie) can be disputed and
// slashed. The chain judges with at least its own least tolerance
// (params.service_logprob_tolerance_min_e9).
type OpenAI struct {
	Port      int              `yaml:"port" json:"port"` // one of the http ports; default the first
	Models    []string         `yaml:"models" json:"models"`
	Exact     bool             `yaml:"exact,omitempty" json:"exact,omitempty"`
	Tolerance *OpenAITolerance `yaml:"tolerance,omitempty" json:"tolerance,omitempty"`
}

// OpenAITolerance is openai.tolerance: Logprob in nats, in (0, 1], read
// exactly, at most 9 decimals (the ledger keeps parts per 10^9).
type OpenAITolerance struct {
	Logprob Tolerance `yaml:"logprob" json:"logprob_e18"`
}

// Defaults and bounds of a service spec.
const (
	DefaultReplicas         = 1
	DefaultReadyInterval    = Duration(5 * time.Second)
	DefaultReadyTimeout     = Duration(2 * time.Second)
	DefaultFailureThreshold = 3
	DefaultReadyStart       = Duration(5 * time.Minute)

	MaxReplicas         = ledger.MaxServiceReplicas
	MaxPorts            = ledger.MaxServicePorts
	MaxModels           = ledger.MaxServiceModels
	MaxModelNameLen     = ledger.MaxModelNameLen
	MinReadyInterval    = Duration(time.Second)
	MaxReadyInterval    = Duration(ledger.MaxReadinessInterval * time.Second)
	MaxReadyStart       = Duration(ledger.MaxServiceStartSeconds * time.Second)
	MaxFailureThreshold = ledger.MaxReadinessFailures
	maxReadyPath        = ledger.MaxReadinessPathLen

	// MaxBudget bounds budget (10^12 SYNC) far above any real one, so
	// that escrow arithmetic cannot overflow.
	MaxBudget Amount = 1e12 * usyncPerSync
)

// Amount is an amount of usync (1 SYNC = 10^6 usync). In YAML it is a
// number with its unit: "5 SYNC", "0.5sync" or "5000000usync". A bare
// number is refused: the CLI reads one as usync and max_price as SYNC, so
// a budget says which it means.
type Amount uint64

// ParseAmount reads an amount such as "5 SYNC", "0.5sync" or
// "5000000usync".
func ParseAmount(s string) (Amount, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	scale := int64(usyncPerSync)
	switch {
	case strings.HasSuffix(t, "usync"):
		t, scale = strings.TrimSuffix(t, "usync"), 1
	case strings.HasSuffix(t, "sync"):
		t = strings.TrimSuffix(t, "sync")
	case strings.HasSuffix(t, "/h"), strings.HasSuffix(t, "/hour"):
		return 0, fmt.Errorf("%q is a price per hour; a budget is an amount in all, e.g. 5 SYNC", clip(s))
	default:
		if _, err := parseDecimal(t); err == nil {
			return 0, fmt.Errorf("%q has no unit: write e.g. %s SYNC or %susync", clip(s), t, t)
		}
	}
	u, err := usyncOf(s, t, scale, "amount", "an amount: write e.g. 5 SYNC, 0.5sync or 500000usync")
	return Amount(u), err
}

// String writes a for people and for YAML: "5 SYNC", "0.000001 SYNC".
func (a Amount) String() string { return Price(a).Sync() + " SYNC" }

// MarshalYAML writes a as String does, which ParseAmount reads.
func (a Amount) MarshalYAML() ([]byte, error) { return []byte(a.String()), nil }

// IsService reports whether s is a service (kind: service).
func (s *Spec) IsService() bool { return s.Kind == KindService }

// ServiceSpec is the on-chain form of a service spec (what
// MsgDeployService carries). Budget and Public travel beside it in the
// message.
func (s *Spec) ServiceSpec() ledger.ServiceSpec {
	ls := ledger.ServiceSpec{
		Name: s.Name, Image: s.Image, Command: s.Command, Args: s.Args, Env: s.Env,
		CPUMilli: uint64(math.Ceil(s.Resources.CPU * 1000)), Memory: uint64(s.Resources.Memory), Disk: uint64(s.Resources.Disk),
		GPUCount: uint64(max(0, s.Resources.GPU.Count)), GPUModels: s.Resources.GPU.Models,
		MinVRAM: uint64(s.Resources.GPU.MinVRAM), MinComputeCap: s.Resources.GPU.MinComputeCap,
		MaxPricePerHour: uint64(s.MaxPrice), Region: s.Region, RegionRequired: s.RegionRequired, Network: s.Network,
		Trust: s.Trust, TEEMeasurements: s.TEEMeasurements,
		Replicas: uint64(max(0, s.Replicas)),
	}
	for _, p := range s.Ports {
		ls.Ports = append(ls.Ports, ledger.ServicePort{Port: uint64(max(0, p.Port)), Name: p.Name, Protocol: p.Protocol})
	}
	if r := s.Readiness; r != nil {
		ls.Readiness = ledger.ServiceReadiness{
			Port: uint64(max(0, r.Port)), Path: r.Path,
			IntervalSeconds: seconds(r.Interval), TimeoutSeconds: seconds(r.Timeout),
			FailureThreshold: uint64(max(0, r.FailureThreshold)), StartSeconds: seconds(r.Start),
		}
	}
	if o := s.OpenAI; o != nil {
		ls.OpenAI = &ledger.ServiceOpenAI{Port: uint64(max(0, o.Port)), Models: o.Models, Exact: o.Exact}
		if o.Tolerance != nil {
			ls.OpenAI.LogprobTolE9 = uint64(o.Tolerance.Logprob) / (tolerancePerUnit / ledger.MaxLogprobTolE9)
		}
	}
	return ls
}

func seconds(d Duration) uint64 { return uint64(max(0, time.Duration(d)/time.Second)) }

// setServiceDefaults fills in what a service spec may leave out.
func (s *Spec) setServiceDefaults(given func(field string) bool) {
	if s.Executor == "" {
		s.Executor = ExecutorOCI
	}
	if s.Replicas == 0 && !given("replicas") {
		s.Replicas = DefaultReplicas
	}
	for i := range s.Ports {
		if s.Ports[i].Protocol == "" {
			s.Ports[i].Protocol = PortHTTP
		}
	}
	first := 0
	if len(s.Ports) > 0 {
		first = s.Ports[0].Port
	}
	if s.Readiness == nil {
		s.Readiness = &Readiness{}
	}
	r := s.Readiness
	if r.Port == 0 && !given("readiness.port") {
		r.Port = first
	}
	if r.Interval == 0 && !given("readiness.interval") {
		r.Interval = DefaultReadyInterval
	}
	if r.Timeout == 0 && !given("readiness.timeout") {
		r.Timeout = DefaultReadyTimeout
	}
	if r.FailureThreshold == 0 && !given("readiness.failure_threshold") {
		r.FailureThreshold = DefaultFailureThreshold
	}
	if r.Start == 0 && !given("readiness.start") {
		r.Start = DefaultReadyStart
	}
	if o := s.OpenAI; o != nil && o.Port == 0 && !given("openai.port") {
		o.Port = first
	}
}

// Fields of a service's mappings, in the order the docs list them.
var (
	serviceFields   = []string{"name", "kind", "executor", "image", "command", "args", "env", "ports", "readiness", "replicas", "resources", "max_price", "budget", "region", "region_required", "network", "trust", "tee_measurements", "openai", "public"}
	portFields      = []string{"port", "name", "protocol"}
	readinessFields = []string{"path", "port", "interval", "timeout", "failure_threshold", "start"}
	openaiFields    = []string{"port", "models", "exact", "tolerance"}
	// openaiToleranceFields are openai.tolerance's.
	openaiToleranceFields = []string{"logprob"}
)

// batchOnly are the fields a service may not have, and why.
var batchOnly = []struct{ field, why string }{
	{"module", "a service runs an oci image (image:); wasm modules are for batch jobs"},
	{"inputs", "a service has no inputs: put the files it needs in its image"},
	{"outputs", "a service has no outputs: it runs until it is stopped, and nothing is collected"},
	{"timeout", "a service runs until it is stopped or its budget runs out: budget bounds what it costs"},
	{"verification", "a service has no result to verify by re-running; evict a replica that misbehaves with gpunet service evict"},
	{"checkpoint", "a service is not checkpointed: a replica that ends is started afresh on another provider"},
	{"tier", "a service has no tier: its replicas run until it is stopped"},
	{"deterministic", "says whether a batch job's outputs can be compared; a service has none"},
	{"compare", "says how a batch job's replicas' outputs are judged the same; a service has no outputs"},
}

// serviceOnly are the fields a batch job may not have.
var serviceOnly = []string{"ports", "readiness", "replicas", "budget", "openai", "public"}

// ports decodes ports: a list of {port, name, protocol}, or of bare port
// numbers.
func (d *decoder) ports(field string, n ast.Node) []Port {
	items := d.sequence(field, n, "ports: [{port: 8000, name: api}]")
	if items == nil {
		return nil
	}
	out := make([]Port, len(items))
	for i, item := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		d.mark(f, nodePos(item), item)
		switch v, _ := d.resolve(f, item); v.(type) {
		case nil:
			continue
		case *ast.NullNode:
			d.errorf(f, nodePos(item), "is empty; a port needs its number, e.g. {port: 8000}")
			continue
		case *ast.IntegerNode:
			d.pos[f+".port"] = d.pos[f]
			out[i].Port = d.integer(f+".port", item, "port: 8000")
			continue
		}
		for _, e := range d.mapping(f, item, "{port: 8000, name: api}") {
			ff := f + "." + e.key
			d.mark(ff, e.pos, e.value)
			switch e.key {
			case "port":
				out[i].Port = d.integer(ff, e.value, "port: 8000")
			case "name":
				out[i].Name = d.str(ff, e.value, "name: api")
			case "protocol":
				out[i].Protocol = d.str(ff, e.value, "protocol: http")
			default:
				delete(d.pos, ff)
				d.unknown(f, e, portFields)
			}
		}
	}
	return out
}

func (d *decoder) readiness(field string, n ast.Node) *Readiness {
	entries := d.mapping(field, n, "readiness: {path: /health, port: 8000}")
	r := &Readiness{}
	for _, e := range entries {
		f := field + "." + e.key
		d.mark(f, e.pos, e.value)
		switch e.key {
		case "path":
			r.Path = d.str(f, e.value, "path: /health")
		case "port":
			r.Port = d.integer(f, e.value, "port: 8000")
		case "interval":
			r.Interval = d.duration(f, e.value)
		case "timeout":
			r.Timeout = d.duration(f, e.value)
		case "failure_threshold":
			r.FailureThreshold = d.integer(f, e.value, "failure_threshold: 3")
		case "start":
			r.Start = d.duration(f, e.value)
		default:
			delete(d.pos, f)
			d.unknown(field, e, readinessFields)
		}
	}
	return r
}

func (d *decoder) openai(field string, n ast.Node) *OpenAI {
	v, _ := d.resolve(field, n)
	if _, ok := v.(*ast.NullNode); ok || v == nil {
		return nil
	}
	o := &OpenAI{}
	for _, e := range d.mapping(field, n, "openai: {port: 8000, models: [tinylm]}") {
		f := field + "." + e.key
		d.mark(f, e.pos, e.value)
		switch e.key {
		case "port":
			o.Port = d.integer(f, e.value, "port: 8000")
		case "models":
			o.Models = d.stringList(f, e.value, "models: [tinylm]")
		case "exact":
			o.Exact, _ = d.boolean(f, e.value)
		case "tolerance":
			o.Tolerance = d.openaiTolerance(f, e.value)
		default:
			delete(d.pos, f)
			d.unknown(field, e, openaiFields)
		}
	}
	return o
}

// openaiTolerance decodes openai.tolerance: {logprob: 0.05}: a number of
// nats in (0, 1], at most 9 decimals, read exactly.
func (d *decoder) openaiTolerance(field string, n ast.Node) *OpenAITolerance {
	v, _ := d.resolve(field, n)
	if _, ok := v.(*ast.NullNode); ok || v == nil {
		return nil
	}
	t := &OpenAITolerance{}
	for _, e := range d.mapping(field, n, "tolerance: {logprob: 0.05}") {
		f := field + "." + e.key
		d.mark(f, e.pos, e.value)
		switch e.key {
		case "logprob":
			errs := len(d.errs)
			t.Logprob = d.tolerance(f, e.value)
			const step = tolerancePerUnit / ledger.MaxLogprobTolE9
			switch {
			case len(d.errs) > errs: // said already
			case t.Logprob == 0:
				d.errorf(f, nodePos(e.value), "a tolerance of 0 nats makes any rounding a fault; leave openai.tolerance out, or write e.g. logprob: 0.05")
			case t.Logprob%step != 0:
				d.errorf(f, nodePos(e.value), "%s is finer than 1e-9 nats, the smallest step the chain keeps", t.Logprob)
			}
		default:
			delete(d.pos, f)
			d.unknown(field, e, openaiToleranceFields)
		}
	}
	return t
}

// amount decodes an amount with its unit.
func (d *decoder) amount(field string, n ast.Node) Amount {
	v, _ := d.resolve(field, n)
	switch v.(type) {
	case nil, *ast.NullNode:
		return 0
	case *ast.StringNode, *ast.LiteralNode, *ast.IntegerNode, *ast.FloatNode:
		s, _ := scalarText(v)
		a, err := ParseAmount(s)
		if err != nil {
			d.errorf(field, nodePos(v), "%v", err)
		}
		return a
	}
	d.typeError(field, v, "an amount of SYNC", "5 SYNC or 5000000usync")
	return 0
}

// validateService checks a service spec (kind: service).
func (v *validator) validateService() {
	s := v.s
	v.name()
	for _, b := range batchOnly {
		if s.given(b.field) {
			v.errorf(b.field, "is not for a service: %s", b.why)
		}
	}
	switch s.Executor {
	case ExecutorOCI:
	case ExecutorWASM:
		v.errorf("executor", "a service runs as an oci container; wasm is for batch jobs (remove executor, or write executor: oci)")
	default:
		v.errorf("executor", `%q is not an executor for a service: services run only as "oci" containers (the default)`, clip(s.Executor))
	}
	if s.Image == "" {
		v.errorf("image", "is required for a service: an image by digest, e.g. ghcr.io/org/app@sha256:<64 hex digits>")
	} else if msg := imageProblem(s.Image); msg != "" {
		v.errorf("image", "%s", msg)
	}
	v.argv()
	v.env()
	v.resources()
	v.trust()
	v.ports()
	v.readiness()
	v.openai()
	v.serviceTerms()
	v.serviceOnChain()
}

// portNameRE is the ledger's rule for a port's name.
var portNameRE = regexp.MustCompile(`^[a-z0-9-]{0,15}$`)

func (v *validator) ports() {
	s := v.s
	switch {
	case len(s.Ports) == 0:
		v.errorf("ports", "at least one is required: the ports the container listens on, e.g. ports: [{port: 8000, name: api}]")
	case len(s.Ports) > MaxPorts:
		v.errorf("ports", "has %d entries; at most %d are allowed", len(s.Ports), MaxPorts)
	}
	for i, p := range s.Ports {
		f := fmt.Sprintf("ports[%d]", i)
		switch {
		case p.Port < 1 || p.Port > 65535:
			v.errorf(f+".port", "%d is not a port: use 1 to 65535", p.Port)
		case slices.ContainsFunc(s.Ports[:i], func(q Port) bool { return q.Port == p.Port }):
			v.errorf(f+".port", "%d is listed twice", p.Port)
		}
		if !portNameRE.MatchString(p.Name) {
			v.errorf(f+".name", "%q is not a port name: use up to 15 lower-case letters, digits and '-', e.g. api", clip(p.Name))
		} else if p.Name != "" && slices.ContainsFunc(s.Ports[:i], func(q Port) bool { return q.Name == p.Name }) {
			v.errorf(f+".name", "%q is the name of another port too", p.Name)
		}
		v.oneOf(f+".protocol", p.Protocol, []string{PortHTTP, PortTCP})
	}
}

// declared reports whether port is one of the spec's ports.
func (s *Spec) declared(port int) *Port {
	for i := range s.Ports {
		if s.Ports[i].Port == port {
			return &s.Ports[i]
		}
	}
	return nil
}

func (v *validator) readiness() {
	s := v.s
	r := s.Readiness
	if r == nil {
		v.errorf("readiness", "is missing; SetDefaults fills it in")
		return
	}
	if len(s.Ports) > 0 && s.declared(r.Port) == nil {
		v.errorf("readiness.port", "%d is not one of the ports; check one of %s", r.Port, portList(s.Ports))
	}
	if p := r.Path; p != "" {
		switch {
		case !strings.HasPrefix(p, "/"):
			v.errorf("readiness.path", "%q is not a path: start it with /, e.g. /health", clip(p))
		case len(p) > maxReadyPath:
			v.errorf("readiness.path", "is %d bytes long; at most %d are allowed", len(p), maxReadyPath)
		case strings.ContainsFunc(p, func(r rune) bool { return r <= ' ' || r == 0x7f || unicode.IsSpace(r) }):
			v.errorf("readiness.path", "%q contains a space or control character; escape it as in a URL (%%20)", clip(p))
		case strings.ContainsAny(p, "?#"):
			v.errorf("readiness.path", "%q has a query or fragment; write the path alone, e.g. /health", clip(p))
		}
		if dp := s.declared(r.Port); dp != nil && dp.Protocol == PortTCP {
			v.errorf("readiness.path", "is an HTTP path, but port %d is tcp: remove path to check with a TCP connect, or make the port http", r.Port)
		}
	}
	intervalOK := v.wholeSeconds("readiness.interval", r.Interval, MinReadyInterval, MaxReadyInterval)
	if v.wholeSeconds("readiness.timeout", r.Timeout, MinReadyInterval, MaxReadyInterval) && intervalOK && r.Timeout > r.Interval {
		v.errorf("readiness.timeout", "%s is longer than the interval %s: a check must end before the next one", r.Timeout, r.Interval)
	}
	if r.FailureThreshold < 1 || r.FailureThreshold > MaxFailureThreshold {
		v.errorf("readiness.failure_threshold", "%d out of range [1, %d]: how many failed checks in a row end a replica", r.FailureThreshold, MaxFailureThreshold)
	}
	v.wholeSeconds("readiness.start", r.Start, MinReadyInterval, MaxReadyStart)
}

// wholeSeconds checks a duration of whole seconds in [lo, hi], and reports
// whether it is.
func (v *validator) wholeSeconds(field string, d, lo, hi Duration) bool {
	switch {
	case d < lo || d > hi:
		v.errorf(field, "%s out of range [%s, %s]", d, lo, hi)
	case time.Duration(d)%time.Second != 0:
		v.errorf(field, "%s: want whole seconds", d)
	default:
		return true
	}
	return false
}

func (v *validator) openai() {
	s := v.s
	o := s.OpenAI
	if o == nil {
		return
	}
	switch p := s.declared(o.Port); {
	case len(s.Ports) == 0:
	case p == nil:
		v.errorf("openai.port", "%d is not one of the ports; use one of %s", o.Port, portList(s.Ports))
	case p.Protocol != PortHTTP:
		v.errorf("openai.port", "port %d is tcp; OpenAI's API is HTTP, so it needs an http port", o.Port)
	}
	switch {
	case len(o.Models) == 0:
		v.errorf("openai.models", "at least one is required: the model names clients ask for, e.g. models: [tinylm]")
	case len(o.Models) > MaxModels:
		v.errorf("openai.models", "has %d entries; at most %d are allowed", len(o.Models), MaxModels)
	}
	for i, m := range o.Models {
		f := fmt.Sprintf("openai.models[%d]", i)
		switch {
		case m == "":
			v.errorf(f, "is empty; write the model's name, e.g. tinylm")
		case len(m) > MaxModelNameLen:
			v.errorf(f, "is %d bytes long; at most %d are allowed", len(m), MaxModelNameLen)
		case !ledger.ValidModelName(m):
			v.errorf(f, "%q is not a model name: use letters, digits and . _ : / -, e.g. llama-3-8b or org/model:q4", clip(m))
		case slices.Contains(o.Models[:i], m):
			v.errorf(f, "%s is listed twice", m)
		}
	}
	if o.Exact && o.Tolerance != nil {
		v.errorf("openai.tolerance", "and openai.exact exclude each other: bit-exact answers need no tolerance; keep exact for integer or int8 models, tolerance for float ones")
	}
}

func (v *validator) serviceTerms() {
	s := v.s
	switch {
	case s.Replicas < 1 || s.Replicas > MaxReplicas:
		v.errorf("replicas", "%d out of range [1, %d]", s.Replicas, MaxReplicas)
	}
	switch {
	case s.MaxPrice == 0 && !s.given("max_price"):
		v.errorf("max_price", "is required: the most one replica may cost, in SYNC per hour, e.g. max_price: 1 SYNC/h")
	case s.MaxPrice == 0:
		v.errorf("max_price", "must be more than 0 SYNC per hour, e.g. 1 or 1000000usync")
	case s.MaxPrice > MaxPriceLimit:
		v.errorf("max_price", "%s is more than the maximum %s", s.MaxPrice, MaxPriceLimit)
	}
	switch {
	case s.Budget == 0 && !s.given("budget"):
		v.errorf("budget", "is required: the SYNC locked to pay the replicas, e.g. budget: 5 SYNC (top it up later with gpunet service topup)")
	case s.Budget == 0:
		v.errorf("budget", "must be more than 0, e.g. 5 SYNC")
	case s.Budget > MaxBudget:
		v.errorf("budget", "%s is more than the maximum %s", s.Budget, MaxBudget)
	}
	v.region()
}

// serviceOnChain asks the ledger about the on-chain form, as onChain does
// for a batch job, once every check above passed.
func (v *validator) serviceOnChain() {
	if len(v.errs) > 0 {
		return
	}
	ls := v.s.ServiceSpec()
	if err := ls.Validate(); err != nil {
		v.errs = append(v.errs, &Error{Msg: "the ledger would refuse this spec: " + err.Error()})
	}
}

// batchHasServiceFields reports the service-only fields a batch spec has.
func (v *validator) batchHasServiceFields() {
	for _, f := range serviceOnly {
		if v.s.given(f) {
			v.errorf(f, "is for services: add kind: service to run a long-running service, or remove %s", f)
		}
	}
}

func portList(ps []Port) string {
	var b []string
	for _, p := range ps {
		b = append(b, fmt.Sprint(p.Port))
	}
	return strings.Join(b, ", ")
}
