package jobspec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
)

// designExample is the job spec of DESIGN.md §7, verbatim.
const designExample = `name: wordcount
executor: wasm              # wasm | oci
module: ./wc.wasm           # wasm: a local file (uploaded) or a blob's sha256:…
# image: 127.0.0.1:5000/tools/wc@sha256:…   # oci: always by digest
args: ["/in/input.txt"]
env: {LANG: C}
inputs:
  - path: /in/input.txt     # where the job sees it
    from: ./input.txt       # a local file or directory, uploaded encrypted
outputs: [/out]             # collected after the job, returned encrypted
resources:
  cpu: 1
  memory: 256MiB
  gpu: {count: 0}           # e.g. {count: 1, models: [RTX_4090, A100_80GB], min_vram: 24GiB}
max_price: 0.5              # SYNC per hour, for the whole job (a ceiling; metered use is charged)
timeout: 10m
verification: spot          # none | spot | full
`

func ptr[T any](v T) *T { return &v }

// designWant is designExample parsed with baseDir dir.
func designWant(dir string) *Spec {
	return &Spec{
		Name:          "wordcount",
		Kind:          KindBatch,
		Executor:      ExecutorWASM,
		Module:        filepath.Join(dir, "wc.wasm"),
		Args:          []string{"/in/input.txt"},
		Env:           map[string]string{"LANG": "C"},
		Inputs:        []Input{{Path: "/in/input.txt", From: filepath.Join(dir, "input.txt")}},
		Outputs:       []string{"/out"},
		Resources:     Resources{CPU: 1, Memory: 256 * MiB, Disk: DefaultDisk},
		MaxPrice:      500_000,
		Timeout:       Duration(10 * time.Minute),
		Verification:  VerifySpot,
		Tier:          TierOnDemand,
		Deterministic: ptr(true),
	}
}

// sameSpec compares specs, ignoring where their fields were written.
func sameSpec(a, b *Spec) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := *a, *b
	x.pos, y.pos = nil, nil
	return reflect.DeepEqual(x, y)
}

func mustYAML(t testing.TB, s *Spec) string {
	t.Helper()
	out, err := yaml.Marshal(s)
	if err != nil {
		t.Fatalf("yaml.Marshal: %v", err)
	}
	return string(out)
}

func TestDesignExample(t *testing.T) {
	got, err := Parse([]byte(designExample), "/jobs")
	if err != nil {
		t.Fatalf("Parse(DESIGN.md example): %v", err)
	}
	if want := designWant("/jobs"); !sameSpec(got, want) {
		t.Errorf("Parse(DESIGN.md example) =\n%s\nwant\n%s", mustYAML(t, got), mustYAML(t, want))
	}
	if !got.IsDeterministic() {
		t.Error("a wasm job is deterministic by default")
	}
	if p, ok := got.LocalModule(); !ok || p != "/jobs/wc.wasm" {
		t.Errorf("LocalModule() = %q, %v; want /jobs/wc.wasm, true", p, ok)
	}
}

// TestDesignExampleIsCurrent keeps designExample in step with DESIGN.md,
// when the design document is checked out beside the repository.
func TestDesignExampleIsCurrent(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "shared", "DESIGN.md"))
	if err != nil {
		t.Skipf("DESIGN.md not found beside the repository: %v", err)
	}
	if !strings.Contains(string(doc), "```yaml\n"+designExample+"```") {
		t.Error("the job spec example in DESIGN.md §7 differs from designExample; update the test and this package")
	}
}

func TestLoadDesignExample(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "wc.wasm", "\x00asm\x01\x00\x00\x00")
	writeFile(t, dir, "input.txt", "the quick brown fox\n")
	spec := writeFile(t, dir, "job.yaml", designExample)
	got, err := Load(spec)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if want := designWant(dir); !sameSpec(got, want) {
		t.Errorf("Load =\n%s\nwant\n%s", mustYAML(t, got), mustYAML(t, want))
	}
	if p, ok := got.Inputs[0].LocalPath(); !ok || p != filepath.Join(dir, "input.txt") {
		t.Errorf("Inputs[0].LocalPath() = %q, %v", p, ok)
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const minimalWASM = `name: hello
executor: wasm
module: sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
outputs: [/out]
max_price: 0.1
timeout: 1m
`

const minimalOCI = `name: hello
executor: oci
image: ghcr.io/acme/hello@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
outputs: [/out]
max_price: 0.1
timeout: 1m
`

func TestDefaults(t *testing.T) {
	for _, tt := range []struct {
		name, src     string
		deterministic bool
	}{
		{"wasm", minimalWASM, true},
		{"oci", minimalOCI, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse([]byte(tt.src), "")
			if err != nil {
				t.Fatal(err)
			}
			if got, want := s.Resources, (Resources{CPU: 1, Memory: 256 * MiB, Disk: 1 * GiB}); !reflect.DeepEqual(got, want) {
				t.Errorf("Resources = %+v, want %+v", got, want)
			}
			if s.Verification != VerifySpot || s.Tier != TierOnDemand {
				t.Errorf("verification, tier = %q, %q; want spot, on-demand", s.Verification, s.Tier)
			}
			if s.Deterministic == nil || *s.Deterministic != tt.deterministic || s.IsDeterministic() != tt.deterministic {
				t.Errorf("Deterministic = %v, IsDeterministic() = %v; want %v", s.Deterministic, s.IsDeterministic(), tt.deterministic)
			}
			if s.Region != "" || s.RegionRequired || s.Checkpoint != nil || s.Resources.GPU.Count != 0 {
				t.Errorf("optional fields set: %+v", s)
			}
		})
	}
}

