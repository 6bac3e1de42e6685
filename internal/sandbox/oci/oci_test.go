package oci_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
	"github.com/gpunet/gpunet/internal/sandbox/oci/ocitest"
)

// One executor, one registry and one image for the whole test binary:
// probing and building take a while.
var shared struct {
	once sync.Once
	dir  string
	ex   *oci.Executor
	err  error
	reg  string
	ref  string // the jobprog image
	prog []byte
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.ex != nil {
		shared.ex.Close()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// setup returns the shared executor and the jobprog image's reference,
// skipping (or, with CI=true, failing) when runc cannot run here.
func setup(t *testing.T) (*oci.Executor, string) {
	t.Helper()
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "oci-test-")
		if shared.err != nil {
			return
		}
		shared.ex, shared.err = oci.New(context.Background(), oci.Options{Dir: shared.dir, Pids: 64})
	})
	ocitest.RequireRunc(t, nil, shared.err)
	if shared.ref == "" {
		shared.prog = ocitest.BuildGo(t, "testdata/jobprog")
		shared.reg = registryForShared(t)
		shared.ref = ocitest.Push(t, shared.reg, "test/jobprog", ocitest.ProgramImage(t, shared.prog, "hello"))
	}
	return shared.ex, shared.ref
}

// registryForShared serves a registry for the rest of the test binary
// (ocitest.Registry's would close at the end of the test that made it).
func registryForShared(t *testing.T) string {
	return ocitest.Registry(&keepTB{T: t}, nil)
}

// keepTB is a testing.TB whose cleanups never run, for fixtures shared by
// the whole binary.
type keepTB struct{ *testing.T }

func (k *keepTB) Cleanup(func()) {}

// jobUID is the uid (and gid) a job runs as: nobody, or, for a rootless
// agent, root inside its user namespace (the agent's own uid outside).
func jobUID(ex *oci.Executor) string {
	if ex.Capabilities().Rootless {
		return "0"
	}
	return "65534"
}

type job struct {
	args    []string
	command []string
	env     map[string]string
	outputs []string
	inputs  map[string]string
	limits  sandbox.Limits
	image   string
	network bool
}

