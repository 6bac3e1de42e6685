package compare_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/compare"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/seal"
)

var tol = compare.Tolerance{RTol: 1e-5, ATol: 1e-8}

func TestClose(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, c := range []struct {
		a, b float64
		want bool
	}{
		{1, 1, true},
		{1, 1 + 1e-12, true},
		{1, 1 + 2e-5, false},
		{0, 1e-9, true},  // atol
		{0, 1e-7, false}, // beyond atol, rtol*1e-7 is tiny
		{-1e6, -1e6 - 5, true},
		{1e6, -1e6, false},
		{nan, nan, true},
		{nan, 1, false},
		{1, nan, false},
		{inf, inf, true},
		{inf, -inf, false},
		{inf, math.MaxFloat64, false},
	} {
		if got := compare.Close(c.a, c.b, tol); got != c.want {
			t.Errorf("Close(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := compare.Close(c.b, c.a, tol); got != c.want {
			t.Errorf("Close(%v, %v) = %v, want %v (symmetric)", c.b, c.a, got, c.want)
		}
	}
}

func TestToleranceValidate(t *testing.T) {
	for _, c := range []struct {
		t    compare.Tolerance
		want string
	}{
		{compare.Tolerance{}, ""},
		{compare.Tolerance{RTol: 1, ATol: 1}, ""},
		{compare.Tolerance{RTol: -1e-9}, "rtol"},
		{compare.Tolerance{ATol: 1.5}, "atol"},
		{compare.Tolerance{RTol: math.NaN()}, "rtol"},
		{compare.Tolerance{ATol: math.Inf(1)}, "atol"},
	} {
		err := c.t.Validate()
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: Validate() = %v, want an error naming %q", c.t, err, c.want)
		}
	}
}