// TestNullMeansDefault: a field written with no value is as if left out.
func TestNullMeansDefault(t *testing.T) {
	s, err := Parse([]byte(minimalWASM+"resources:\n  memory:\n  cpu: ~\nverification:\ntier: \"\"\nenv: {}\nargs: []\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Resources.Memory != DefaultMemory || s.Resources.CPU != DefaultCPU || s.Verification != VerifySpot || s.Tier != TierOnDemand {
		t.Errorf("null fields did not get defaults: %+v", s)
	}
	if s.Env != nil || s.Args != nil {
		t.Errorf("env {} and args [] = %#v, %#v; want nil", s.Env, s.Args)
	}
}

func TestFullExample(t *testing.T) {
	src := `name: train-resnet.v2
executor: oci
image: 127.0.0.1:5000/ml/train:1.4@sha256:abcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcd
command: [python, /app/train.py]
args: [--epochs, 3, --lr, 0.10]
env:
  PYTHONHASHSEED: 0
  DEBUG: true
  EMPTY:
inputs:
  - path: /data
    from: sha256:1111111111111111111111111111111111111111111111111111111111111111
outputs: [/out/model, /out/metrics.json]
resources:
  cpu: 7.5
  memory: 1.5 GiB
  disk: 20GB
  gpu:
    count: 2
    models: [rtx 4090, a100-80gb, H100_80GB]
    min_vram: 24Gi
    min_compute_cap: 8.6
max_price: 2.5sync/h
timeout: 1d12h
verification: full
deterministic: true
region: eu-west
region_required: true
tier: priority
checkpoint: /out/ckpt
`
	s, err := Parse([]byte(src), "/ignored")
	if err != nil {
		t.Fatal(err)
	}
	want := &Spec{
		Name:     "train-resnet.v2",
		Kind:     KindBatch,
		Executor: ExecutorOCI,
		Image:    "127.0.0.1:5000/ml/train:1.4@sha256:abcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcd",
		Command:  []string{"python", "/app/train.py"},
		Args:     []string{"--epochs", "3", "--lr", "0.10"}, // numbers as written
		Env:      map[string]string{"PYTHONHASHSEED": "0", "DEBUG": "true", "EMPTY": ""},
		Inputs:   []Input{{Path: "/data", From: "sha256:1111111111111111111111111111111111111111111111111111111111111111"}},
		Outputs:  []string{"/out/model", "/out/metrics.json"},
		Resources: Resources{CPU: 7.5, Memory: 1536 * MiB, Disk: 20 * GB, GPU: GPU{
			Count: 2, Models: []string{"RTX_4090", "A100_80GB", "H100_80GB"}, MinVRAM: 24 * GiB, MinComputeCap: "8.6",
		}},
		MaxPrice:       2_500_000,
		Timeout:        Duration(36 * time.Hour),
		Verification:   VerifyFull,
		Deterministic:  ptr(true),
		Region:         "eu-west",
		RegionRequired: true,
		Tier:           TierPriority,
		Checkpoint:     &Checkpoint{Path: "/out/ckpt", Interval: DefaultCheckpointInterval},
	}
	if !sameSpec(s, want) {
		t.Errorf("Parse =\n%s\nwant\n%s", mustYAML(t, s), mustYAML(t, want))
	}
	if _, ok := s.LocalModule(); ok {
		t.Error("LocalModule() ok for an oci job")
	}
	if _, ok := s.Inputs[0].LocalPath(); ok {
		t.Error("LocalPath() ok for a blob input")
	}
	roundTrip(t, s, "/ignored")
}

// roundTrip checks that s marshals to YAML that parses to s again.
func roundTrip(t testing.TB, s *Spec, baseDir string) {
	t.Helper()
	out := mustYAML(t, s)
	again, err := Parse([]byte(out), baseDir)
	if err != nil {
		t.Fatalf("marshalled spec does not parse: %v\n%s", err, out)
	}
	if !sameSpec(s, again) {
		t.Fatalf("round trip changed the spec:\n%s\nbecame\n%s", out, mustYAML(t, again))
	}
}

func TestAnchorsAndMerge(t *testing.T) {
	src := `base: &gpu {count: 1, models: [L4]}
`
	// Unknown top-level keys are errors, so anchors live inside fields.
	_, err := Parse([]byte(src), "")
	if err == nil || !strings.Contains(err.Error(), `unknown field "base"`) {
		t.Fatalf("err = %v", err)
	}
	src = minimalOCI + `args: &a [x, y]
command: *a
resources:
  gpu:
    <<: {count: 1, models: [L4], min_vram: 8GiB}
    min_vram: 16GiB
`
	s, err := Parse([]byte(src), "")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Command, []string{"x", "y"}) {
		t.Errorf("Command = %q, want the aliased args", s.Command)
	}
	if g := s.Resources.GPU; g.Count != 1 || g.MinVRAM != 16*GiB || !reflect.DeepEqual(g.Models, []string{"L4"}) {
		t.Errorf("GPU = %+v; want the merged mapping with min_vram overridden", g)
	}
}

