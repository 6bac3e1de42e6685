package containerbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/bench/measure"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
)

// measureStart runs the probe program reps times, its rootfs cached by a
// first, untimed run.
func measureStart(ctx context.Context, ex *oci.Executor, reg *registry, dir string, reps int, progress func(string, ...any)) (Start, error) {
	probe, err := oci.ProbeELF(runtime.GOARCH)
	if err != nil {
		return Start{}, err
	}
	img, err := imageOf(map[string][]byte{oci.ProbeProgram: probe}, []string{"/" + oci.ProbeProgram})
	if err != nil {
		return Start{}, err
	}
	ref, err := reg.add("bench/probe", img)
	if err != nil {
		return Start{}, err
	}
	work := filepath.Join(dir, "work")
	progress("start: warm-up run (pulls the probe image)")
	if _, _, _, err := runProbe(ctx, ex, ref, work); err != nil {
		return Start{}, err
	}
	var firsts, wholes, metereds []time.Duration
	for i := range reps {
		f, w, m, err := runProbe(ctx, ex, ref, work)
		if err != nil {
			return Start{}, err
		}
		firsts, wholes, metereds = append(firsts, f), append(wholes, w), append(metereds, m)
		if i == 0 || (i+1)%10 == 0 {
			progress("start: %d/%d, first output after %.1fms", i+1, reps, measure.Ms(f))
		}
	}
	p := measure.Percentile
	return Start{
		Reps:             reps,
		FirstOutputP50Ms: measure.Ms(p(firsts, 50)), FirstOutputP90Ms: measure.Ms(p(firsts, 90)),
		FirstOutputMinMs: measure.Ms(p(firsts, 0)), FirstOutputMaxMs: measure.Ms(p(firsts, 100)),
		RunP50Ms: measure.Ms(p(wholes, 50)), MeteredP50Ms: measure.Ms(p(metereds, 50)),
	}, nil
}

// runProbe runs the probe image once in a fresh work directory: the time
// to its first output, the whole Run, and what was metered.
func runProbe(ctx context.Context, ex *oci.Executor, ref, work string) (first, whole, metered time.Duration, err error) {
	os.RemoveAll(work)
	if err := os.MkdirAll(work, 0o700); err != nil {
		return 0, 0, 0, err
	}
	w := &firstOutput{want: oci.ProbeOutput}
	t0 := time.Now()
	r, err := ex.Run(ctx, &sandbox.Job{ID: "bench", Image: ref, WorkDir: work, Outputs: []string{"/out"}, Limits: sandbox.Limits{Timeout: time.Minute, MemoryBytes: 64 << 20, CPU: 1}}, w)
	whole = time.Since(t0)
	if err != nil {
		return 0, 0, 0, err
	}
	os.RemoveAll(r.OutputDir)
	if r.Failed {
		return 0, 0, 0, fmt.Errorf("the probe job failed: %s", r.Reason)
	}
	at, ok := w.at()
	if !ok {
		return 0, 0, 0, errors.New("the probe job printed nothing")
	}
	return at.Sub(t0), whole, r.Metered, nil
}

// firstOutput records when a wanted string first reaches the job's log
// (the executor's own "[gpunet]" notes come before it).
type firstOutput struct {
	want string
	mu   sync.Mutex
	buf  strings.Builder
	when time.Time
}

func (f *firstOutput) Write(p []byte) (int, error) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.when.IsZero() {
		f.buf.Write(p)
		if strings.Contains(f.buf.String(), f.want) {
			f.when = now
		}
	}
	return len(p), nil
}

func (f *firstOutput) at() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.when, !f.when.IsZero()
}