func runJob(t *testing.T, ctx context.Context, ex *oci.Executor, ref string, j job) (*sandbox.Result, string) {
	t.Helper()
	work := filepath.Join(t.TempDir(), "root")
	if err := os.MkdirAll(work, 0o700); err != nil {
		t.Fatal(err)
	}
	for p, content := range j.inputs {
		host := filepath.Join(work, filepath.FromSlash(p))
		os.MkdirAll(filepath.Dir(host), 0o700)
		if err := os.WriteFile(host, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if j.limits.Timeout == 0 {
		j.limits.Timeout = 30 * time.Second
	}
	if j.outputs == nil {
		j.outputs = []string{"/out"}
	}
	if j.image != "" {
		ref = j.image
	}
	var logs bytes.Buffer
	res, err := ex.Run(ctx, &sandbox.Job{
		ID: t.Name(), Image: ref, Command: j.command, Args: j.args, Env: j.env, WorkDir: work,
		Outputs: j.outputs, Limits: j.limits, Network: j.network,
	}, &syncBuffer{b: &logs})
	if err != nil {
		t.Fatalf("Run: %v\nlogs:\n%s", err, logs.String())
	}
	t.Cleanup(func() { os.RemoveAll(res.OutputDir) })
	return res, logs.String()
}

type syncBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestHello runs the image's default command: it exits 0, its output is in
// the logs, and the pull is reported apart from the run.
func TestHello(t *testing.T) {
	ex, ref := setup(t)
	res, logs := runJob(t, t.Context(), ex, ref, job{})
	if res.Failed || res.ExitCode != 0 || res.Reason != "exited 0" {
		t.Fatalf("result %+v\nlogs:\n%s", res, logs)
	}
	if !strings.Contains(logs, "hello from a container, uid "+jobUID(ex)) {
		t.Errorf("logs:\n%s", logs)
	}
	if res.Metered <= 0 || res.Metered > 10*time.Second {
		t.Errorf("Metered = %s", res.Metered)
	}
}

// TestConfinement: the job runs as nobody with no capabilities,
// no-new-privileges and seccomp, sees the environment it was given, its
// hostname, and cannot write to its rootfs.
func TestConfinement(t *testing.T) {
	ex, ref := setup(t)
	res, logs := runJob(t, t.Context(), ex, ref, job{args: []string{"whoami"}, env: map[string]string{"GREETING": "from the job"}})
	if res.Failed {
		t.Fatalf("result %+v\n%s", res, logs)
	}
	id := jobUID(ex)
	want := []string{
		"uid " + id + "\n", "gid " + id + "\n", "CapEff: 0000000000000000", "CapBnd: 0000000000000000", "NoNewPrivs: 1",
		"hostname job", "env NVIDIA_VISIBLE_DEVICES=void", "env HOME=/tmp", "env GREETING=from the job", "cwd /",
		"rootfs read-only:",
	}
	if ex.Capabilities().Enforce.Seccomp {
		want = append(want, "Seccomp: 2")
	}
	for _, w := range want {
		if !strings.Contains(logs, w) {
			t.Errorf("logs lack %q:\n%s", w, logs)
		}
	}
}

// TestInputsAndOutputs: inputs appear at their guest paths, outputs written
// by the job come back, and an input does not hide the image's own
// directory it lands in.
func TestInputsAndOutputs(t *testing.T) {
	ex, ref := setup(t)
	res, logs := runJob(t, t.Context(), ex, ref, job{
		command: []string{"/job", "write", "/out/result"},
		inputs:  map[string]string{"/in/a.txt": "alpha", "/in/sub/b.txt": "beta"},
		outputs: []string{"/out/result"},
	})
	if res.Failed {
		t.Fatalf("result %+v\n%s", res, logs)
	}
	for name, want := range map[string]string{"a.txt": "ALPHA", "sub/b.txt": "BETA", "summary.txt": "2 files: a.txt,sub/b.txt\n"} {
		got, err := os.ReadFile(filepath.Join(res.OutputDir, "out", "result", name))
		if err != nil || string(got) != want {
			t.Errorf("output %s = %q, %v; want %q", name, got, err, want)
		}
	}
	// An input inside the image's /app leaves /app's own files visible.
	res, logs = runJob(t, t.Context(), ex, ref, job{
		args:   []string{"cat", "/app/config.json", "/app/README"},
		inputs: map[string]string{"/app/config.json": `{"k":1}`},
	})
	if res.Failed || !strings.Contains(logs, `cat /app/config.json: "{\"k\":1}"`) || !strings.Contains(logs, `cat /app/README: "the image's own /app\n"`) {
		t.Errorf("result %+v\n%s", res, logs)
	}
}

// TestOutputMissing: a job that exits 0 without writing its output fails,
// naming it.
func TestOutputMissing(t *testing.T) {
	ex, ref := setup(t)
	res, logs := runJob(t, t.Context(), ex, ref, job{outputs: []string{"/out/never"}})
	if !res.Failed || res.Reason != "output /out/never missing" {
		t.Fatalf("result %+v\n%s", res, logs)
	}
}

// TestExitCodeAndBadCommand: a non-zero exit is reported as such; a
// command that does not exist is a failed start, not a provider error.
func TestExitCodeAndBadCommand(t *testing.T) {
	ex, ref := setup(t)
	res, logs := runJob(t, t.Context(), ex, ref, job{args: []string{"exit", "3"}})
	if !res.Failed || res.ExitCode != 3 || res.Reason != "exited 3" {
		t.Errorf("result %+v\n%s", res, logs)
	}
	res, logs = runJob(t, t.Context(), ex, ref, job{command: []string{"/no/such/program"}})
	if !res.Failed || res.ExitCode != -1 || !strings.Contains(res.Reason, "container did not start") || !strings.Contains(res.Reason, "/no/such/program") {
		t.Errorf("result %+v\n%s", res, logs)
	}
}

// TestCannotReadHostFiles: the job sees its image, not the host: host
// files outside the rootfs, by absolute path or by climbing out of its
// work directory, do not exist for it.
func TestCannotReadHostFiles(t *testing.T) {
	ex, ref := setup(t)
	secret := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secret, []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	paths := []string{secret, "/etc/hostname", "/etc/shadow", "/in/../../../../" + secret, "/proc/1/root" + secret, "/proc/kcore"}
	res, logs := runJob(t, t.Context(), ex, ref, job{args: append([]string{"cat"}, paths...), inputs: map[string]string{"/in/x": "x"}})
	if res.Failed {
		t.Fatalf("result %+v\n%s", res, logs)
	}
	if strings.Contains(logs, "host secret") {
		t.Fatalf("the job read a host file:\n%s", logs)
	}
	for _, p := range paths {
		if !strings.Contains(logs, "cat "+p+": error:") && !strings.Contains(logs, "cat "+p+": \"\"") {
			t.Errorf("reading %s did not fail:\n%s", p, logs)
		}
	}
}

// TestJoinNetNS: a job given a network namespace the executor made
// (NewNetNS) joins it: it sees what its caller put there (a
// TUN interface, as a gang's gpunet0 is) beside loopback, and nothing of
// the host's; the pin goes with release.
func TestJoinNetNS(t *testing.T) {
	ex, ref := setup(t)
	if ex.Capabilities().Rootless {
		if _, _, err := ex.NewNetNS("x"); err == nil {
			t.Fatal("a rootless executor made a network namespace to join")
		}
		t.Skip("a rootless executor makes no network namespace to join")
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("nsenter is missing")
		}
		t.Skip("nsenter is missing")
	}
	path, release, err := ex.NewNetNS("join-test")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(nsenter, "--net="+path, "ip", "tuntap", "add", "dev", "gtest0", "mode", "tun").CombinedOutput(); err != nil {
		release()
		t.Fatalf("add an interface to the namespace: %v: %s", err, out)
	}
	work := filepath.Join(t.TempDir(), "root")
	os.MkdirAll(work, 0o700)
	var logs bytes.Buffer
	res, err := ex.Run(t.Context(), &sandbox.Job{
		ID: t.Name(), Image: ref, Args: []string{"net"}, WorkDir: work, NetNS: path,
		Outputs: []string{"/out"}, Limits: sandbox.Limits{Timeout: 30 * time.Second},
	}, &syncBuffer{b: &logs})
	if err != nil {
		release()
		t.Fatal(err)
	}
	os.RemoveAll(res.OutputDir)
	if res.Failed || !strings.Contains(logs.String(), "interfaces lo,gtest0\n") {
		t.Errorf("result %+v; want the job to see lo and gtest0 only:\n%s", res, logs.String())
	}
	// Asking for the host's network as well is refused in words.
	res, err = ex.Run(t.Context(), &sandbox.Job{
		ID: t.Name() + "-net", Image: ref, Args: []string{"net"}, WorkDir: work, NetNS: path, Network: true,
		Outputs: []string{"/out"}, Limits: sandbox.Limits{Timeout: 30 * time.Second},
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(res.OutputDir)
	if !res.Failed || !strings.Contains(res.Reason, "gang") {
		t.Errorf("a job joining a namespace and asking for network: %+v", res)
	}
	release()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the pin %s is still there after release: %v", path, err)
	}
}

// TestNoNetwork: the job cannot reach a server on the host's loopback or
// on its other addresses; it has only a loopback interface.
func TestNoNetwork(t *testing.T) {
	ex, ref := setup(t)
	var addrs []string
	for _, host := range append([]string{"127.0.0.1"}, hostIPs()...) {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			continue
		}
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		addrs = append(addrs, l.Addr().String())
	}
	// The host can reach them; the job must not.
	for _, a := range addrs {
		c, err := net.DialTimeout("tcp", a, time.Second)
		if err != nil {
			t.Fatalf("the host cannot reach its own %s: %v", a, err)
		}
		c.Close()
	}
	res, logs := runJob(t, t.Context(), ex, ref, job{args: append([]string{"net"}, addrs...)})
	if res.Failed {
		t.Fatalf("result %+v\n%s", res, logs)
	}
	for _, a := range addrs {
		if !strings.Contains(logs, "net "+a+": error:") {
			t.Errorf("the job reached %s:\n%s", a, logs)
		}
	}
	if !strings.Contains(logs, "interfaces lo\n") {
		t.Errorf("the job has more than loopback:\n%s", logs)
	}
}

func hostIPs() []string {
	var out []string
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
			out = append(out, ipn.IP.String())
		}
	}
	return out
}

