package jobspec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
)

// TestCompareDecodesExactly: compare's tolerances are read from their
// text into the ledger's parts per 10^18, with no float in between (0.3 as
// a float64 times 10^18 is 299999999999999980, not 3×10^17).
func TestCompareDecodesExactly(t *testing.T) {
	for _, tc := range []struct {
		yaml       string
		rtol, atol uint64
	}{
		{"compare: {numeric: {rtol: 1e-5, atol: 1e-8}}\n", 1e13, 1e10},
		{"compare:\n  numeric:\n    rtol: 0.3\n    atol: 0.000000000000000001\n", 3e17, 1},
		{"compare: {numeric: {rtol: 1, atol: 0}}\n", ledger.MaxToleranceE18, 0},
		{"compare: {numeric: {rtol: \"2.5E-7\"}}\n", 25e10, 0},
		{"compare: {numeric: {atol: 1e-18}}\n", 0, 1},
		{"compare: {numeric: {rtol: 0.1e1}}\n", ledger.MaxToleranceE18, 0},
		{"compare: {numeric: {}}\n", 0, 0},
	} {
		s, errs := decode([]byte(minimalWASM + tc.yaml))
		if len(errs) > 0 {
			t.Fatalf("%q: %v", tc.yaml, errs)
		}
		ls := s.LedgerSpec(PlaceholderModule)
		if ls.Compare == nil || ls.Compare.RTolE18 != tc.rtol || ls.Compare.ATolE18 != tc.atol {
			t.Fatalf("%q: ledger compare = %+v, want rtol_e18 %d, atol_e18 %d", tc.yaml, ls.Compare, tc.rtol, tc.atol)
		}
		out, err := s.MarshalYAML()
		if err != nil {
			t.Fatal(err)
		}
		back, errs := decode(out)
		if len(errs) > 0 || back.Compare == nil || *back.Compare.Numeric != *s.Compare.Numeric {
			t.Fatalf("%q: round trip through\n%s\ngave %+v, %v", tc.yaml, out, back.Compare, errs)
		}
	}
	for _, y := range []string{"", "compare:\n", "compare: {}\n", "compare: ~\n"} {
		s, errs := decode([]byte(minimalWASM + y))
		if len(errs) > 0 || s.Compare != nil || s.LedgerSpec(PlaceholderModule).Compare != nil {
			t.Errorf("%q: compare = %+v, %v; want none (byte for byte)", y, s.Compare, errs)
		}
	}
}

// TestCompareErrors: each wrong tolerance is refused with the field's path
// and what is wrong with it.
func TestCompareErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, field, want string }{
		{"compare: {numeric: {rtol: -1e-5}}\n", "compare.numeric.rtol", "negative"},
		{"compare: {numeric: {atol: 1.5}}\n", "compare.numeric.atol", "more than 1"},
		{"compare: {numeric: {atol: 1.0000000000000000001}}\n", "compare.numeric.atol", "more than 1"},
		{"compare: {numeric: {rtol: .nan}}\n", "compare.numeric.rtol", "finite"},
		{"compare: {numeric: {rtol: .inf}}\n", "compare.numeric.rtol", "finite"},
		{"compare: {numeric: {rtol: -.inf}}\n", "compare.numeric.rtol", "negative"},
		{"compare: {numeric: {rtol: 1e-19}}\n", "compare.numeric.rtol", "finer than 1e-18"},
		{"compare: {numeric: {atol: 0.0000000000000000015}}\n", "compare.numeric.atol", "finer than 1e-18"},
		{"compare: {numeric: {rtol: 1e-99999}}\n", "compare.numeric.rtol", "not a tolerance"},
		{"compare: {numeric: {rtol: 1/3}}\n", "compare.numeric.rtol", "not a tolerance"},
		{"compare: {numeric: {rtol: 0x10}}\n", "compare.numeric.rtol", "not a tolerance"},
		{"compare: {numeric: {rtol: tight}}\n", "compare.numeric.rtol", "not a tolerance"},
		{"compare: {numeric: {rtol: [1e-5]}}\n", "compare.numeric.rtol", "a number in [0, 1]"},
		{"compare: {numeric: {rtl: 1e-5}}\n", "compare.numeric.rtl", `did you mean "rtol"`},
		{"compare: {exact: true}\n", "compare.exact", "the fields are numeric"},
		{"compare: numeric\n", "compare", "mapping"},
	} {
		_, errs := decode([]byte(minimalWASM + tc.yaml))
		if len(errs) != 1 || errs[0].Field != tc.field || !strings.Contains(errs[0].Msg, tc.want) {
			t.Errorf("%q: errors %v, want one on %s saying %q", tc.yaml, errs, tc.field, tc.want)
		}
	}
}

