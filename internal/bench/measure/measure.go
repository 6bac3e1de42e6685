// Package measure is what the benchmarks under internal/bench measure and
// report with: nearest-rank percentiles of durations, durations in the
// units their results print, the process's CPU time, a progress printer
// and the verdict words of their targets.
package measure

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (nearest rank) of ds, 0 for none.
// It sorts ds in place.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	k := int(float64(len(ds))*p/100+0.999999) - 1
	return ds[min(max(k, 0), len(ds)-1)]
}

// Median returns the upper median of xs (the element at len/2 once
// sorted), 0 for none. xs is left as it is.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// Ms returns d in milliseconds, truncated to whole microseconds.
func Ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

// ExactMs returns d in milliseconds, to the nanosecond.
func ExactMs(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// Us returns d in microseconds, to the nanosecond.
func Us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// Progress returns a printer of progress lines (format plus a newline) to
// w; with w nil it prints nothing.
func Progress(w io.Writer) func(format string, args ...any) {
	return func(format string, args ...any) {
		if w != nil {
			fmt.Fprintf(w, format+"\n", args...)
		}
	}
}

// Verdict is how results print whether a target was reached: "met" or
// "NOT met".
func Verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}
