// Package compare judges whether two replicas' outputs of a job are the same
// result when they are not the same bytes: a float job run on different
// hardware, or with a different summation order, differs in the low bits
// (docs/ledger.md, "Outputs judged within a tolerance").
//
// [Trees] walks two output trees (a job's output directories as the sandbox
// collects them and seal.UnpackDir unpacks them) and reads each pair of files
// by its extension:
//
//   - .txt, .csv: decimal numbers separated by white space or commas, line
//     by line; numbers are compared within the tolerance, any other token
//     must be equal byte for byte, and the lines must hold the same tokens;
//   - .npy: NumPy arrays of float32, float64, (unsigned) integers or bools;
//     the header is parsed strictly, dtype, shape and order must be equal;
//   - .f32, .f64: raw little-endian IEEE 754 values;
//   - anything else: equal byte for byte.
//
// Two files byte for byte equal are always equivalent. Names, kinds (file or
// directory) and element counts must match.
//
// The verdict is a function of the two trees' bytes and the tolerance alone,
// and is the same on every machine: values are parsed with strconv (correctly
// rounded) or read as IEEE 754 bits, and compared with float64 operations
// that IEEE 754 defines exactly (subtraction, absolute value, multiplication,
// addition, comparison), each rounded on its own: Go may fuse a*b+c into one
// instruction on some CPUs, and the explicit float64 conversion in [Close]
// forbids it. Nothing depends on the order a directory is listed in, a map's
// order, a clock or the locale. A malformed file is a difference, not an
// error; an error is only the judge's own trouble (a file it cannot read).
package compare

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Tolerance is how far two numbers may be apart and still be the same:
// |a-b| <= ATol + RTol*max(|a|,|b|). Both are in [0, 1].
type Tolerance struct {
	RTol float64
	ATol float64
}

// Validate says what is wrong with t, naming the field.
func (t Tolerance) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"rtol", t.RTol}, {"atol", t.ATol}} {
		if math.IsNaN(f.v) || f.v < 0 || f.v > 1 {
			return fmt.Errorf("%s %v: want a number in [0, 1]", f.name, f.v)
		}
	}
	return nil
}

// Close reports whether a and b are the same within t. NaN is close only
// to NaN; an infinity only to the same infinity.
func Close(a, b float64, t Tolerance) bool {
	switch {
	case math.IsNaN(a) || math.IsNaN(b):
		return math.IsNaN(a) && math.IsNaN(b)
	case a == b:
		return true
	case math.IsInf(a, 0) || math.IsInf(b, 0):
		return false
	}
	// float64(...) rounds the product on its own: no fused multiply-add,
	// so every machine computes the same bound.
	scaled := float64(t.RTol * max(math.Abs(a), math.Abs(b)))
	return math.Abs(a-b) <= t.ATol+scaled
}

// Limits bound what Trees reads.
type Limits struct {
	MaxEntries int   // files and directories in each tree
	MaxBytes   int64 // total size of the files in each tree
}

// DefaultLimits are the sandbox's bounds on a job's outputs
// (sandbox.MaxOutputEntries) and the largest archive a node unpacks
// (seal.DefaultMaxBytes).
var DefaultLimits = Limits{MaxEntries: 100_000, MaxBytes: 16 << 30}

// Difference is the first place two trees differ. Path is slash-separated,
// relative to the trees' roots ("" for the roots themselves).
type Difference struct {
	Path string
	Why  string
}

func (d *Difference) String() string {
	if d.Path == "" {
		return d.Why
	}
	return d.Path + ": " + d.Why
}

// Trees compares the trees rooted at dirA and dirB. It returns nil when
// they are equivalent, else the first difference in name order. Its error
// is only for what the caller must not take as a verdict: a tree it cannot
// read, or bad arguments.
func Trees(dirA, dirB string, t Tolerance, lim Limits) (*Difference, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if lim.MaxEntries <= 0 || lim.MaxBytes <= 0 {
		return nil, errors.New("compare: limits must be positive")
	}
	ea, da, err := list(dirA, lim)
	if err != nil || da != nil {
		return da, err
	}
	eb, db, err := list(dirB, lim)
	if err != nil || db != nil {
		return db, err
	}
	for i := 0; i < len(ea) || i < len(eb); i++ {
		switch {
		case i >= len(ea):
			return &Difference{eb[i].rel, "only in the second tree"}, nil
		case i >= len(eb):
			return &Difference{ea[i].rel, "only in the first tree"}, nil
		case ea[i].rel != eb[i].rel:
			first, where := ea[i].rel, "first"
			if eb[i].rel < first {
				first, where = eb[i].rel, "second"
			}
			return &Difference{first, "only in the " + where + " tree"}, nil
		case ea[i].dir != eb[i].dir:
			return &Difference{ea[i].rel, "a directory in one tree and a file in the other"}, nil
		case ea[i].dir:
			continue
		}
		d, err := compareFile(filepath.Join(dirA, filepath.FromSlash(ea[i].rel)), filepath.Join(dirB, filepath.FromSlash(eb[i].rel)), ea[i].rel, t)
		if err != nil || d != nil {
			return d, err
		}
	}
	return nil, nil
}