func TestText(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want string // "" equivalent, else a part of the difference
	}{
		{"1 2 3\n", "1 2 3\n", ""},
		{"1.0, 2.0\n3e0\n", "1.000000001 2\n3.0\n", ""},
		{"loss 0.5\n", "loss 0.50000001\n", ""},
		{"loss 0.5\n", "Loss 0.5\n", "differ"},
		{"1 2\n", "1 2.1\n", "tolerance"},
		{"1 2\n", "1\n2\n", "line ends"},
		{"1 2", "1 2 3", "ends before"},
		{"nan inf -Infinity", "NaN +inf -inf", ""},
		{"nan", "0", "tolerance"},
		{"0x10", "16", "differ"},    // hex is a word, not a number
		{"1_000", "1000", "differ"}, // underscores too
		{"1e400", "inf", ""},        // out of range is +Inf
		{"1e", "1e", ""},            // equal bytes
		{"1e 2", "1e 2.0", ""},      // a word then a number
		{"1e 2", "1E 2", "differ"},  // words compare exactly
		{strings.Repeat("x", 5000) + " 1", strings.Repeat("x", 5000) + " 1.0", "longer"},
	} {
		got := compare.Text(strings.NewReader(c.a), strings.NewReader(c.b), tol)
		if (got == "") != (c.want == "") || !strings.Contains(got, c.want) {
			t.Errorf("Text(%.40q, %.40q) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}

// npyFile writes a .npy file with header dict hdr and data.
func npyFile(hdr string, data []byte) []byte {
	for (10+len(hdr)+1)%64 != 0 {
		hdr += " "
	}
	hdr += "\n"
	b := append([]byte("\x93NUMPY\x01\x00"), byte(len(hdr)), byte(len(hdr)>>8))
	return append(append(b, hdr...), data...)
}

func f64s(v ...float64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

func f32s(v ...float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func TestNPY(t *testing.T) {
	h := func(descr, shape string) string {
		return "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }"
	}
	a := npyFile(h("<f8", "(2,)"), f64s(1, 2))
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"low bits", npyFile(h("<f8", "(2,)"), f64s(1+1e-15, 2-1e-15)), ""},
		{"key order", npyFile("{'shape': (2,), 'fortran_order': False, 'descr': '<f8'}", f64s(1, 2)), ""},
		{"far", npyFile(h("<f8", "(2,)"), f64s(1, 2.1)), "element 1"},
		{"dtype", npyFile(h("<f4", "(2,)"), f32s(1, 2)), "dtype"},
		{"shape", npyFile(h("<f8", "(1, 2)"), f64s(1, 2)), "shape"},
		{"short", npyFile(h("<f8", "(2,)"), f64s(1)), "data ends"},
		{"trailing", npyFile(h("<f8", "(2,)"), f64s(1, 2, 3)), "after"},
		{"magic", []byte("\x93NUMPZ\x01\x00"), "magic"},
		{"version", []byte("\x93NUMPY\x04\x00\x00\x00"), "version"},
		{"unknown key", npyFile("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), 'x': 1}", f64s(1, 2)), "unknown key"},
		{"missing key", npyFile("{'descr': '<f8', 'shape': (2,)}", f64s(1, 2)), "fortran_order missing"},
		{"int not tuple", npyFile(h("<f8", "(2)"), f64s(1, 2)), "(n,)"},
		{"native order", npyFile(h("=f8", "(2,)"), f64s(1, 2)), "byte order"},
		{"complex", npyFile(h("<c16", "(2,)"), f64s(1, 2)), "want float32"},
		{"junk after dict", npyFile(h("<f8", "(2,)")+"x", f64s(1, 2)), "after the dict"},
	} {
		got := compare.NPY(bytes.NewReader(a), bytes.NewReader(c.b), tol)
		if (got == "") != (c.want == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: NPY = %q, want %q", c.name, got, c.want)
		}
	}
	// Integers and bools are exact; big-endian floats are read as such.
	ia := npyFile(h("<i4", "(2, 1)"), []byte{1, 0, 0, 0, 2, 0, 0, 0})
	ib := npyFile(h("<i4", "(2, 1)"), []byte{1, 0, 0, 0, 3, 0, 0, 0})
	if got := compare.NPY(bytes.NewReader(ia), bytes.NewReader(ib), compare.Tolerance{RTol: 1, ATol: 1}); !strings.Contains(got, "element 1") {
		t.Errorf("int arrays 2 and 3: NPY = %q, want element 1 to differ", got)
	}
	be := binary.BigEndian.AppendUint64(nil, math.Float64bits(1))
	be = binary.BigEndian.AppendUint64(be, math.Float64bits(2))
	if got := compare.NPY(bytes.NewReader(npyFile(h(">f8", "(2,)"), be)), bytes.NewReader(npyFile(h(">f8", "(2,)"), f64s(1, 2))), tol); !strings.Contains(got, "element 0") {
		t.Errorf("big-endian 1,2 against little-endian bytes: NPY = %q, want element 0 to differ", got)
	}
}

func TestReadNPYHeaderShape(t *testing.T) {
	for hdr, want := range map[string]string{
		"{'descr': '<f8', 'fortran_order': True, 'shape': ()}":                    "[]",
		"{'descr': '<f8', 'fortran_order': True, 'shape': (3, 4, 5)}":             "[3 4 5]",
		"{'descr': '|u1', 'fortran_order': False, 'shape': (0,)}":                 "[0]",
		"{'descr': '<f8', 'fortran_order': False, 'shape': (01,)}":                "error",
		"{'descr': '<f8', 'fortran_order': False, 'shape': (1,,)}":                "error",
		"{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (1,)}": "error",
	} {
		h, err := compare.ReadNPYHeader(bytes.NewReader(npyFile(hdr, nil)))
		got := "error"
		if err == nil {
			got = fmt.Sprint(h.Shape)
		}
		if got != want {
			t.Errorf("%s: shape %s (%v), want %s", hdr, got, err, want)
		}
	}
}

// tree writes files (slash paths → contents) under a new directory.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, data := range files {
		host := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(host, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestTrees(t *testing.T) {
	base := map[string]string{
		"out/a.txt":     "x 1.0\n",
		"out/b.f64":     string(f64s(1, 2)),
		"out/c.f32":     string(f32s(1, 2)),
		"out/d.bin":     "raw",
		"out/sub/e.csv": "1,2\n",
	}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range base {
			m[a] = b
		}
		if v == "\x00delete" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	a := tree(t, base)
	for _, c := range []struct {
		name  string
		files map[string]string
		want  string // "" equivalent, else the difference's text
	}{
		{"same", base, ""},
		{"text low bits", with("out/a.txt", "x 1.0000000001\n"), ""},
		{"f64 low bits", with("out/b.f64", string(f64s(1, 2+1e-14))), ""},
		{"f32 low bits", with("out/c.f32", string(f32s(1, math.Nextafter32(2, 3)))), ""},
		{"f64 far", with("out/b.f64", string(f64s(1, 2.5))), "out/b.f64: element 1"},
		{"f64 ragged", with("out/b.f64", string(f64s(1, 2))+"x"), "out/b.f64: the size is not a multiple of 8"},
		{"f64 count", with("out/b.f64", string(f64s(1))), "out/b.f64: one file ends"},
		{"binary", with("out/d.bin", "raW"), "out/d.bin: the bytes differ"},
		{"missing", with("out/d.bin", "\x00delete"), "out/d.bin: only in the first tree"},
		{"extra", with("out/z.txt", ""), "out/z.txt: only in the second tree"},
		{"csv far", with("out/sub/e.csv", "1,3\n"), "out/sub/e.csv: line 1"},
	} {
		b := tree(t, c.files)
		d, err := compare.Trees(a, b, tol, compare.DefaultLimits)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := ""
		if d != nil {
			got = d.String()
		}
		if (got == "") != (c.want == "") || !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: Trees = %q, want %q", c.name, got, c.want)
		}
		// The verdict does not depend on which tree comes first.
		back, err := compare.Trees(b, a, tol, compare.DefaultLimits)
		if err != nil || (back == nil) != (d == nil) {
			t.Errorf("%s: Trees(b, a) = %v, %v; Trees(a, b) = %v", c.name, back, err, d)
		}
	}
}

func TestTreesLimitsAndKinds(t *testing.T) {
	a := tree(t, map[string]string{"out/x": "1", "out/y": "2"})
	d, err := compare.Trees(a, a, tol, compare.Limits{MaxEntries: 2, MaxBytes: 100})
	if err != nil || d == nil || !strings.Contains(d.Why, "more than 2 files") {
		t.Errorf("3 entries, limit 2: Trees = %v, %v; want a difference", d, err)
	}
	d, err = compare.Trees(a, a, tol, compare.Limits{MaxEntries: 10, MaxBytes: 1})
	if err != nil || d == nil || !strings.Contains(d.Why, "more than 1 bytes") {
		t.Errorf("2 bytes, limit 1: Trees = %v, %v; want a difference", d, err)
	}
	l := tree(t, map[string]string{"out/x": "1"})
	if err := os.Symlink("x", filepath.Join(l, "out", "y")); err != nil {
		t.Fatal(err)
	}
	d, err = compare.Trees(a, l, tol, compare.DefaultLimits)
	if err != nil || d == nil || d.Path != "out/y" {
		t.Errorf("a symbolic link: Trees = %v, %v; want a difference at out/y", d, err)
	}
	if _, err := compare.Trees(a, filepath.Join(a, "nope"), tol, compare.DefaultLimits); err == nil {
		t.Error("a missing tree: Trees returned no error")
	}
	if _, err := compare.Trees(a, a, compare.Tolerance{RTol: 2}, compare.DefaultLimits); err == nil || !strings.Contains(err.Error(), "rtol") {
		t.Errorf("rtol 2: Trees error %v, want one naming rtol", err)
	}
}

// The default limits are the sandbox's and the unpacker's: a tree that a
// provider could collect and a node unpack is never refused for its size.
func TestDefaultLimitsMatchSandbox(t *testing.T) {
	if got := compare.DefaultLimits.MaxEntries; got != sandbox.MaxOutputEntries {
		t.Errorf("DefaultLimits.MaxEntries = %d, sandbox.MaxOutputEntries %d", got, sandbox.MaxOutputEntries)
	}
	if got := compare.DefaultLimits.MaxEntries; got != seal.DefaultMaxEntries {
		t.Errorf("DefaultLimits.MaxEntries = %d, seal.DefaultMaxEntries %d", got, seal.DefaultMaxEntries)
	}
	if compare.DefaultLimits.MaxBytes != seal.DefaultMaxBytes {
		t.Errorf("DefaultLimits.MaxBytes = %d, seal %d", compare.DefaultLimits.MaxBytes, seal.DefaultMaxBytes)
	}
}
