package jobspec

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
)

// minimalService is the least a service spec says; an appended field is
// on line 7.
const minimalService = `name: web
kind: service
image: ghcr.io/acme/web@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
ports: [8000]
max_price: 1 SYNC/h
budget: 5 SYNC
`

// designService is the service spec of the design, with a real
// digest.
const designService = `kind: service
name: tinylm
image: 127.0.0.1:5000/gpunet/tinylm@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
args: ["-addr", ":8000"]
ports:
  - {port: 8000, name: api}        # protocol: http (default) or tcp
readiness: {path: /health, port: 8000, interval: 2s, timeout: 1s, failure_threshold: 3, start: 2m}
replicas: 1
budget: 5 SYNC                     # escrowed in all; top up with gpunet service topup
max_price: 1 SYNC/h                # per replica
resources: {cpu: 0.5, memory: 128MiB, disk: 256MiB}
openai: {port: 8000, models: [tinylm], exact: true}   # integer code: bit-exact answers on any hardware
public: false
`

func TestServiceDefaults(t *testing.T) {
	s, err := Parse([]byte(minimalService), "/base")
	if err != nil {
		t.Fatal(err)
	}
	want := &Spec{
		Name: "web", Kind: KindService, Executor: ExecutorOCI,
		Image:     "ghcr.io/acme/web@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		Ports:     []Port{{Port: 8000, Protocol: PortHTTP}},
		Readiness: &Readiness{Port: 8000, Interval: Duration(5 * time.Second), Timeout: Duration(2 * time.Second), FailureThreshold: 3, Start: Duration(5 * time.Minute)},
		Replicas:  1,
		Resources: Resources{CPU: DefaultCPU, Memory: DefaultMemory, Disk: DefaultDisk},
		MaxPrice:  1_000_000,
		Budget:    5_000_000,
	}
	if !sameSpec(s, want) {
		t.Errorf("Parse =\n%s\nwant\n%s", mustYAML(t, s), mustYAML(t, want))
	}
	// No batch defaults: a service has no verification, tier or
	// deterministic.
	if s.Verification != "" || s.Tier != "" || s.Deterministic != nil || s.Outputs != nil {
		t.Errorf("batch fields set on a service: %+v", s)
	}
	if !s.IsService() {
		t.Error("IsService() = false")
	}
	roundTrip(t, s, "/base")

	// A batch spec is kind batch, and not a service.
	b, err := Parse([]byte(minimalOCI), "")
	if err != nil {
		t.Fatal(err)
	}
	if b.Kind != KindBatch || b.IsService() || b.Readiness != nil || b.Replicas != 0 {
		t.Errorf("batch spec: kind %q, IsService %v, readiness %v, replicas %d", b.Kind, b.IsService(), b.Readiness, b.Replicas)
	}
	if b, err = Parse([]byte(minimalOCI+"kind: batch\n"), ""); err != nil || b.Kind != KindBatch {
		t.Errorf("kind: batch: %v, %+v", err, b)
	}
}

