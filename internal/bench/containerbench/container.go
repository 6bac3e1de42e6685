// Package containerbench is the container benchmark (`gpunet bench
// container`): it measures the oci executor as providers run it, against a
// registry served in this process on 127.0.0.1:
//
//   - start: a job whose image is the probe program (a static executable of
//     a few hundred bytes that writes one line and exits), its rootfs
//     already cached. Timed from the call to Executor.Run until the
//     program's first output reaches the job's log writer: runtime spec,
//     overlay mount, runc's namespaces, cgroups and seccomp, exec. The
//     whole Run (with runc's teardown and output collection) is reported
//     too.
//   - pull: an image of --pull-layers layers holding --pull-mib MiB of
//     files (half random, half text, so gzip halves it) pulled into an
//     empty cache each rep: download, digest checks, gunzip, untar.
//     Throughput is the compressed bytes downloaded, and the unpacked
//     bytes, per second of the whole pull.
package containerbench

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/gpunet/gpunet/internal/bench/measure"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
)

// Defaults of Options.
const (
	DefaultReps       = 20
	DefaultPullMiB    = 256
	DefaultPullLayers = 4
	DefaultPullReps   = 3
)

// StartTarget: container start to first instruction, median, with a cached
// rootfs (the target).
const StartTarget = 300 * time.Millisecond

// Options tune a run. Fields zero or below take the defaults.
type Options struct {
	Reps       int
	PullMiB    int
	PullLayers int
	PullReps   int
	// Dir holds the executor's state and caches; "" is a temporary
	// directory, removed afterwards.
	Dir      string
	Progress io.Writer
}

// fill gives the fields zero or below their defaults.
func (o *Options) fill() {
	for _, f := range []struct {
		v *int
		d int
	}{{&o.Reps, DefaultReps}, {&o.PullMiB, DefaultPullMiB}, {&o.PullLayers, DefaultPullLayers}, {&o.PullReps, DefaultPullReps}} {
		if *f.v <= 0 {
			*f.v = f.d
		}
	}
}

// Start is the start phase's figures.
type Start struct {
	Reps int `json:"reps"`
	// FirstOutput*: from Run to the program's first output.
	FirstOutputP50Ms float64 `json:"first_output_p50_ms"`
	FirstOutputP90Ms float64 `json:"first_output_p90_ms"`
	FirstOutputMinMs float64 `json:"first_output_min_ms"`
	FirstOutputMaxMs float64 `json:"first_output_max_ms"`
	// RunP50Ms is the whole Run; MeteredP50Ms what would be billed.
	RunP50Ms     float64 `json:"run_p50_ms"`
	MeteredP50Ms float64 `json:"metered_p50_ms"`
}

// Pull is the pull phase's figures.
type Pull struct {
	Reps            int     `json:"reps"`
	Layers          int     `json:"layers"`
	CompressedBytes int64   `json:"compressed_bytes"`
	UnpackedBytes   int64   `json:"unpacked_bytes"`
	Files           int     `json:"files"`
	BuildSeconds    float64 `json:"build_seconds"`
	P50Seconds      float64 `json:"p50_seconds"`
	MinSeconds      float64 `json:"min_seconds"`
	// MBps are decimal megabytes per second at the median pull.
	CompressedMBps float64 `json:"compressed_mb_per_s"`
	UnpackedMBps   float64 `json:"unpacked_mb_per_s"`
}

// Result is a run's figures.
type Result struct {
	Date         time.Time `json:"date"`
	GOMAXPROCS   int       `json:"gomaxprocs"`
	Runtime      string    `json:"runtime"`
	Capabilities []string  `json:"capabilities"`
	Start        Start     `json:"start"`
	Pull         Pull      `json:"pull"`
	TargetMs     float64   `json:"target_start_p50_ms"`
	MeetsTarget  bool      `json:"meets_target"`
}

// Run runs the container benchmark. It needs runc (see oci.Probe); without
// it the error says why.
func Run(ctx context.Context, o Options) (*Result, error) {
	o.fill()
	progress := measure.Progress(o.Progress)
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "gpunet-bench-container-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	ex, err := oci.New(ctx, oci.Options{Dir: filepath.Join(dir, "oci")})
	if err != nil {
		return nil, err
	}
	defer ex.Close()
	reg, err := serveRegistry()
	if err != nil {
		return nil, err
	}
	defer reg.close()
	res := &Result{
		Date: time.Now().UTC(), GOMAXPROCS: runtime.GOMAXPROCS(0), Runtime: ex.Capabilities().Version,
		Capabilities: ex.Capabilities().Lines(), TargetMs: measure.Ms(StartTarget),
	}
	if res.Start, err = measureStart(ctx, ex, reg, dir, o.Reps, progress); err != nil {
		return nil, err
	}
	res.MeetsTarget = res.Start.FirstOutputP50Ms <= res.TargetMs
	if res.Pull, err = measurePull(ctx, reg, dir, o, progress); err != nil {
		return nil, err
	}
	return res, nil
}
