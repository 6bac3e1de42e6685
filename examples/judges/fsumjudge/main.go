// Command fsumjudge is an example judge program for a compare job
// (compare: {program: fsumjudge.wasm}; docs/jobspec.md, compare): it says
// whether two replicas' output trees, /a and /b, are the same result of a
// float job such as internal/compare/testdata/fsum, whose honest replicas
// differ in the low bits. It exits 0 when they are the same, 1 (with where
// they differ on stderr) when they are not, 2 when it cannot tell.
//
// Two trees are the same when they hold the same files and each pair of
// files is the same: .f64 files as raw little-endian float64 values, .npy
// files as arrays (the same header; '<f8' and '<f4' data as numbers, any
// other byte for byte), .txt and .csv files as words separated by white
// space or commas (numbers as numbers, other words exactly, line by line),
// anything else byte for byte. Two numbers are the same when
// |a-b| <= atol + rtol*max(|a|,|b|), with rtol 1e-5 and atol 1e-8; NaN only
// matches NaN.
//
// It is an ordinary Go program; build it for WASI:
//
//	GOOS=wasip1 GOARCH=wasm go build -trimpath -ldflags=-s -o fsumjudge.wasm ./examples/judges/fsumjudge
//
// The provider runs it deterministically with no network, and the trees
// read-only: a judge reads and decides, nothing more. Run natively it
// takes the two directories as its arguments just the same.
package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The tolerance: |a-b| <= atol + rtol*max(|a|,|b|).
const (
	rtol = 1e-5
	atol = 1e-8
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: fsumjudge DIR-A DIR-B")
		os.Exit(2)
	}
	why, err := judge(os.Args[1], os.Args[2])
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	case why != "":
		fmt.Fprintln(os.Stderr, why)
		os.Exit(1)
	}
}

// judge returns where trees a and b differ, or "" when they are the same.
func judge(a, b string) (string, error) {
	fa, err := files(a)
	if err != nil {
		return "", err
	}
	fb, err := files(b)
	if err != nil {
		return "", err
	}
	if !slices.Equal(fa, fb) {
		return fmt.Sprintf("different files: %q and %q", fa, fb), nil
	}
	for _, name := range fa {
		x, err := os.ReadFile(filepath.Join(a, name))
		if err != nil {
			return "", err
		}
		y, err := os.ReadFile(filepath.Join(b, name))
		if err != nil {
			return "", err
		}
		if why := sameFile(name, x, y); why != "" {
			return name + ": " + why, nil
		}
	}
	return "", nil
}

// files lists the regular files under dir, relative to it, in order.
func files(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		out = append(out, filepath.ToSlash(rel))
		return err
	})
	slices.Sort(out)
	return out, err
}

func sameFile(name string, x, y []byte) string {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".f64":
		return sameFloats(x, y, 8)
	case ".npy":
		return sameNpy(x, y)
	case ".txt", ".csv":
		return sameText(x, y)
	}
	if !bytes.Equal(x, y) {
		return "bytes differ"
	}
	return ""
}

// sameNumber is the tolerance test, each operation rounded on its own.
func sameNumber(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	if a == b {
		return true // infinities included
	}
	diff := math.Abs(a - b)
	scaled := float64(rtol * math.Max(math.Abs(a), math.Abs(b)))
	return diff <= float64(atol+scaled)
}

// sameFloats compares raw little-endian floats of size bytes (4 or 8).
func sameFloats(x, y []byte, size int) string {
	if len(x) != len(y) || len(x)%size != 0 {
		return fmt.Sprintf("%d and %d bytes of float%d", len(x), len(y), size*8)
	}
	for i := 0; i < len(x); i += size {
		var a, b float64
		if size == 8 {
			a = math.Float64frombits(binary.LittleEndian.Uint64(x[i:]))
			b = math.Float64frombits(binary.LittleEndian.Uint64(y[i:]))
		} else {
			a = float64(math.Float32frombits(binary.LittleEndian.Uint32(x[i:])))
			b = float64(math.Float32frombits(binary.LittleEndian.Uint32(y[i:])))
		}
		if !sameNumber(a, b) {
			return fmt.Sprintf("value %d: %g and %g", i/size, a, b)
		}
	}
	return ""
}

// sameNpy compares two .npy arrays: the same header, then the data.
func sameNpy(x, y []byte) string {
	hx, ok1 := npyHeader(x)
	hy, ok2 := npyHeader(y)
	if !ok1 || !ok2 {
		return "not an .npy array"
	}
	if !bytes.Equal(x[:hx], y[:hy]) {
		return "headers differ (dtype or shape)"
	}
	header := string(x[:hx])
	switch {
	case strings.Contains(header, "'<f8'"):
		return sameFloats(x[hx:], y[hy:], 8)
	case strings.Contains(header, "'<f4'"):
		return sameFloats(x[hx:], y[hy:], 4)
	}
	if !bytes.Equal(x[hx:], y[hy:]) {
		return "data differ"
	}
	return ""
}

// npyHeader returns where an .npy file's data start.
func npyHeader(b []byte) (int, bool) {
	if len(b) < 10 || string(b[:6]) != "\x93NUMPY" {
		return 0, false
	}
	n := 10 + int(binary.LittleEndian.Uint16(b[8:]))
	if b[6] >= 2 {
		if len(b) < 12 {
			return 0, false
		}
		n = 12 + int(binary.LittleEndian.Uint32(b[8:]))
	}
	if n > len(b) {
		return 0, false
	}
	return n, true
}

// sameText compares text line by line, word by word.
func sameText(x, y []byte) string {
	lx, ly := strings.Split(string(x), "\n"), strings.Split(string(y), "\n")
	if len(lx) != len(ly) {
		return fmt.Sprintf("%d and %d lines", len(lx), len(ly))
	}
	split := func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\r' }
	for i := range lx {
		wx, wy := strings.FieldsFunc(lx[i], split), strings.FieldsFunc(ly[i], split)
		if len(wx) != len(wy) {
			return fmt.Sprintf("line %d: %d and %d words", i+1, len(wx), len(wy))
		}
		for k := range wx {
			a, err1 := strconv.ParseFloat(wx[k], 64)
			b, err2 := strconv.ParseFloat(wy[k], 64)
			if err1 == nil && err2 == nil {
				if !sameNumber(a, b) {
					return fmt.Sprintf("line %d: %s and %s", i+1, wx[k], wy[k])
				}
			} else if wx[k] != wy[k] {
				return fmt.Sprintf("line %d: %q and %q", i+1, wx[k], wy[k])
			}
		}
	}
	return ""
}
