package main

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tree writes fsum-like outputs holding vals into a new directory.
func tree(t *testing.T, vals []float64, total string) string {
	t.Helper()
	dir := t.TempDir()
	var raw []byte
	for _, v := range vals {
		raw = binary.LittleEndian.AppendUint64(raw, math.Float64bits(v))
	}
	hdr := "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }\n"
	npy := append([]byte("\x93NUMPY\x01\x00"), byte(len(hdr)), 0)
	npy = append(append(npy, hdr...), raw...)
	os.MkdirAll(filepath.Join(dir, "out"), 0o755)
	for name, b := range map[string][]byte{"sums.f64": raw, "sums.npy": npy, "total.txt": []byte("rows,total\n2," + total + "\n")} {
		if err := os.WriteFile(filepath.Join(dir, "out", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestJudge(t *testing.T) {
	base := tree(t, []float64{1.0, 2.0}, "3")
	for _, c := range []struct {
		name  string
		other string
		want  string // "" for the same
	}{
		{"low bits", tree(t, []float64{1.0 + 1e-15, 2.0 - 1e-15}, "3.0000000000000004"), ""},
		{"a value off", tree(t, []float64{1.0, 2.1}, "3"), "out/sums.f64: value 1"},
		{"the total off", tree(t, []float64{1.0, 2.0}, "3.1"), "out/total.txt: line 2"},
		{"NaN", tree(t, []float64{math.NaN(), 2.0}, "3"), "out/sums.f64: value 0"},
	} {
		why, err := judge(base, c.other)
		if err != nil {
			t.Fatal(err)
		}
		if (c.want == "") != (why == "") || !strings.HasPrefix(why, c.want) {
			t.Errorf("%s: judge says %q, want %q", c.name, why, c.want)
		}
	}
	extra := tree(t, []float64{1.0, 2.0}, "3")
	os.WriteFile(filepath.Join(extra, "out", "more.txt"), nil, 0o644)
	if why, _ := judge(base, extra); !strings.HasPrefix(why, "different files") {
		t.Errorf("an extra file: judge says %q", why)
	}
}
