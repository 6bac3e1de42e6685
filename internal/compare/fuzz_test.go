package compare_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/compare"
)

// FuzzReadNPYHeader: any bytes give a header or an error, never a panic,
// and an accepted header has a dtype the comparator can read.
func FuzzReadNPYHeader(f *testing.F) {
	f.Add(npyFile("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", nil))
	f.Add(npyFile("{'descr': '|u1', 'fortran_order': True, 'shape': (0,)}", nil))
	f.Add([]byte("\x93NUMPY\x02\x00\x05\x00\x00\x00{}   "))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := compare.ReadNPYHeader(bytes.NewReader(b))
		if err != nil {
			return
		}
		if !strings.ContainsAny(h.Descr[:1], "<>|") || len(h.Shape) > compare.MaxNPYDims {
			t.Fatalf("accepted descr %q shape %v", h.Descr, h.Shape)
		}
		// The same bytes are equivalent to themselves unless the data
		// does not fit the header (Trees takes equal bytes as equal first).
		if d := compare.NPY(bytes.NewReader(b), bytes.NewReader(b), compare.Tolerance{}); d != "" && !strings.Contains(d, "data ends") && !strings.Contains(d, "after the array") && !strings.Contains(d, "more than 2^63") {
			t.Fatalf("NPY(b, b) = %q", d)
		}
	})
}

// FuzzText: the verdict never panics, every text is equivalent to itself,
// and the verdict does not depend on the order of the two texts.
func FuzzText(f *testing.F) {
	f.Add([]byte("1 2 3\n"), []byte("1.0 2 3\n"))
	f.Add([]byte("nan,inf\n-1e400"), []byte("NaN,Infinity\n-inf"))
	f.Add([]byte("x 1e"), []byte("x 1e0"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		tol := compare.Tolerance{RTol: 1e-5, ATol: 1e-8}
		if d := compare.Text(bytes.NewReader(a), bytes.NewReader(a), tol); d != "" && !strings.Contains(d, "longer than") {
			t.Fatalf("Text(a, a) = %q", d)
		}
		ab := compare.Text(bytes.NewReader(a), bytes.NewReader(b), tol)
		ba := compare.Text(bytes.NewReader(b), bytes.NewReader(a), tol)
		if (ab == "") != (ba == "") {
			t.Fatalf("Text(a, b) = %q but Text(b, a) = %q", ab, ba)
		}
	})
}