// TestServiceDefaultsFollowFirstPort: readiness.port and openai.port
// default to the first port; protocol to http for each.
func TestServiceDefaultsFollowFirstPort(t *testing.T) {
	s, err := Parse([]byte(set(minimalService, "ports", "[{port: 9000, name: web}, {port: 22, protocol: tcp}]")+"openai: {models: [m]}\nreadiness: {path: /ok}\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Readiness.Port != 9000 || s.OpenAI.Port != 9000 || s.Readiness.Path != "/ok" {
		t.Errorf("readiness %+v, openai %+v; want port 9000", s.Readiness, s.OpenAI)
	}
	if s.Ports[0].Protocol != PortHTTP || s.Ports[1].Protocol != PortTCP {
		t.Errorf("ports %+v", s.Ports)
	}
}

func TestServiceDesignExample(t *testing.T) {
	s, err := Parse([]byte(designService), "")
	if err != nil {
		t.Fatal(err)
	}
	got := s.ServiceSpec()
	want := ledger.ServiceSpec{
		Name: "tinylm", Image: s.Image, Args: []string{"-addr", ":8000"},
		CPUMilli: 500, Memory: 128 << 20, Disk: 256 << 20,
		MaxPricePerHour: 1_000_000,
		Ports:           []ledger.ServicePort{{Port: 8000, Name: "api", Protocol: ledger.PortHTTP}},
		Readiness:       ledger.ServiceReadiness{Port: 8000, Path: "/health", IntervalSeconds: 2, TimeoutSeconds: 1, FailureThreshold: 3, StartSeconds: 120},
		Replicas:        1,
		OpenAI:          &ledger.ServiceOpenAI{Port: 8000, Models: []string{"tinylm"}, Exact: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ServiceSpec:\n got %+v\nwant %+v", got, want)
	}
	if s.Budget != 5_000_000 || s.Public {
		t.Errorf("budget %d public %v", s.Budget, s.Public)
	}
	roundTrip(t, s, "")
}

func TestServiceFullExample(t *testing.T) {
	src := `name: llm.v2
kind: service
executor: oci
image: ghcr.io/acme/llm@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
command: [/bin/serve]
args: [--port, 8000, --debug]
env: {MODEL: "llama", THREADS: 4}
ports:
  - port: 8000
    name: api
    protocol: http
  - {port: 9443, name: tls, protocol: tcp}
readiness:
  port: 8000
  path: /v1/models
  interval: 10s
  timeout: 10s
  failure_threshold: 5
  start: 1h
replicas: 3
resources: {cpu: 4, memory: 16GiB, disk: 40GiB, gpu: {count: 1, models: [L4], min_vram: 20GiB}}
max_price: 0.75
budget: 1234567usync
region: eu
region_required: true
network: true
openai: {port: 8000, models: [llama-3-8b, "meta/llama"]}
public: true
`
	s, err := Parse([]byte(src), "")
	if err != nil {
		t.Fatal(err)
	}
	ls := s.ServiceSpec()
	if ls.Replicas != 3 || len(ls.Ports) != 2 || ls.Ports[1].Protocol != ledger.PortTCP || ls.Readiness.StartSeconds != 3600 ||
		ls.GPUCount != 1 || ls.MinVRAM != 20<<30 || ls.MaxPricePerHour != 750_000 || !ls.Network || ls.Region != "eu" ||
		!reflect.DeepEqual(ls.OpenAI.Models, []string{"llama-3-8b", "meta/llama"}) || ls.OpenAI.Exact || ls.Env["THREADS"] != "4" {
		t.Errorf("ServiceSpec = %+v", ls)
	}
	if s.Budget != 1_234_567 || !s.Public {
		t.Errorf("budget %d public %v", s.Budget, s.Public)
	}
	roundTrip(t, s, "")
	out := mustYAML(t, s)
	for _, absent := range []string{"outputs", "timeout", "verification", "tier", "deterministic"} {
		if strings.HasPrefix(out, absent+":") || strings.Contains(out, "\n"+absent+":") {
			t.Errorf("a service's YAML has %s:\n%s", absent, out)
		}
	}
}

func TestParseAmount(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Amount
		err  string
	}{
		{"5 SYNC", 5_000_000, ""},
		{"5sync", 5_000_000, ""},
		{"0.000001 sync", 1, ""},
		{"5000000usync", 5_000_000, ""},
		{"5000000 USYNC", 5_000_000, ""},
		{"1e3 sync", 1_000_000_000, ""},
		{"5", 0, "has no unit"},
		{"1 SYNC/h", 0, "price per hour"},
		{"-1 sync", 0, "negative"},
		{"0.5usync", 0, "finer than 1 usync"},
		{"lots", 0, "not an amount"},
		{"99999999999999999999 sync", 0, "too large"},
	} {
		got, err := ParseAmount(tt.in)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("ParseAmount(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("ParseAmount(%q) = %d, %v; want an error saying %q", tt.in, got, err, tt.err)
		}
	}
	for _, a := range []Amount{1, 5_000_000, 1_234_567, MaxBudget} {
		if got, err := ParseAmount(a.String()); err != nil || got != a {
			t.Errorf("ParseAmount(%q) = %d, %v; want %d", a.String(), got, err, a)
		}
	}
}

// serviceErrorTests are service specs with one problem each, as
// errorTests.
var serviceErrorTests = []struct {
	name  string
	src   string
	field string
	line  int
	want  []string
}{
	// Kind.
	{"kind unknown", set(minimalService, "kind", "daemon"), "kind", 2, []string{`"daemon" is not a kind`, `"batch" or "service"`}},
	{"kind case", set(minimalService, "kind", "Service"), "kind", 2, []string{`did you mean "service"?`}},
	{"kind list", set(minimalService, "kind", "[service]"), "kind", 2, []string{"must be a string"}},

	// Fields a service does not have.
	{"module", minimalService + "module: ./x.wasm\n", "module", 7, []string{"is not for a service", "oci image"}},
	{"inputs", minimalService + "inputs: [{path: /in, from: ./x}]\n", "inputs", 7, []string{"is not for a service", "no inputs"}},
	{"outputs", minimalService + "outputs: [/out]\n", "outputs", 7, []string{"is not for a service", "no outputs"}},
	{"timeout", minimalService + "timeout: 1h\n", "timeout", 7, []string{"is not for a service", "budget"}},
	{"verification", minimalService + "verification: spot\n", "verification", 7, []string{"is not for a service", "no result to verify", "evict"}},
	{"checkpoint", minimalService + "checkpoint: /ckpt\n", "checkpoint", 7, []string{"is not for a service", "not checkpointed"}},
	{"tier", minimalService + "tier: spot\n", "tier", 7, []string{"is not for a service", "no tier"}},
	{"deterministic", minimalService + "deterministic: true\n", "deterministic", 7, []string{"is not for a service", "batch job's outputs"}},
	{"wasm", minimalService + "executor: wasm\n", "executor", 7, []string{"oci container", "wasm is for batch jobs"}},
	{"executor unknown", minimalService + "executor: docker\n", "executor", 7, []string{`"docker" is not an executor for a service`, "oci"}},
	{"unknown field", minimalService + "colour: blue\n", "colour", 7, []string{`unknown field "colour"`, "the fields are name, kind, executor, image"}},
	{"port alias", set(minimalService, "ports", "") + "port: 8000\n", "port", 6, []string{`did you mean "ports"?`}},

	// Service fields in a batch spec.
	{"batch ports", minimalOCI + "ports: [80]\n", "ports", 7, []string{"is for services", "kind: service"}},
	{"batch budget", minimalOCI + "budget: 5 SYNC\n", "budget", 7, []string{"is for services", "kind: service"}},
	{"batch replicas", minimalOCI + "replicas: 2\n", "replicas", 7, []string{"is for services"}},
	{"batch readiness", minimalOCI + "readiness: {path: /}\n", "readiness", 7, []string{"is for services"}},
	{"batch openai", minimalOCI + "openai: {models: [m]}\n", "openai", 7, []string{"is for services"}},
	{"batch public", minimalOCI + "public: true\n", "public", 7, []string{"is for services"}},

	// Required.
	{"no image", set(minimalService, "image", ""), "image", 0, []string{"is required for a service", "@sha256:"}},
	{"no ports", set(minimalService, "ports", ""), "ports", 0, []string{"at least one is required"}},
	{"empty ports", set(minimalService, "ports", "[]"), "ports", 4, []string{"at least one is required"}},
	{"no max_price", set(minimalService, "max_price", ""), "max_price", 0, []string{"is required", "one replica", "per hour"}},
	{"no budget", set(minimalService, "budget", ""), "budget", 0, []string{"is required", "5 SYNC", "topup"}},
	{"no name", set(minimalService, "name", ""), "name", 0, []string{"is required"}},
	{"image without digest", set(minimalService, "image", "nginx:1.27"), "image", 3, []string{"not pinned by digest"}},

	// Ports.
	{"port zero", set(minimalService, "ports", "[0]"), "ports[0].port", 4, []string{"0 is not a port", "1 to 65535"}},
	{"port high", set(minimalService, "ports", "[{port: 70000}]"), "ports[0].port", 4, []string{"70000 is not a port"}},
	{"port twice", set(minimalService, "ports", "[80, {port: 80, name: b}]"), "ports[1].port", 4, []string{"80 is listed twice"}},
	{"port string", set(minimalService, "ports", "[http]"), "ports[0]", 4, []string{"must be a mapping", "port: 8000"}},
	{"port null", set(minimalService, "ports", "[~]"), "ports[0]", 4, []string{"is empty"}},
	{"port name", set(minimalService, "ports", "[{port: 80, name: My_API}]"), "ports[0].name", 4, []string{"not a port name", "lower-case"}},
	{"port name twice", set(minimalService, "ports", "[{port: 80, name: a}, {port: 81, name: a}]"), "ports[1].name", 4, []string{"another port"}},
	{"port protocol", set(minimalService, "ports", "[{port: 80, protocol: udp}]"), "ports[0].protocol", 4, []string{`"udp" is not one of "http" or "tcp"`}},
	{"port unknown key", set(minimalService, "ports", "[{port: 80, proto: tcp}]"), "ports[0].proto", 4, []string{`did you mean "protocol"?`}},
	{"too many ports", set(minimalService, "ports", "[1, 2, 3, 4, 5, 6, 7, 8, 9]"), "ports", 4, []string{"9 entries; at most 8"}},

	// Readiness.
	{"readiness port", minimalService + "readiness: {port: 9000}\n", "readiness.port", 7, []string{"9000 is not one of the ports", "8000"}},
	{"readiness path", minimalService + "readiness: {path: health}\n", "readiness.path", 7, []string{"start it with /"}},
	{"readiness path space", minimalService + "readiness: {path: \"/a b\"}\n", "readiness.path", 7, []string{"space or control"}},
	{"readiness path on tcp", set(minimalService, "ports", "[{port: 22, protocol: tcp}]") + "readiness: {path: /h}\n", "readiness.path", 7, []string{"port 22 is tcp", "TCP connect"}},
	{"readiness interval", minimalService + "readiness: {interval: 500ms}\n", "readiness.interval", 7, []string{"out of range [1s, 1h]"}},
	{"readiness interval fraction", minimalService + "readiness: {interval: 1.5s}\n", "readiness.interval", 7, []string{"whole seconds"}},
	{"readiness interval unit", minimalService + "readiness: {interval: 5}\n", "readiness.interval", 7, []string{"has no unit"}},
	{"readiness timeout", minimalService + "readiness: {timeout: 0s}\n", "readiness.timeout", 7, []string{"out of range"}},
	{"readiness timeout long", minimalService + "readiness: {interval: 2s, timeout: 3s}\n", "readiness.timeout", 7, []string{"longer than the interval 2s"}},
	{"readiness threshold", minimalService + "readiness: {failure_threshold: 0}\n", "readiness.failure_threshold", 7, []string{"out of range [1, 100]"}},
	{"readiness start", minimalService + "readiness: {start: 2d}\n", "readiness.start", 7, []string{"out of range", "1d"}},
	{"readiness unknown key", minimalService + "readiness: {period: 5s}\n", "readiness.period", 7, []string{`did you mean "interval"?`}},
	{"readiness scalar", minimalService + "readiness: /health\n", "readiness", 7, []string{"must be a mapping", "path: /health"}},

	// Replicas, budget, price.
	{"replicas zero", minimalService + "replicas: 0\n", "replicas", 7, []string{"0 out of range [1, 16]"}},
	{"replicas many", minimalService + "replicas: 17\n", "replicas", 7, []string{"17 out of range [1, 16]"}},
	{"replicas fraction", minimalService + "replicas: 1.5\n", "replicas", 7, []string{"whole number"}},
	{"budget bare", set(minimalService, "budget", "5"), "budget", 6, []string{"has no unit", "5 SYNC", "5usync"}},
	{"budget per hour", set(minimalService, "budget", "5 SYNC/h"), "budget", 6, []string{"price per hour"}},
	{"budget zero", set(minimalService, "budget", "0 SYNC"), "budget", 6, []string{"must be more than 0"}},
	{"budget absurd", set(minimalService, "budget", "2e12 SYNC"), "budget", 6, []string{"more than the maximum"}},
	{"budget fine", set(minimalService, "budget", "0.5usync"), "budget", 6, []string{"finer than 1 usync"}},
	{"budget list", set(minimalService, "budget", "[5]"), "budget", 6, []string{"must be an amount"}},
	{"price zero", set(minimalService, "max_price", "0"), "max_price", 5, []string{"must be more than 0"}},
	{"region", minimalService + "region: EU\n", "region", 7, []string{"not a region"}},
	{"public yes", minimalService + "public: yes\n", "public", 7, []string{"true or false"}},
	{"cpu zero", minimalService + "resources: {cpu: 0}\n", "resources.cpu", 7, []string{"must be more than 0"}},

	// OpenAI.
	{"openai port", minimalService + "openai: {port: 9000, models: [m]}\n", "openai.port", 7, []string{"9000 is not one of the ports"}},
	{"openai tcp port", set(minimalService, "ports", "[{port: 22, protocol: tcp}]") + "openai: {models: [m]}\n", "openai.port", 7, []string{"port 22 is tcp", "http port"}},
	{"openai no models", minimalService + "openai: {port: 8000}\n", "openai.models", 7, []string{"at least one is required"}},
	{"openai model empty", minimalService + "openai: {models: [\"\"]}\n", "openai.models[0]", 7, []string{"is empty"}},
	{"openai model space", minimalService + "openai: {models: [\"a b\"]}\n", "openai.models[0]", 7, []string{"not a model name", ". _ : / -"}},
	{"readiness path query", minimalService + "readiness: {path: \"/h?x=1\"}\n", "readiness.path", 7, []string{"query or fragment"}},
	{"readiness path long", minimalService + "readiness: {path: /" + strings.Repeat("p", 256) + "}\n", "readiness.path", 7, []string{"at most 256"}},
	{"openai model twice", minimalService + "openai: {models: [a, a]}\n", "openai.models[1]", 7, []string{"a is listed twice"}},
	{"openai model long", minimalService + "openai: {models: [" + strings.Repeat("m", 129) + "]}\n", "openai.models[0]", 7, []string{"at most 128"}},
	{"openai too many", minimalService + "openai: {models: [a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q]}\n", "openai.models", 7, []string{"17 entries; at most 16"}},
	{"openai unknown key", minimalService + "openai: {model: [m]}\n", "openai.model", 7, []string{`did you mean "models"?`}},
	{"openai exact yes", minimalService + "openai: {models: [m], exact: yes}\n", "openai.exact", 7, []string{"true or false"}},
	{"openai exact quoted", minimalService + "openai: {models: [m], exact: \"true\"}\n", "openai.exact", 7, []string{"true or false"}},
	{"openai exact number", minimalService + "openai: {models: [m], exact: 1}\n", "openai.exact", 7, []string{"true or false"}},
	{"openai exact misspelt", minimalService + "openai: {models: [m], exakt: true}\n", "openai.exakt", 7, []string{`did you mean "exact"?`}},
	{"openai tolerance zero", minimalService + "openai: {models: [m], tolerance: {logprob: 0}}\n", "openai.tolerance.logprob", 7, []string{"leave openai.tolerance out"}},
	{"openai tolerance too fine", minimalService + "openai: {models: [m], tolerance: {logprob: 1e-10}}\n", "openai.tolerance.logprob", 7, []string{"finer than 1e-9"}},
	{"openai tolerance over 1", minimalService + "openai: {models: [m], tolerance: {logprob: 1.5}}\n", "openai.tolerance.logprob", 7, []string{"more than 1"}},
	{"openai tolerance negative", minimalService + "openai: {models: [m], tolerance: {logprob: -0.1}}\n", "openai.tolerance.logprob", 7, []string{"negative"}},
	{"openai tolerance and exact", minimalService + "openai: {models: [m], exact: true, tolerance: {logprob: 0.05}}\n", "openai.tolerance", 7, []string{"exclude each other"}},
	{"openai tolerance unknown key", minimalService + "openai: {models: [m], tolerance: {logprobs: 0.1}}\n", "openai.tolerance.logprobs", 7, []string{`did you mean "logprob"?`}},
}

// TestServiceTolerance: openai.tolerance.logprob is read exactly into the
// ledger's parts per 10^9 of a nat.
func TestServiceTolerance(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want uint64
	}{
		{"0.05", 50_000_000}, {"1e-9", 1}, {"0.000000003", 3}, {"1", ledger.MaxLogprobTolE9}, {"\"0.01\"", 10_000_000},
	} {
		s, err := Parse([]byte(minimalService+"openai: {models: [m], tolerance: {logprob: "+tc.yaml+"}}\n"), "")
		if err != nil {
			t.Fatalf("%s: %v", tc.yaml, err)
		}
		if got := s.ServiceSpec().OpenAI.LogprobTolE9; got != tc.want {
			t.Errorf("logprob: %s gives logprob_tol_e9 %d, want %d", tc.yaml, got, tc.want)
		}
		roundTrip(t, s, "")
	}
	s, err := Parse([]byte(minimalService+"openai: {models: [m]}\n"), "")
	if err != nil || s.ServiceSpec().OpenAI.LogprobTolE9 != 0 {
		t.Errorf("no tolerance: %v, %+v", err, s)
	}
}