type entry struct {
	rel string
	dir bool
}

// list walks root breadth-first and returns its entries sorted by path.
// Anything that is not a regular file or a directory is a difference: the
// sandbox collects neither, so only a forged archive holds one.
func list(root string, lim Limits) ([]entry, *Difference, error) {
	fi, err := os.Lstat(root)
	if err != nil {
		return nil, nil, fmt.Errorf("compare: %w", err)
	}
	if !fi.IsDir() {
		return nil, nil, fmt.Errorf("compare: %s is not a directory", root)
	}
	var out []entry
	var total int64
	queue := []string{""}
	for len(queue) > 0 {
		rel := queue[0]
		queue = queue[1:]
		f, err := os.Open(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return nil, nil, fmt.Errorf("compare: %w", err)
		}
		for {
			// In batches, so that a huge directory is refused before it
			// is all in memory.
			des, err := f.ReadDir(1024)
			for _, de := range des {
				p := path.Join(rel, de.Name())
				switch {
				case de.Type().IsDir():
					queue = append(queue, p)
					out = append(out, entry{p, true})
				case de.Type().IsRegular():
					info, err := de.Info()
					if err != nil {
						f.Close()
						return nil, nil, fmt.Errorf("compare: %w", err)
					}
					total += info.Size()
					out = append(out, entry{p, false})
				default:
					f.Close()
					return nil, &Difference{p, "neither a regular file nor a directory"}, nil
				}
				if len(out) > lim.MaxEntries {
					f.Close()
					return nil, &Difference{"", fmt.Sprintf("more than %d files and directories", lim.MaxEntries)}, nil
				}
				if total > lim.MaxBytes {
					f.Close()
					return nil, &Difference{"", fmt.Sprintf("more than %d bytes of files", lim.MaxBytes)}, nil
				}
			}
			if err == io.EOF || (err == nil && len(des) == 0) {
				break
			}
			if err != nil {
				f.Close()
				return nil, nil, fmt.Errorf("compare: %w", err)
			}
		}
		f.Close()
	}
	slices.SortFunc(out, func(a, b entry) int { return strings.Compare(a.rel, b.rel) })
	return out, nil, nil
}

// compareFile compares two files of the same name by its extension.
func compareFile(a, b, rel string, t Tolerance) (*Difference, error) {
	same, err := sameBytes(a, b)
	if err != nil || same {
		return nil, err
	}
	fa, err := os.Open(a)
	if err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	defer fb.Close()
	ra, rb := &errReader{r: fa}, &errReader{r: fb}
	var why string
	switch strings.ToLower(path.Ext(rel)) {
	case ".txt", ".csv":
		why = Text(bufio.NewReader(ra), bufio.NewReader(rb), t)
	case ".npy":
		why = NPY(bufio.NewReader(ra), bufio.NewReader(rb), t)
	case ".f32":
		why = raw(bufio.NewReader(ra), bufio.NewReader(rb), f32LE, t)
	case ".f64":
		why = raw(bufio.NewReader(ra), bufio.NewReader(rb), f64LE, t)
	default:
		why = "the bytes differ"
	}
	// A read error is the judge's, not the replicas': no verdict.
	if ra.err != nil {
		return nil, fmt.Errorf("compare: read %s: %w", rel, ra.err)
	}
	if rb.err != nil {
		return nil, fmt.Errorf("compare: read %s: %w", rel, rb.err)
	}
	if why == "" {
		return nil, nil
	}
	return &Difference{rel, why}, nil
}

// errReader keeps the first error other than EOF that r returned, so that
// the parsers, which read EOF as the end of the data, do not mistake a disk
// error for a short file.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}

// sameBytes reports whether the files at a and b hold the same bytes.
func sameBytes(a, b string) (bool, error) {
	fa, err := os.Open(a)
	if err != nil {
		return false, fmt.Errorf("compare: %w", err)
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return false, fmt.Errorf("compare: %w", err)
	}
	defer fb.Close()
	ba, bb := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		if ea != nil || eb != nil {
			if ea != nil && ea != io.EOF && ea != io.ErrUnexpectedEOF {
				return false, fmt.Errorf("compare: %w", ea)
			}
			if eb != nil && eb != io.EOF && eb != io.ErrUnexpectedEOF {
				return false, fmt.Errorf("compare: %w", eb)
			}
			return ea != nil && eb != nil, nil
		}
	}
}

// fmtFloat writes v exactly enough to tell it apart.
func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