// TestCompareValidate: compare needs a checked job and is for batch jobs;
// a valid one is taken, its tolerance in parts per 10^18 on the ledger's
// spec.
func TestCompareValidate(t *testing.T) {
	const cmp = "compare: {numeric: {rtol: 1e-5, atol: 1e-8}}\n"
	for _, tc := range []struct{ yaml, field, want string }{
		{minimalWASM + "verification: none\n" + cmp, "compare", "must be checked"},
		{minimalOCI + cmp, "compare", "must be checked"},
		{minimalService + cmp, "compare", "is not for a service"},
	} {
		_, err := Parse([]byte(tc.yaml), "")
		var es Errors
		if !errors.As(err, &es) || len(es) != 1 || es[0].Field != tc.field || !strings.Contains(es[0].Msg, tc.want) {
			t.Errorf("%q: Parse = %v, want one error on %s saying %q", tc.yaml, err, tc.field, tc.want)
		}
	}
	s, err := Parse([]byte(minimalWASM+"verification: full\n"+cmp), "")
	if err != nil {
		t.Fatalf("a valid compare spec: %v", err)
	}
	ls := s.LedgerSpec("sha256:" + strings.Repeat("0", 64))
	if want := (ledger.CompareSpec{RTolE18: 10_000_000_000_000, ATolE18: 10_000_000_000}); ls.Compare == nil || *ls.Compare != want {
		t.Errorf("the ledger's compare: %+v, want %+v", ls.Compare, want)
	}
}

// TestCompareProgram: compare.program names a WASI judge, a local file
// joined to the spec's directory (its blob exists once uploaded, so the
// ledger's spec holds a placeholder until then) or a blob; it excludes
// numeric, and each mistake is an error naming compare.program.
func TestCompareProgram(t *testing.T) {
	const full = "verification: full\n"
	s, err := Parse([]byte(minimalWASM+full+"compare: {program: ./same.wasm}\n"), "/jobs")
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := s.Compare.LocalProgram(); !ok || p != "/jobs/same.wasm" {
		t.Errorf("LocalProgram() = %q, %v; want /jobs/same.wasm", p, ok)
	}
	if ls := s.LedgerSpec(PlaceholderModule); ls.Compare == nil || *ls.Compare != (ledger.CompareSpec{Program: PlaceholderModule}) {
		t.Errorf("the ledger's compare: %+v, want the placeholder program", ls.Compare)
	}
	out, err := s.MarshalYAML()
	if err != nil {
		t.Fatal(err)
	}
	if back, err := Parse(out, ""); err != nil || back.Compare == nil || back.Compare.Program != "/jobs/same.wasm" {
		t.Errorf("round trip through\n%s\ngave %+v, %v", out, back, err)
	}
	blob := "sha256:" + strings.Repeat("ab", 32)
	s, err = Parse([]byte(minimalWASM+full+"compare: {program: \""+blob+"\"}\n"), "/jobs")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Compare.LocalProgram(); ok {
		t.Error("a blob program read as a local file")
	}
	if ls := s.LedgerSpec(PlaceholderModule); ls.Compare == nil || ls.Compare.Program != blob {
		t.Errorf("the ledger's compare: %+v, want program %s", ls.Compare, blob)
	}
	for _, tc := range []struct{ yaml, field, want string }{
		{full + "compare: {program: ./same.wasm, numeric: {rtol: 1e-5}}\n", "compare.program", "exclusive"},
		{full + "compare: {program: \"sha256:abc\"}\n", "compare.program", "not a blob reference"},
		{full + "compare: {program: \"\"}\n", "compare", "names no rule"},
		{"verification: none\ncompare: {program: ./same.wasm}\n", "compare", "must be checked"},
	} {
		_, err := Parse([]byte(minimalWASM+tc.yaml), "")
		var es Errors
		if !errors.As(err, &es) || len(es) != 1 || es[0].Field != tc.field || !strings.Contains(es[0].Msg, tc.want) {
			t.Errorf("%q: Parse = %v, want one error on %s saying %q", tc.yaml, err, tc.field, tc.want)
		}
	}
}

