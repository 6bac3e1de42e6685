package measure

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Report is where a result writes its text. It keeps the first error a
// write returned, after which writes do nothing, so that a WriteText
// method can print freely and return Err at the end.
type Report struct {
	w   io.Writer
	err error
}

// NewReport returns a Report writing to w.
func NewReport(w io.Writer) *Report { return &Report{w: w} }

// Write writes p unless an earlier write failed.
func (r *Report) Write(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.w.Write(p)
	r.err = err
	return n, err
}

// Printf prints as fmt.Fprintf.
func (r *Report) Printf(format string, args ...any) { fmt.Fprintf(r, format, args...) }

// Println prints as fmt.Fprintln.
func (r *Report) Println(args ...any) { fmt.Fprintln(r, args...) }

// Table returns a tabwriter onto the report whose cells are right-aligned
// and two spaces apart, as the benchmarks' tables are; Flush it at the
// table's end.
func (r *Report) Table() *tabwriter.Writer {
	return tabwriter.NewWriter(r, 0, 0, 2, ' ', tabwriter.AlignRight)
}

// Err returns the first write error, if any.
func (r *Report) Err() error { return r.err }