func TestSetDefaultsAndValidateInCode(t *testing.T) {
	s := &Spec{
		Name:     "built",
		Executor: ExecutorOCI,
		Image:    "alpine@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		Outputs:  []string{"/out"},
		MaxPrice: 1,
		Timeout:  Duration(time.Minute),
	}
	err := s.Validate()
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("Validate before SetDefaults = %v, want Errors", err)
	}
	for _, e := range es {
		if e.Line != 0 {
			t.Errorf("error with a position for a spec built in code: %v", e)
		}
	}
	s.SetDefaults()
	if err := s.Validate(); err != nil {
		t.Fatalf("Validate after SetDefaults: %v", err)
	}
	if s.IsDeterministic() || s.Resources.Memory != DefaultMemory {
		t.Errorf("SetDefaults gave %+v", s)
	}
}

func TestLoadFileErrors(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "wc.wasm", "\x00asm\x01\x00\x00\x00")
	writeFile(t, dir, "text.wat", "(module)")
	writeFile(t, dir, "data.txt", "x")
	if err := os.Mkdir(filepath.Join(dir, "datadir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := func(module string, froms ...string) string {
		var b strings.Builder
		b.WriteString("name: x\nexecutor: wasm\nmodule: " + module + "\noutputs: [/out]\nmax_price: 1\ntimeout: 1m\ninputs:\n")
		for i, f := range froms {
			b.WriteString("  - path: /in/" + string(rune('a'+i)) + "\n    from: " + f + "\n")
		}
		return b.String()
	}
	for _, tt := range []struct {
		name   string
		src    string
		field  string
		line   int
		substr string
	}{
		{"module missing", spec("./nope.wasm", "data.txt"), "module", 3, "nope.wasm does not exist"},
		{"module is a directory", spec("datadir", "data.txt"), "module", 3, "is a directory"},
		{"module is not wasm", spec("text.wat", "data.txt"), "module", 3, "not a WebAssembly binary"},
		{"input missing", spec("wc.wasm", "data.txt", "./missing/file"), "inputs[1].from", 11, "missing/file does not exist"},
		{"input is a fifo", spec("wc.wasm", "fifo"), "inputs[0].from", 9, "is a named pipe; want a regular file or a directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, dir, "job.yaml", tt.src)
			_, err := Load(path)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Load = %v, want an *Error", err)
			}
			if e.Field != tt.field || e.Line != tt.line || e.File != path || !strings.Contains(e.Msg, tt.substr) {
				t.Errorf("Load error = %#v\nwant field %q, line %d, file %q and a message containing %q", e, tt.field, tt.line, path, tt.substr)
			}
			if !strings.HasPrefix(err.Error(), path+":") {
				t.Errorf("error %q does not start with the file name", err)
			}
		})
	}
	t.Run("directory input is fine", func(t *testing.T) {
		if _, err := Load(writeFile(t, dir, "job.yaml", spec("wc.wasm", "datadir", "./data.txt"))); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("no spec file", func(t *testing.T) {
		_, err := Load(filepath.Join(dir, "absent.yaml"))
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Load(absent) = %v, want fs.ErrNotExist", err)
		}
	})
	t.Run("parse errors name the file", func(t *testing.T) {
		path := writeFile(t, dir, "bad.yaml", "name: x\ntimout: 1m\n")
		_, err := Load(path)
		var es Errors
		if !errors.As(err, &es) {
			t.Fatalf("Load = %v, want Errors", err)
		}
		for _, e := range es {
			if e.File != path {
				t.Errorf("error %v has File %q, want %q", e, e.File, path)
			}
		}
	})
}