func TestServiceErrors(t *testing.T) {
	for _, tt := range serviceErrorTests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse([]byte(tt.src), "/base")
			if err == nil {
				t.Fatalf("Parse succeeded:\n%s", mustYAML(t, s))
			}
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("Parse error %T %v, want a non-empty Errors", err, err)
			}
			if len(es) != 1 {
				t.Errorf("got %d errors, want 1:\n%v", len(es), err)
			}
			e := es[0]
			if e.Field != tt.field || e.Line != tt.line {
				t.Errorf("error at field %q line %d, want field %q line %d:\n%v", e.Field, e.Line, tt.field, tt.line, e)
			}
			if e.Line > 0 && e.Column < 1 {
				t.Errorf("error has line %d but column %d", e.Line, e.Column)
			}
			for _, w := range tt.want {
				if !strings.Contains(e.Msg, w) {
					t.Errorf("message %q does not say %q", e.Msg, w)
				}
			}
		})
	}
}

// TestServiceSetDefaultsInCode: a service built in code gets the same
// defaults as a parsed one, and validates.
func TestServiceSetDefaultsInCode(t *testing.T) {
	s := &Spec{
		Name: "svc", Kind: KindService,
		Image:    "alpine@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		Ports:    []Port{{Port: 80}},
		MaxPrice: 1, Budget: 1,
	}
	s.SetDefaults()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	p, err := Parse([]byte("name: svc\nkind: service\nimage: "+s.Image+"\nports: [80]\nmax_price: 1usync\nbudget: 1usync\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if !sameSpec(s, p) {
		t.Errorf("SetDefaults =\n%s\nParse =\n%s", mustYAML(t, s), mustYAML(t, p))
	}
}

// TestServiceFieldsDocumented: docs/jobspec.md's Services section has a
// row for every field a service spec reads, and names every batch-only
// field it refuses.
func TestServiceFieldsDocumented(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "jobspec.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	start := strings.Index(doc, "## Services (`kind: service`)")
	if start < 0 {
		t.Fatal("docs/jobspec.md has no Services (`kind: service`) section")
	}
	sec := doc[start:]
	if end := strings.Index(sec[3:], "\n## "); end >= 0 {
		sec = sec[:end+3]
	}
	var want []string
	shared := map[string]bool{"name": true, "image": true, "command": true, "args": true, "env": true, "resources": true, "region": true, "region_required": true, "network": true}
	for _, f := range serviceFields {
		switch f {
		case "ports", "readiness", "openai":
		default:
			if !shared[f] {
				want = append(want, "| `"+f+"` |")
			}
		}
	}
	for _, f := range portFields {
		want = append(want, "| `ports[]."+f+"` |")
	}
	for _, f := range readinessFields {
		want = append(want, "| `readiness."+f+"` |")
	}
	for _, f := range openaiFields {
		want = append(want, "| `openai."+f+"` |")
	}
	for _, b := range batchOnly {
		want = append(want, "`"+b.field+"`")
	}
	for _, w := range want {
		if !strings.Contains(sec, w) {
			t.Errorf("the Services section of docs/jobspec.md does not have %s", w)
		}
	}
	for f := range shared {
		if !strings.Contains(sec, "`"+f+"`") {
			t.Errorf("the Services section does not name the shared field `%s`", f)
		}
	}
}

// TestServiceOnChainAsksTheLedger: a service spec jobspec accepts is one
// the ledger accepts; a rule jobspec does not check still refuses it.
func TestServiceOnChainAsksTheLedger(t *testing.T) {
	for _, src := range []string{minimalService, designService} {
		s, err := Parse([]byte(src), "")
		if err != nil {
			t.Fatal(err)
		}
		ls := s.ServiceSpec()
		if err := ls.Validate(); err != nil {
			t.Errorf("the ledger refuses %q: %v", s.Name, err)
		}
		// A rule jobspec does not check (a spec that skipped its checks).
		s.Resources.CPU = 2 * MaxCPU
		v := &validator{s: s}
		v.serviceOnChain()
		if len(v.errs) != 1 || !strings.Contains(v.errs[0].Msg, "the ledger would refuse this spec") {
			t.Errorf("errors %v, want the ledger's refusal", v.errs)
		}
	}
	for name, want := range map[string]uint64{
		"MaxReplicas": ledger.MaxServiceReplicas, "MaxPorts": ledger.MaxServicePorts, "MaxModels": ledger.MaxServiceModels,
		"MaxReadyInterval": ledger.MaxReadinessInterval, "MaxReadyStart": ledger.MaxServiceStartSeconds,
	} {
		got := map[string]uint64{"MaxReplicas": MaxReplicas, "MaxPorts": MaxPorts, "MaxModels": MaxModels,
			"MaxReadyInterval": seconds(MaxReadyInterval), "MaxReadyStart": seconds(MaxReadyStart)}[name]
		if got != want {
			t.Errorf("%s = %d, the ledger's is %d", name, got, want)
		}
	}
}

// TestServiceTrustTEE: a service spec's trust: tee and tee_measurements
// reach the ledger's service spec, and are checked as a job's are.
func TestServiceTrustTEE(t *testing.T) {
	m := strings.Repeat("ab", 48)
	s, err := Parse([]byte(minimalService+"trust: tee\ntee_measurements: ["+m+"]\n"), "/base")
	if err != nil {
		t.Fatal(err)
	}
	if ls := s.ServiceSpec(); ls.Trust != ledger.TrustTEE || len(ls.TEEMeasurements) != 1 || ls.TEEMeasurements[0] != m {
		t.Fatalf("ledger service spec trust %q measurements %q", ls.Trust, ls.TEEMeasurements)
	}
	for _, c := range []struct{ yaml, field, want string }{
		{"trust: sgx\n", "trust", "want tee"},
		{"tee_measurements: [" + m + "]\n", "tee_measurements", "needs trust: tee"},
		{"trust: tee\ntee_measurements: [XYZ]\n", "tee_measurements", "lower-case hex"},
	} {
		_, err := Parse([]byte(minimalService+c.yaml), "/base")
		var es Errors
		if !errors.As(err, &es) || len(es) != 1 || es[0].Field != c.field || !strings.Contains(es[0].Msg, c.want) {
			t.Errorf("%q: %v, want one error at %s saying %q", c.yaml, err, c.field, c.want)
		}
	}
}