// TestMemoryLimit: a job that allocates past its limit is stopped and
// reported out of memory; the executor goes on running jobs.
func TestMemoryLimit(t *testing.T) {
	ex, ref := setup(t)
	res, logs := runJob(t, t.Context(), ex, ref, job{args: []string{"mem", "512"}, limits: sandbox.Limits{MemoryBytes: 64 << 20}})
	if !res.Failed || strings.Contains(logs, "allocated 512 MiB") {
		t.Fatalf("the job went past its memory limit: %+v\n%s", res, logs)
	}
	if ex.Capabilities().Enforce.Cgroups {
		if res.Reason != "out of memory (limit 64 MiB)" {
			t.Errorf("Reason = %q, want out of memory", res.Reason)
		}
		if res.PeakMemoryBytes == 0 || res.PeakMemoryBytes > 64<<20+1<<20 {
			t.Errorf("PeakMemoryBytes = %d", res.PeakMemoryBytes)
		}
	}
	// Within the limit, the same program is fine.
	res, logs = runJob(t, t.Context(), ex, ref, job{args: []string{"mem", "16"}, limits: sandbox.Limits{MemoryBytes: 64 << 20}})
	if res.Failed || !strings.Contains(logs, "allocated 16 MiB") {
		t.Errorf("result %+v\n%s", res, logs)
	}
}

// TestForkBomb: a job that starts processes without end hits its pids
// limit (64 here), no more processes run after it, and the executor goes
// on.
func TestForkBomb(t *testing.T) {
	ex, ref := setup(t)
	res, logs := runJob(t, t.Context(), ex, ref, job{args: []string{"fork"}, limits: sandbox.Limits{MemoryBytes: 512 << 20}})
	if res.Failed || !strings.Contains(logs, "fork refused after") {
		t.Fatalf("the fork bomb was not contained: %+v\n%s", res, logs)
	}
	if ex.Capabilities().Enforce.Cgroups && !strings.Contains(logs, "reached its limit of 64 processes") {
		t.Errorf("no note of the pids limit:\n%s", logs)
	}
	assertNoJobProcesses(t)
	res, logs = runJob(t, t.Context(), ex, ref, job{})
	if res.Failed {
		t.Errorf("after the fork bomb: %+v\n%s", res, logs)
	}
}