// TestCompareFuel: compare.fuel is the judge program's budget, a whole
// number written out or with an exponent, carried to the ledger's spec (0
// when left out: the chain gives max_judge_fuel); each mistake is one
// error naming compare.fuel.
func TestCompareFuel(t *testing.T) {
	const full = "verification: full\n"
	blob := "sha256:" + strings.Repeat("ab", 32)
	for _, tc := range []struct {
		yaml string
		want uint64
	}{
		{"compare: {program: \"" + blob + "\", fuel: 5e9}\n", 5_000_000_000},
		{"compare: {program: \"" + blob + "\", fuel: 12345}\n", 12345},
		{"compare: {program: \"" + blob + "\", fuel: 1000000000000}\n", ledger.MaxJudgeFuelLimit},
		{"compare: {program: \"" + blob + "\"}\n", 0},
	} {
		s, err := Parse([]byte(minimalWASM+full+tc.yaml), "")
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if ls := s.LedgerSpec(PlaceholderModule); ls.Compare == nil || ls.Compare.Fuel != tc.want {
			t.Errorf("%q: the ledger's compare %+v, want fuel %d", tc.yaml, ls.Compare, tc.want)
		}
		out, err := s.MarshalYAML()
		if err != nil {
			t.Fatal(err)
		}
		if back, err := Parse(out, ""); err != nil || back.Compare.Fuel != tc.want {
			t.Errorf("%q: round trip through\n%s\ngave %+v, %v", tc.yaml, out, back, err)
		}
	}
	for _, tc := range []struct{ yaml, want string }{
		{"compare: {program: ./same.wasm, fuel: 0}\n", "at least 1"},
		{"compare: {program: ./same.wasm, fuel: -5}\n", "at least 1"},
		{"compare: {program: ./same.wasm, fuel: 1.5}\n", "not a whole number"},
		{"compare: {program: ./same.wasm, fuel: 2e12}\n", "not a whole number from 1 to"},
		{"compare: {program: ./same.wasm, fuel: 1000000000001}\n", "more than"},
		{"compare: {program: ./same.wasm, fuel: lots}\n", "a whole number"},
		{"compare: {numeric: {rtol: 1e-5}, fuel: 1000}\n", "names none"},
	} {
		_, err := Parse([]byte(minimalWASM+full+tc.yaml), "")
		var es Errors
		if !errors.As(err, &es) || len(es) != 1 || es[0].Field != "compare.fuel" || !strings.Contains(es[0].Msg, tc.want) {
			t.Errorf("%q: Parse = %v, want one error on compare.fuel saying %q", tc.yaml, err, tc.want)
		}
	}
}

// TestCompareProgramFile: Load checks that a local judge is a WebAssembly
// file, naming compare.program.
func TestCompareProgramFile(t *testing.T) {
	dir := t.TempDir()
	spec := minimalWASM + "verification: full\ncompare: {program: ./same.wasm}\n"
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("job.yaml", spec)
	for _, tc := range []struct{ judge, want string }{
		{"", "does not exist"},
		{"#!/bin/sh\n", "not a WebAssembly binary"},
		{"\x00asm\x01\x00\x00\x00", ""},
	} {
		os.Remove(filepath.Join(dir, "same.wasm"))
		if tc.judge != "" {
			write("same.wasm", tc.judge)
		}
		_, err := Load(filepath.Join(dir, "job.yaml"))
		if tc.want == "" {
			if err != nil {
				t.Errorf("a wasm judge: %v", err)
			}
			continue
		}
		var es Errors
		if !errors.As(err, &es) || len(es) != 1 || es[0].Field != "compare.program" || !strings.Contains(es[0].Error(), tc.want) {
			t.Errorf("judge %q: Load = %v, want an error on compare.program saying %q", tc.judge, err, tc.want)
		}
	}
}
