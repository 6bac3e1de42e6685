package measure

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ds := func(ms ...int) []time.Duration {
		var out []time.Duration
		for _, m := range ms {
			out = append(out, time.Duration(m)*time.Millisecond)
		}
		return out
	}
	for _, c := range []struct {
		ds   []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 50, 0},
		{ds(7), 99, 7 * time.Millisecond},
		{ds(5, 1, 4, 2, 3), 50, 3 * time.Millisecond}, // unsorted in, nearest rank 3 of 5
		{ds(5, 1, 4, 2, 3), 0, 1 * time.Millisecond},
		{ds(5, 1, 4, 2, 3), 100, 5 * time.Millisecond},
		{ds(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 90, 9 * time.Millisecond},
		{ds(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 91, 10 * time.Millisecond},
	} {
		if got := Percentile(c.ds, c.p); got != c.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", c.ds, c.p, got, c.want)
		}
	}
}

func TestMedianLeavesInput(t *testing.T) {
	xs := []float64{3, 1, 2, 4}
	if got := Median(xs); got != 3 {
		t.Errorf("Median = %v, want the upper median 3", got)
	}
	if xs[0] != 3 || xs[1] != 1 {
		t.Errorf("Median sorted its input: %v", xs)
	}
	if got := Median(nil); got != 0 {
		t.Errorf("Median(nil) = %v, want 0", got)
	}
}

func TestUnits(t *testing.T) {
	d := 1234567 * time.Nanosecond
	if got, want := Ms(d), 1.234; got != want {
		t.Errorf("Ms = %v, want %v (whole microseconds)", got, want)
	}
	if got, want := ExactMs(d), 1.234567; got != want {
		t.Errorf("ExactMs = %v, want %v", got, want)
	}
	if got, want := Us(d), 1234.567; got != want {
		t.Errorf("Us = %v, want %v", got, want)
	}
}

func TestProgress(t *testing.T) {
	var b bytes.Buffer
	Progress(&b)("%d of %d", 1, 2)
	if got, want := b.String(), "1 of 2\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	Progress(nil)("nothing") // must not panic
}

func TestProcessCPUAdvances(t *testing.T) {
	before := ProcessCPU()
	if before == 0 {
		t.Skip("process CPU time not measured on this platform")
	}
	for deadline := time.Now().Add(50 * time.Millisecond); time.Now().Before(deadline); {
	}
	if after := ProcessCPU(); after <= before {
		t.Errorf("CPU time %v after a busy loop, %v before", after, before)
	}
}

type failAfter struct{ n int }

func (f *failAfter) Write(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("disk full")
	}
	f.n--
	return len(p), nil
}

// TestReportKeepsFirstError: after a failed write nothing more is written
// and Err says why.
func TestReportKeepsFirstError(t *testing.T) {
	f := &failAfter{n: 1}
	r := NewReport(f)
	r.Printf("one %d\n", 1)
	if r.Err() != nil {
		t.Fatalf("error %v after a good write", r.Err())
	}
	r.Println("two")
	r.Printf("three\n")
	if r.Err() == nil || r.Err().Error() != "disk full" {
		t.Errorf("Err = %v, want disk full", r.Err())
	}
	var b bytes.Buffer
	r = NewReport(&b)
	tw := r.Table()
	r.Printf("head\n")
	tw.Write([]byte("a\tbb\t\nccc\td\t\n"))
	tw.Flush()
	if got, want := b.String(), "head\n    a  bb\n  ccc   d\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
