package bench

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
)

// The container benchmark (`gpunet bench container`) measures the oci
// executor as providers run it, against a registry served in this process
// on 127.0.0.1:
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

// Defaults of ContainerOptions.
const (
	DefaultContainerReps       = 20
	DefaultContainerPullMiB    = 256
	DefaultContainerPullLayers = 4
	DefaultContainerPullReps   = 3
)

// ContainerStartTarget: container start to first instruction, median, with
// a cached rootfs (the target).
const ContainerStartTarget = 300 * time.Millisecond

// ContainerOptions tune a run. Zero fields take the defaults.
type ContainerOptions struct {
	Reps       int
	PullMiB    int
	PullLayers int
	PullReps   int
	// Dir holds the executor's state and caches; "" is a temporary
	// directory, removed afterwards.
	Dir      string
	Progress io.Writer
}

// ContainerStart is the start phase's figures.
type ContainerStart struct {
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

// ContainerPull is the pull phase's figures.
type ContainerPull struct {
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

// ContainerResult is a run's figures.
type ContainerResult struct {
	Date         time.Time      `json:"date"`
	GOMAXPROCS   int            `json:"gomaxprocs"`
	Runtime      string         `json:"runtime"`
	Capabilities []string       `json:"capabilities"`
	Start        ContainerStart `json:"start"`
	Pull         ContainerPull  `json:"pull"`
	TargetMs     float64        `json:"target_start_p50_ms"`
	MeetsTarget  bool           `json:"meets_target"`
}

// RunContainer runs the container benchmark. It needs runc (see
// oci.Probe); without it the error says why.
func RunContainer(ctx context.Context, o ContainerOptions) (*ContainerResult, error) {
	if o.Reps <= 0 {
		o.Reps = DefaultContainerReps
	}
	if o.PullMiB <= 0 {
		o.PullMiB = DefaultContainerPullMiB
	}
	if o.PullLayers <= 0 {
		o.PullLayers = DefaultContainerPullLayers
	}
	if o.PullReps <= 0 {
		o.PullReps = DefaultContainerPullReps
	}
	progress := func(format string, a ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, format+"\n", a...)
		}
	}
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
	reg, stopReg, err := serveRegistry()
	if err != nil {
		return nil, err
	}
	defer stopReg()
	res := &ContainerResult{
		Date: time.Now().UTC(), GOMAXPROCS: runtime.GOMAXPROCS(0), Runtime: ex.Capabilities().Version,
		Capabilities: ex.Capabilities().Lines(), TargetMs: ms(ContainerStartTarget),
	}

	// Start: the probe program, cached.
	probe, err := oci.ProbeELF(runtime.GOARCH)
	if err != nil {
		return nil, err
	}
	img, err := imageOf(map[string][]byte{oci.ProbeProgram: probe}, []string{"/" + oci.ProbeProgram})
	if err != nil {
		return nil, err
	}
	ref, err := oci.PushImage(reg, "bench/probe", img)
	if err != nil {
		return nil, err
	}
	work := filepath.Join(dir, "work")
	run := func() (first, whole, metered time.Duration, err error) {
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
	progress("start: warm-up run (pulls the probe image)")
	if _, _, _, err := run(); err != nil {
		return nil, err
	}
	var firsts, wholes, metereds []time.Duration
	for i := range o.Reps {
		f, w, m, err := run()
		if err != nil {
			return nil, err
		}
		firsts, wholes, metereds = append(firsts, f), append(wholes, w), append(metereds, m)
		if i == 0 || (i+1)%10 == 0 {
			progress("start: %d/%d, first output after %.1fms", i+1, o.Reps, ms(f))
		}
	}
	res.Start = ContainerStart{
		Reps:             o.Reps,
		FirstOutputP50Ms: ms(percentile(firsts, 50)), FirstOutputP90Ms: ms(percentile(firsts, 90)),
		FirstOutputMinMs: ms(percentile(firsts, 0)), FirstOutputMaxMs: ms(percentile(firsts, 100)),
		RunP50Ms: ms(percentile(wholes, 50)), MeteredP50Ms: ms(percentile(metereds, 50)),
	}
	res.MeetsTarget = res.Start.FirstOutputP50Ms <= res.TargetMs

	// Pull: a large image into an empty cache each time.
	progress("pull: building a %d MiB image of %d layers (not timed)", o.PullMiB, o.PullLayers)
	tb := time.Now()
	big, files, err := bulkImage(o.PullMiB, o.PullLayers)
	if err != nil {
		return nil, err
	}
	bigRef, err := oci.PushImage(reg, "bench/bulk", big)
	if err != nil {
		return nil, err
	}
	res.Pull.BuildSeconds = time.Since(tb).Seconds()
	res.Pull.Files, res.Pull.Layers, res.Pull.Reps = files, o.PullLayers, o.PullReps
	var pulls []time.Duration
	for i := range o.PullReps {
		cache := filepath.Join(dir, fmt.Sprintf("pull-%d", i))
		s, err := oci.NewStore(cache, oci.RegistryOptions{}, oci.UnpackLimits{})
		if err != nil {
			return nil, err
		}
		t0 := time.Now()
		im, _, err := s.Get(ctx, bigRef)
		d := time.Since(t0)
		s.Close()
		if err != nil {
			return nil, err
		}
		res.Pull.CompressedBytes, res.Pull.UnpackedBytes = im.CompressedBytes, im.UnpackedBytes
		pulls = append(pulls, d)
		progress("pull: %d/%d in %.2fs", i+1, o.PullReps, d.Seconds())
		os.RemoveAll(cache)
	}
	p50 := percentile(pulls, 50)
	res.Pull.P50Seconds, res.Pull.MinSeconds = p50.Seconds(), percentile(pulls, 0).Seconds()
	res.Pull.CompressedMBps = float64(res.Pull.CompressedBytes) / 1e6 / p50.Seconds()
	res.Pull.UnpackedMBps = float64(res.Pull.UnpackedBytes) / 1e6 / p50.Seconds()
	return res, nil
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

// serveRegistry serves an in-memory registry on 127.0.0.1.
func serveRegistry() (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	go srv.Serve(l)
	return l.Addr().String(), func() { srv.Close() }, nil
}

// imageOf makes a one-layer linux image of files (path → contents, all
// executable) with entrypoint.
func imageOf(files map[string][]byte, entrypoint []string) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for n, b := range files {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		tw.Write(b)
	}
	tw.Close()
	return withLayers([][]byte{buf.Bytes()}, entrypoint)
}

func withLayers(tars [][]byte, entrypoint []string) (v1.Image, error) {
	img := empty.Image
	for _, t := range tars {
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(t)), nil }, tarball.WithCompressedCaching)
		if err != nil {
			return nil, err
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint = entrypoint
	return mutate.ConfigFile(img, cf)
}

// bulkImage makes an image of layers layers holding mib MiB of 1 MiB
// files: half of each file random bytes, half English-like text, so that
// it compresses about as much as real images do.
func bulkImage(mib, layers int) (v1.Image, int, error) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("the provider pulls an image by digest verifies every layer and unpacks it into a content addressed cache for later jobs")
	var tars [][]byte
	files := 0
	for l := range layers {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		per := mib / layers
		if l < mib%layers {
			per++
		}
		for f := range per {
			data := make([]byte, 1<<20)
			half := len(data) / 2
			for i := 0; i < half; i += 8 {
				v := rng.Uint64()
				for j := 0; j < 8 && i+j < half; j++ {
					data[i+j] = byte(v >> (8 * j))
				}
			}
			for i := half; i < len(data); {
				w := words[rng.IntN(len(words))]
				i += copy(data[i:], w+" ")
			}
			name := fmt.Sprintf("data/layer%d/dir%02d/file%03d.bin", l, f%16, f)
			if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
				return nil, 0, err
			}
			tw.Write(data)
			files++
		}
		tw.Close()
		tars = append(tars, buf.Bytes())
	}
	img, err := withLayers(tars, []string{"/bin/true"})
	return img, files, err
}
