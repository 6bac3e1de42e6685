package jobspec

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gpunet/gpunet/internal/ledger"
)

// FuzzParse checks that Parse never panics; that its errors are Errors with
// positions inside the input; and that a spec it accepts is valid and
// marshals to YAML that parses to the same spec.
func FuzzParse(f *testing.F) {
	f.Add(designExample)
	f.Add(minimalWASM)
	f.Add(minimalOCI)
	f.Add(gangOCI)
	for _, tt := range errorTests {
		if len(tt.src) < 4096 {
			f.Add(tt.src)
		}
	}
	f.Add(minimalOCI + "args: [\"\\x01\", \"a\\nb\", \"~\", \"null\", \"0x10\", \"1e3\", \".inf\", \"- x\", \"#c\", \"é\", \" lead\", \"\\t\"]\n")
	f.Add(minimalOCI + "env: {A: \"\\r\\n\", B: |\n    literal\n    text\n, C: >\n  folded\n}\n")
	f.Add(minimalOCI + "resources: {cpu: 0.001, memory: 1.5GiB, gpu: {count: 2, models: [rtx 4090], min_vram: 24Gi, min_compute_cap: 9}}\n")
	f.Add(minimalOCI + "command: &c [a]\nargs: *c\nresources:\n  gpu:\n    <<: [{count: 1}, {min_vram: 1GiB}]\n")
	f.Add(minimalOCI + "region: eu\nregion_required: true\ntier: spot\ncheckpoint: /ck\ntimeout: 1d0h1m1.5s\nmax_price: 1e-6\n")
	f.Add(minimalWASM + "verification: full\ncompare: {numeric: {rtol: 1e-5, atol: \"0.00000001\"}}\n")
	f.Add(minimalWASM + "compare: {numeric: {rtol: -.inf, atol: 1e-999, x: 1}, y: 2}\n")
	f.Add(minimalWASM + "verification: full\ncompare: {program: ./same.wasm}\n")
	f.Add(minimalWASM + "compare: {program: \"sha256:00\", numeric: {}}\n")
	f.Add(minimalWASM + "verification: full\ncompare: {program: ./same.wasm, fuel: 5e9}\n")
	f.Add(minimalWASM + "compare: {program: ./same.wasm, fuel: [1e99, -0, 1.5e-3]}\n")
	f.Add(minimalService)
	f.Add(designService)
	for _, tt := range serviceErrorTests {
		if len(tt.src) < 4096 {
			f.Add(tt.src)
		}
	}
	f.Add(minimalService + "ports: [{port: 80, name: web}, {port: 22, protocol: tcp}]\nreadiness: {port: 80, path: /h, interval: 1m, timeout: 59s, start: 1d}\nopenai: {models: [a/b:c]}\npublic: true\nreplicas: 16\n")
	f.Add(minimalService + "openai: {port: 8000, models: [tinylm], exact: true}\n")
	f.Add(minimalService + "openai: {port: 8000, models: [m], tolerance: {logprob: 0.05}}\n")
	f.Add("? name\n: x\n")
	f.Add("name: !!str 123\n")
	f.Fuzz(func(t *testing.T, src string) {
		for _, base := range []string{"", "/base"} {
			s, err := Parse([]byte(src), base)
			if err != nil {
				var es Errors
				if !errors.As(err, &es) || len(es) == 0 {
					t.Fatalf("Parse error %T %v, want a non-empty Errors", err, err)
				}
				// YAML breaks lines at \n, \r\n and a lone \r.
				lines := strings.Count(strings.ReplaceAll(strings.ReplaceAll(src, "\r\n", "\n"), "\r", "\n"), "\n") + 1
				for _, e := range es {
					if e.Msg == "" || e.Line < 0 || e.Line > lines || e.Line > 0 && e.Column < 0 {
						t.Fatalf("bad error %#v for %d lines", e, lines)
					}
				}
				if s != nil {
					t.Fatal("Parse returned a spec with its error")
				}
				return
			}
			if err := s.Validate(); err != nil {
				t.Fatalf("Parse accepted a spec that Validate rejects: %v", err)
			}
			out := mustYAML(t, s)
			if !utf8.ValidString(out) {
				t.Fatalf("marshalled spec is not UTF-8: %q", out)
			}
			again, err := Parse([]byte(out), base)
			if err != nil {
				t.Fatalf("marshalled spec does not parse: %v\ninput:\n%s\nmarshalled:\n%s", err, src, out)
			}
			if !sameSpec(s, again) {
				t.Fatalf("round trip changed the spec:\n%#v\n%#v\nmarshalled:\n%s", *s, *again, out)
			}
		}
	})
}

// FuzzParseTolerance: a tolerance accepted is in [0, 1] and writes back
// as text that reads to the same value.
func FuzzParseTolerance(f *testing.F) {
	for _, s := range []string{"1e-5", "0", "1", "0.3", "1e-18", "1e-19", "-0", "+1", ".5", "5.", "1E+0", ".nan", "1e999", "0e999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseTolerance(s)
		if err != nil {
			return
		}
		if uint64(v) > ledger.MaxToleranceE18 {
			t.Fatalf("ParseTolerance(%q) = %d, more than 1", s, v)
		}
		back, err := ParseTolerance(v.String())
		if err != nil || back != v {
			t.Fatalf("ParseTolerance(%q) = %d, written %q, read back %d, %v", s, v, v.String(), back, err)
		}
	})
}