func TestErrorsFormat(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{&Error{Field: "timeout", Line: 3, Column: 10, Msg: "bad"}, "line 3, column 10: timeout: bad"},
		{&Error{File: "job.yaml", Field: "timeout", Line: 3, Column: 10, Msg: "bad"}, "job.yaml:3:10: timeout: bad"},
		{&Error{File: "job.yaml", Field: "outputs", Msg: "missing"}, "job.yaml: outputs: missing"},
		{&Error{Msg: "empty"}, "empty"},
		{Errors{{Field: "a", Msg: "x"}, {Field: "b", Line: 1, Column: 1, Msg: "y"}}, "2 problems in the job spec:\n  a: x\n  line 1, column 1: b: y"},
	} {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

// TestAllProblemsAtOnce: errors come back together, in order of position,
// and the unwritten required fields last.
func TestAllProblemsAtOnce(t *testing.T) {
	src := "executor: wasm\nmodule: ./m.wasm\nresources:\n  cpu: -1\n  memory: 0\noutputs: [out]\n"
	_, err := Parse([]byte(src), "")
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("Parse = %v, want Errors", err)
	}
	var fields []string
	for _, e := range es {
		fields = append(fields, e.Field)
	}
	want := []string{"resources.cpu", "resources.memory", "outputs[0]", "name", "max_price", "timeout"}
	if !reflect.DeepEqual(fields, want) {
		t.Errorf("fields = %q, want %q\n%v", fields, want, err)
	}
}

func TestSuggest(t *testing.T) {
	fields := specFields
	for _, tt := range []struct{ in, want string }{
		{"timout", "timeout"},
		{"Timeout", "timeout"},
		{"max-price", "max_price"},
		{"maxprice", "max_price"},
		{"verfication", "verification"},
		{"exector", "executor"},
		{"ouptuts", "outputs"},
		{"zzz", ""},
		{"n", ""},
	} {
		if got := suggest(tt.in, fields); got != tt.want {
			t.Errorf("suggest(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestMarshalAwkwardStrings: strings that plain YAML would misread survive
// a round trip through MarshalYAML.
func TestMarshalAwkwardStrings(t *testing.T) {
	awkward := []string{"", " ", "\t", "\x01", "\x7f", "a\nb", "a\r\nb", "trail\n", "~", "null", "Null", "true", "yes", "no",
		"0x10", "1e3", "0o17", "1_000", ".inf", ".nan", "2024-01-01", "- x", "-", "?", "? x", ":", "a: b", "a #b", "#c",
		"<<", "*a", "&a", "!t", "%x", "@x", "`x", "'q", "\"", "\\", "[x", "{x", "x]", " lead", "trail ", "é", "\u2028",
		"\ufeff", "日本語", "a,b", "--epochs=3", "/in/input.txt"}
	s, err := Parse([]byte(minimalOCI), "")
	if err != nil {
		t.Fatal(err)
	}
	s.Args = awkward
	s.Env = map[string]string{}
	for i, a := range awkward {
		s.Env[fmt.Sprintf("V%d", i)] = a
	}
	s.Region = "eu"
	roundTrip(t, s, "")
}

// TestErrorsAreCapped: a spec wrong everywhere gets the first 50 problems
// and a count of the rest.
func TestErrorsAreCapped(t *testing.T) {
	_, err := Parse([]byte(set(minimalWASM, "outputs", "["+strings.Repeat("x, ", 59)+"x]")), "")
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("Parse = %v, want Errors", err)
	}
	if len(es) != maxErrors+1 || es[maxErrors].Msg != "and 10 more problems" {
		t.Errorf("got %d errors, the last %v; want %d and a count of 10 more", len(es), es[len(es)-1], maxErrors+1)
	}
}

// TestTrustTEE: trust: tee and tee_measurements reach the ledger's spec;
// a wrong trust, measurements without trust: tee and measurements that
// are not lower-case hex are refused naming the field.
func TestTrustTEE(t *testing.T) {
	base := "name: t\nexecutor: wasm\nmodule: ./m.wasm\noutputs: [/out]\ntimeout: 1m\nmax_price: 1sync\n"
	m := strings.Repeat("ab", 48)
	s, err := Parse([]byte(base+"trust: tee\ntee_measurements: ["+m+"]\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if ls := s.LedgerSpec(PlaceholderModule); ls.Trust != "tee" || len(ls.TEEMeasurements) != 1 || ls.TEEMeasurements[0] != m {
		t.Fatalf("ledger spec trust %q measurements %q", ls.Trust, ls.TEEMeasurements)
	}
	for _, c := range []struct{ yaml, want string }{
		{"trust: sgx\n", "trust"},
		{"tee_measurements: [" + m + "]\n", "needs trust: tee"},
		{"trust: tee\ntee_measurements: [XYZ]\n", "lower-case hex"},
	} {
		if _, err := Parse([]byte(base+c.yaml), t.TempDir()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error saying %q", c.yaml, err, c.want)
		}
	}
}