// assertNoJobProcesses checks that no process runs the test program
// (/job) any more.
func assertNoJobProcesses(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := jobProcesses()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d job processes still running: %v", len(left), left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func jobProcesses() []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if argv0, _, _ := bytes.Cut(cmd, []byte{0}); string(argv0) == "/job" || string(argv0) == "/proc/self/exe" {
			out = append(out, e.Name()+":"+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return out
}

// TestCancelKillsContainer: cancelling a running job returns promptly
// with Reason "cancelled", and neither the container nor its processes
// are left.
func TestCancelKillsContainer(t *testing.T) {
	ex, ref := setup(t)
	ctx, cancel := context.WithCancel(t.Context())
	work := filepath.Join(t.TempDir(), "root")
	os.MkdirAll(work, 0o700)
	logs := &syncBuffer{b: &bytes.Buffer{}}
	type ret struct {
		res *sandbox.Result
		err error
	}
	done := make(chan ret, 1)
	go func() {
		res, err := ex.Run(ctx, &sandbox.Job{ID: "cancel", Image: ref, Args: []string{"sleep"}, WorkDir: work, Outputs: []string{"/out"}, Limits: sandbox.Limits{Timeout: time.Minute}}, logs)
		done <- ret{res, err}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(logs.String(), "sleeping") {
		if time.Now().After(deadline) {
			t.Fatalf("the job never started:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(jobProcesses()) == 0 {
		t.Fatal("no job process seen while it runs (the check below would prove nothing)")
	}
	t0 := time.Now()
	cancel()
	var r ret
	select {
	case r = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if r.err != nil || r.res.Reason != sandbox.ReasonCancelled || !r.res.Failed {
		t.Fatalf("after cancel: %+v, %v", r.res, r.err)
	}
	os.RemoveAll(r.res.OutputDir)
	t.Logf("cancelled in %s", time.Since(t0))
	assertNoJobProcesses(t)
	assertNoContainers(t)
}

// TestTimeout: a job running past its timeout is killed and reported.
func TestTimeout(t *testing.T) {
	ex, ref := setup(t)
	res, logs := runJob(t, t.Context(), ex, ref, job{args: []string{"sleep"}, limits: sandbox.Limits{Timeout: 1500 * time.Millisecond}})
	if !res.Failed || res.Reason != "timed out after 1.5s" {
		t.Fatalf("result %+v\n%s", res, logs)
	}
	assertNoJobProcesses(t)
	assertNoContainers(t)
}

// assertNoContainers checks that runc has no container of the shared
// executor left.
func assertNoContainers(t *testing.T) {
	t.Helper()
	runc, err := exec.LookPath("runc")
	if err != nil {
		runc = "/usr/sbin/runc"
	}
	out, err := exec.Command(runc, "--root", filepath.Join(shared.dir, "runc"), "list", "-q").Output()
	if err != nil {
		t.Fatalf("runc list: %v", err)
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Fatalf("containers left: %s", s)
	}
}

// TestImageCachedAndPullNotBilled: the first run of an image pulls it
// (CompileTime, not Metered), later runs reuse the cached rootfs.
func TestImageCachedAndPullNotBilled(t *testing.T) {
	ex, _ := setup(t)
	reg := ocitest.Registry(t, nil)
	// Another config than the shared image's, so another digest.
	ref := ocitest.Push(t, reg, "test/cached", ocitest.ProgramImage(t, shared.prog, "hello", "cached"))
	res, logs := runJob(t, t.Context(), ex, ref, job{})
	if res.Failed || !strings.Contains(logs, "pulled in") || strings.Contains(logs, "(cached)") {
		t.Fatalf("first run: %+v\n%s", res, logs)
	}
	if res.CompileTime <= 0 {
		t.Errorf("CompileTime = %s", res.CompileTime)
	}
	if _, ok := ex.Store().Lookup(ref); !ok {
		t.Fatal("not cached after the first run")
	}
	res, logs = runJob(t, t.Context(), ex, ref, job{})
	if res.Failed || !strings.Contains(logs, "(cached)") {
		t.Fatalf("second run: %+v\n%s", res, logs)
	}
}

// TestPullFailureIsTheJobs: an image that is not in the registry fails the
// job, nothing billed, with fixed words (issue 27): the reason (on chain)
// and the job's log (its owner's) name the image and the cause, and
// nothing of what the registry answered, which the provider's log has.
func TestPullFailureIsTheJobs(t *testing.T) {
	setup(t)
	var provLog syncBuffer
	provLog.b = &bytes.Buffer{}
	ex, err := oci.New(t.Context(), oci.Options{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&provLog, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	const secret = "SECRET-of-the-registry-5d1e"
	reg := ocitest.Registry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.Contains(r.URL.Path, "/manifests/") {
				w.WriteHeader(http.StatusNotFound)
				fmt.Fprintf(w, `{"errors":[{"code":"MANIFEST_UNKNOWN","message":%q}]}`, secret)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	ref := reg + "/nothing/here@sha256:" + strings.Repeat("ab", 32)
	res, logs := runJob(t, t.Context(), ex, "", job{image: ref})
	want := "image " + ref + " could not be pulled: not found"
	if !res.Failed || res.Reason != want || res.Metered != 0 {
		t.Fatalf("result %+v, want failed with %q\n%s", res, want, logs)
	}
	if !strings.Contains(logs, want) || strings.Contains(logs, secret) {
		t.Errorf("the job's log should say %q and nothing the registry said:\n%s", want, logs)
	}
	if !strings.Contains(provLog.String(), secret) {
		t.Errorf("the provider's log does not say what the registry answered:\n%s", provLog.String())
	}
}

// gpuExecutor is an executor of its own whose GPUs come from gen.
func gpuExecutor(t *testing.T, gen oci.CDIGenerator) *oci.Executor {
	t.Helper()
	setup(t) // skips where runc cannot run
	ex, err := oci.New(t.Context(), oci.Options{Dir: t.TempDir(), Pids: 64, CDI: gen})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	return ex
}

// TestGPUsWithoutDriver: on a host without an NVIDIA driver the gpu
// capability says so, and a job that was given GPUs fails with that
// reason rather than running without them.
func TestGPUsWithoutDriver(t *testing.T) {
	lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	ex := gpuExecutor(t, oci.NVCDI{NVML: lib})
	const why = "no NVIDIA driver (libnvidia-ml.so.1 not found)"
	if got, want := ex.Capabilities().GPU, "unavailable: "+why+"; oci jobs that ask for GPUs fail"; got != want {
		t.Errorf("gpu line %q, want %q", got, want)
	}
	if ex.Capabilities().GPUSpec != "" {
		t.Errorf("a GPU spec %s without GPUs", ex.Capabilities().GPUSpec)
	}
	_, ref := setup(t)
	work := t.TempDir()
	res, err := ex.Run(t.Context(), &sandbox.Job{ID: "gpu", Image: ref, WorkDir: work, Outputs: []string{"/out"}, GPUs: []string{"GPU-0"}, Limits: sandbox.Limits{Timeout: time.Minute}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(res.OutputDir)
	if !res.Failed || !strings.HasSuffix(res.Reason, why) {
		t.Fatalf("result %+v", res)
	}
}

// TestGPUJobSeesOnlyItsGPU: with the fake two-GPU host, a job given GPU 1
// by UUID finds /dev/nvidia1, /dev/nvidiactl and /dev/nvidia-uvm but not
// /dev/nvidia0, the driver's libraries under their own names, SONAMEs and
// development names, and LD_LIBRARY_PATH naming their directory; a job
// given no GPU finds none of it. The executor wrote the spec it uses to
// Dir/cdi/nvidia.yaml, and its gpu line says where the spec came from.
func TestGPUJobSeesOnlyItsGPU(t *testing.T) {
	fx := oci.NewGPUFixture(t)
	ex := gpuExecutor(t, fx)
	_, ref := setup(t)
	caps := ex.Capabilities()
	if !strings.HasPrefix(caps.GPU, "CDI spec generated by the test's spec for driver 580.65.06: 2 GPUs (4 device names), in ") || !strings.Contains(caps.GPU, "each job sees only its assigned GPUs") {
		t.Errorf("gpu line %q", caps.GPU)
	}
	if b, err := os.ReadFile(caps.GPUSpec); err != nil || !strings.Contains(string(b), "libcuda.so.1") || strings.Contains(string(b), "path: /usr/bin/nvidia-cdi-hook") {
		t.Errorf("the spec written, %s: %v\n%s", caps.GPUSpec, err, b)
	}

	lib := oci.FixtureLibDir
	run := func(gpus []string, args ...string) string {
		t.Helper()
		work := filepath.Join(t.TempDir(), "root")
		os.MkdirAll(work, 0o700)
		var logs bytes.Buffer
		res, err := ex.Run(t.Context(), &sandbox.Job{ID: t.Name(), Image: ref, Args: args, WorkDir: work, Outputs: []string{"/out"}, GPUs: gpus, Limits: sandbox.Limits{Timeout: 30 * time.Second}}, &syncBuffer{b: &logs})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(res.OutputDir) })
		if res.Failed {
			t.Fatalf("%+v\n%s", res, logs.String())
		}
		return logs.String()
	}
	logs := run([]string{oci.FixtureGPU1}, "devices")
	devs := strings.Fields(lineAfter(logs, "devices "))
	for _, want := range []string{"nvidia1", "nvidiactl", "nvidia-uvm"} {
		if !slices.Contains(devs, want) {
			t.Errorf("the job's /dev has no %s: %v", want, devs)
		}
	}
	if slices.Contains(devs, "nvidia0") {
		t.Errorf("the job given GPU 1 sees nvidia0: %v", devs)
	}
	logs = run([]string{oci.FixtureGPU1}, "ls", lib)
	files := strings.Fields(lineAfter(logs, "ls "+lib+": "))
	for _, want := range []string{oci.FixtureLibcuda, "libcuda.so.1", "libcuda.so", oci.FixturePTXJIT, "libnvidia-ptxjitcompiler.so.1", "libnvidia-ptxjitcompiler.so"} {
		if !slices.Contains(files, want) {
			t.Errorf("no %s in the job's %s: %v", want, lib, files)
		}
	}
	logs = run([]string{"1"}, "getenv", "LD_LIBRARY_PATH", "NVIDIA_VISIBLE_DEVICES")
	if !strings.Contains(logs, "getenv LD_LIBRARY_PATH="+lib+"\n") || !strings.Contains(logs, "getenv NVIDIA_VISIBLE_DEVICES=void\n") {
		t.Errorf("env:\n%s", logs)
	}
	// The SONAME is the driver's library itself: the same bytes.
	logs = run([]string{"1"}, "cat", lib+"/libcuda.so.1")
	want, _ := os.ReadFile(filepath.Join(fx.Root, lib, oci.FixtureLibcuda))
	if !strings.Contains(logs, fmt.Sprintf("%q", want)) {
		t.Errorf("libcuda.so.1 in the job is not the driver's libcuda.so.580.65.06")
	}

	logs = run(nil, "devices")
	if strings.Contains(logs, "nvidia") {
		t.Errorf("a job without GPUs sees %s", lineAfter(logs, "devices "))
	}
	logs = run(nil, "ls", lib)
	if !strings.Contains(logs, "error") {
		t.Errorf("a job without GPUs has the driver's libraries: %s", logs)
	}
}

// TestGPUJobGlibcFindsLibcuda: in an image with glibc (this machine's
// dynamic linker and libc), the linker finds libcuda.so.1 by name, as a
// CUDA program's dlopen("libcuda.so.1") does, though the library sits in a
// directory glibc does not search by default and no ldconfig ran: through
// the SONAME mount and LD_LIBRARY_PATH.
func TestGPUJobGlibcFindsLibcuda(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the glibc image is assembled from this machine's amd64 files")
	}
	files := map[string]ocitest.File{}
	for _, p := range []string{"/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/libc.so.6", "/usr/bin/true"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Skipf("no glibc to build the image from: %v", err)
		}
		files[p] = ocitest.File{Data: b, Mode: 0o755}
	}
	fx := oci.NewGPUFixture(t)
	ex := gpuExecutor(t, fx)
	_, _ = setup(t)
	img, err := mutate.AppendLayers(ocitest.ProgramImage(t, shared.prog), ocitest.Layer(t, files))
	if err != nil {
		t.Fatal(err)
	}
	ref := ocitest.Push(t, shared.reg, "test/glibc", img)
	for _, tc := range []struct {
		gpus []string
		want string
	}{
		{[]string{"0"}, "libcuda.so.1 => " + oci.FixtureLibDir + "/libcuda.so.1 ("},
		{nil, "libcuda.so.1' from LD_PRELOAD cannot be preloaded"},
	} {
		work := filepath.Join(t.TempDir(), "root")
		os.MkdirAll(work, 0o700)
		var logs bytes.Buffer
		// The linker loads LD_PRELOAD's names the way dlopen loads a bare
		// name; LD_TRACE_LOADED_OBJECTS prints where it found each (ldd).
		res, err := ex.Run(t.Context(), &sandbox.Job{
			ID: t.Name(), Image: ref, Command: []string{"/usr/bin/true"}, WorkDir: work, Outputs: []string{"/out"}, GPUs: tc.gpus,
			Env:    map[string]string{"LD_PRELOAD": "libcuda.so.1", "LD_TRACE_LOADED_OBJECTS": "1"},
			Limits: sandbox.Limits{Timeout: 30 * time.Second},
		}, &syncBuffer{b: &logs})
		if err != nil {
			t.Fatal(err)
		}
		os.RemoveAll(res.OutputDir)
		if res.Failed || !strings.Contains(logs.String(), tc.want) {
			t.Errorf("GPUs %v: %+v, want %q in\n%s", tc.gpus, res, tc.want, logs.String())
		}
		t.Logf("GPUs %v:\n%s", tc.gpus, logs.String())
	}
}

// lineAfter is the rest of the first line of logs that starts with prefix.
func lineAfter(logs, prefix string) string {
	for _, l := range strings.Split(logs, "\n") {
		if strings.HasPrefix(l, prefix) {
			return strings.TrimPrefix(l, prefix)
		}
	}
	return ""
}

// TestInvalidJobs: malformed jobs are the caller's error.
func TestInvalidJobs(t *testing.T) {
	ex, _ := setup(t)
	work := t.TempDir()
	for _, img := range []string{"", "alpine:3", "alpine@sha256:abc"} {
		_, err := ex.Run(t.Context(), &sandbox.Job{ID: "x", Image: img, WorkDir: work, Outputs: []string{"/out"}, Limits: sandbox.Limits{Timeout: time.Second}}, nil)
		if !errors.Is(err, sandbox.ErrInvalidJob) {
			t.Errorf("image %q: err %v, want ErrInvalidJob", img, err)
		}
	}
}

// TestReservedAndRootOutputs: outputs the container cannot offer fail the
// job with a reason.
func TestReservedAndRootOutputs(t *testing.T) {
	ex, ref := setup(t)
	for _, tc := range []struct{ out, want string }{
		{"/", "output / is the image's root"},
		{"/proc/x", "under /proc"},
	} {
		res, logs := runJob(t, t.Context(), ex, ref, job{outputs: []string{tc.out}})
		if !res.Failed || !strings.Contains(res.Reason, tc.want) {
			t.Errorf("output %s: %+v\n%s", tc.out, res, logs)
		}
	}
}

// TestCapabilitiesLines: every capability line is there and says
// something.
func TestCapabilitiesLines(t *testing.T) {
	ex, _ := setup(t)
	lines := ex.Capabilities().Lines()
	for _, prefix := range []string{"runtime: ", "memory limit: ", "cpu limit: ", "pids limit: ", "seccomp: ", "rootfs: ", "user: ", "network: ", "disk: ", "gpu: ", "pause: "} {
		found := false
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) && len(l) > len(prefix)+3 {
				found = true
			}
		}
		if !found {
			t.Errorf("no %q line in %q", prefix, lines)
		}
	}
	t.Log(strings.Join(lines, "\n"))
}

// TestNoUnassignedGPUs: on a machine with NVIDIA GPUs, a job that was not
// assigned any sees no GPU device and cannot open the host's.
func TestNoUnassignedGPUs(t *testing.T) {
	ex, ref := setup(t)
	if _, err := os.Stat("/dev/nvidiactl"); err != nil {
		t.Skip("no NVIDIA GPU on this machine (/dev/nvidiactl)")
	}
	res, logs := runJob(t, t.Context(), ex, ref, job{args: []string{"devices"}})
	if res.Failed || !strings.Contains(logs, "devices ") || strings.Contains(logs, "nvidia") {
		t.Fatalf("a job without GPUs sees: %+v\n%s", res, logs)
	}
	// Even through the host's /proc, the device nodes are out of reach.
	res, logs = runJob(t, t.Context(), ex, ref, job{args: []string{"cat", "/dev/nvidiactl", "/proc/1/root/dev/nvidiactl"}})
	if res.Failed || strings.Count(logs, ": error:") != 2 {
		t.Fatalf("opening the host's GPU: %+v\n%s", res, logs)
	}
	t.Log(logs)
}

// TestStaleContainersRemoved: an agent killed with SIGKILL while a job
// runs leaves its container running; the next executor on the same
// directory kills and removes it, and unmounts its rootfs.
func TestStaleContainersRemoved(t *testing.T) {
	if os.Getenv("OCI_HELPER_DIR") != "" {
		t.Skip("helper process")
	}
	_, ref := setup(t)
	dir := t.TempDir()
	helper := exec.Command(os.Args[0], "-test.run=^TestHelperRunForever$", "-test.count=1")
	helper.Env = append(os.Environ(), "OCI_HELPER_DIR="+dir, "OCI_HELPER_REF="+ref)
	out := &syncBuffer{b: &bytes.Buffer{}}
	helper.Stdout, helper.Stderr = out, out
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "sleeping") {
		if time.Now().After(deadline) {
			helper.Process.Kill()
			t.Fatalf("the helper's job never started:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	helper.Process.Kill()
	helper.Wait()
	if len(jobProcesses()) == 0 {
		t.Fatal("the killed agent's job is not running (the test would prove nothing)")
	}
	ex2, err := oci.New(t.Context(), oci.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer ex2.Close()
	assertNoJobProcesses(t)
	runc, _ := exec.LookPath("runc")
	if runc == "" {
		runc = "/usr/sbin/runc"
	}
	if l, _ := exec.Command(runc, "--root", filepath.Join(dir, "runc"), "list", "-q").Output(); strings.TrimSpace(string(l)) != "" {
		t.Errorf("containers left: %s", l)
	}
	if m, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(m), dir) {
		t.Errorf("mounts left under %s", dir)
	}
}

// TestHelperRunForever is TestStaleContainersRemoved's agent: it runs a
// job that never ends until it is killed.
func TestHelperRunForever(t *testing.T) {
	dir, ref := os.Getenv("OCI_HELPER_DIR"), os.Getenv("OCI_HELPER_REF")
	if dir == "" {
		t.Skip("run by TestStaleContainersRemoved")
	}
	ex, err := oci.New(t.Context(), oci.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	os.MkdirAll(work, 0o700)
	ex.Run(t.Context(), &sandbox.Job{ID: "forever", Image: ref, Args: []string{"sleep"}, WorkDir: work, Outputs: []string{"/out"}, Limits: sandbox.Limits{Timeout: time.Hour}}, os.Stdout)
}

// TestNetworkOptIn: a job that asks for network access gets the host's
// network from an executor whose provider allows it, and is refused by
// one that does not.
func TestNetworkOptIn(t *testing.T) {
	_, ref := setup(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	open, err := oci.New(t.Context(), oci.Options{Dir: t.TempDir(), Pids: 64, AllowNetwork: true})
	ocitest.RequireRunc(t, nil, err)
	defer open.Close()
	res, logs := runJob(t, t.Context(), open, ref, job{args: []string{"net", l.Addr().String()}, network: true})
	if res.Failed || strings.Contains(logs, "net "+l.Addr().String()+": error:") {
		t.Fatalf("a job allowed the network could not reach %s: %+v\n%s", l.Addr(), res, logs)
	}
	closed, _ := setup(t)
	res, logs = runJob(t, t.Context(), closed, ref, job{args: []string{"net", l.Addr().String()}, network: true})
	if !res.Failed || !strings.Contains(res.Reason, "does not allow") {
		t.Fatalf("a provider that allows no network ran a job asking for it: %+v\n%s", res, logs)
	}
}

// TestRealGPUJob runs containers on the machine's real GPUs, through the
// CDI spec nvcdi generates: a job given GPU 0 sees /dev/nvidia0 and the
// driver's devices but no other GPU's node; glibc (this machine's, in the
// image) finds the real libcuda.so.1 and PTX JIT compiler by name; and a
// program (testdata/cudaprog) dlopens libcuda.so.1, JIT-compiles a PTX
// kernel and runs it. It runs only where GPUNET_REAL_NVML=1 says the
// machine has an NVIDIA GPU and driver; without Go there, OCITEST_PROGRAM
// and OCITEST_CUDA_PROGRAM name jobprog and cudaprog built elsewhere
// (CGO_ENABLED=0 go build ./internal/sandbox/oci/testdata/...).
func TestRealGPUJob(t *testing.T) {
	if os.Getenv("GPUNET_REAL_NVML") != "1" {
		t.Skip("set GPUNET_REAL_NVML=1 on a machine with an NVIDIA GPU and driver")
	}
	ex, ref := setup(t)
	t.Log("gpu: " + ex.Capabilities().GPU)
	if ex.Capabilities().GPUSpec == "" {
		t.Fatal("no GPU spec")
	}
	res, logs := runJobGPUs(t, ex, ref, []string{"0"}, "devices")
	devs := strings.Fields(lineAfter(logs, "devices "))
	if res.Failed || !slices.Contains(devs, "nvidia0") || !slices.Contains(devs, "nvidiactl") || slices.Contains(devs, "nvidia1") {
		t.Errorf("GPU 0's job sees %v (%+v)\n%s", devs, res, logs)
	}
	t.Log(logs)
	if runtime.GOARCH != "amd64" {
		return
	}
	var err error
	files := map[string]ocitest.File{}
	for _, p := range []string{"/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libm.so.6", "/lib/x86_64-linux-gnu/libdl.so.2", "/lib/x86_64-linux-gnu/libpthread.so.0", "/lib/x86_64-linux-gnu/librt.so.1", "/usr/bin/true"} {
		if b, err := os.ReadFile(p); err == nil {
			files[p] = ocitest.File{Data: b, Mode: 0o755}
		}
	}
	var cudaprog []byte
	if p := os.Getenv("OCITEST_CUDA_PROGRAM"); p != "" {
		if cudaprog, err = os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Setenv("OCITEST_PROGRAM", "")
		cudaprog = ocitest.BuildGo(t, "testdata/cudaprog")
	}
	files["/cudaprog"] = ocitest.File{Data: cudaprog, Mode: 0o755}
	img, err := mutate.AppendLayers(ocitest.ProgramImage(t, shared.prog), ocitest.Layer(t, files))
	if err != nil {
		t.Fatal(err)
	}
	gref := ocitest.Push(t, shared.reg, "test/glibc-real", img)
	res, logs = runJobGPUsCmd(t, ex, gref, []string{"0"}, "/cudaprog")
	if res.Failed || !strings.Contains(logs, "cuda: 1 devices") || !strings.Contains(logs, "cuda: PTX kernel ran, wrote 42") {
		t.Errorf("CUDA in a container given GPU 0: %+v\n%s", res, logs)
	}
	t.Log(logs)
	work := filepath.Join(t.TempDir(), "root")
	os.MkdirAll(work, 0o700)
	var buf bytes.Buffer
	r, err := ex.Run(t.Context(), &sandbox.Job{
		ID: t.Name(), Image: gref, Command: []string{"/usr/bin/true"}, WorkDir: work, Outputs: []string{"/out"}, GPUs: []string{"0"},
		Env:    map[string]string{"LD_PRELOAD": "libcuda.so.1 libnvidia-ptxjitcompiler.so.1", "LD_TRACE_LOADED_OBJECTS": "1"},
		Limits: sandbox.Limits{Timeout: 30 * time.Second},
	}, &syncBuffer{b: &buf})
	if err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(r.OutputDir)
	if r.Failed || !strings.Contains(buf.String(), "libcuda.so.1 => /") || !strings.Contains(buf.String(), "libnvidia-ptxjitcompiler.so.1 => /") || strings.Contains(buf.String(), "cannot be preloaded") {
		t.Errorf("glibc and the real driver: %+v\n%s", r, buf.String())
	}
	t.Log(buf.String())
}

func runJobGPUs(t *testing.T, ex *oci.Executor, ref string, gpus []string, args ...string) (*sandbox.Result, string) {
	t.Helper()
	return runJobGPUsCmd(t, ex, ref, gpus, "", args...)
}

func runJobGPUsCmd(t *testing.T, ex *oci.Executor, ref string, gpus []string, cmd string, args ...string) (*sandbox.Result, string) {
	t.Helper()
	var command []string
	if cmd != "" {
		command = []string{cmd}
	}
	work := filepath.Join(t.TempDir(), "root")
	os.MkdirAll(work, 0o700)
	var logs bytes.Buffer
	res, err := ex.Run(t.Context(), &sandbox.Job{ID: t.Name(), Image: ref, Command: command, Args: args, WorkDir: work, Outputs: []string{"/out"}, GPUs: gpus, Limits: sandbox.Limits{Timeout: 60 * time.Second, MemoryBytes: 4 << 30}}, &syncBuffer{b: &logs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(res.OutputDir) })
	return res, logs.String()
}
