package wasm_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/wasm"
)

// tmpRoot holds what the tests of this binary share: guests built from
// source and the shared executor's compilation cache.
var tmpRoot string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gpunet-wasm-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tmpRoot = dir
	code := m.Run()
	if shared.exec != nil {
		shared.exec.Close()
	}
	for _, e := range engineExecs.execs {
		e.Close()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

var shared struct {
	once sync.Once
	exec *wasm.Executor
	err  error
}

// executor is one executor for the whole test binary, so that each module
// is compiled once.
func executor(t testing.TB) *wasm.Executor {
	t.Helper()
	shared.once.Do(func() {
		shared.exec, shared.err = wasm.New(filepath.Join(tmpRoot, "cache"))
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.exec
}

var engineExecs struct {
	mu    sync.Mutex
	execs map[string]*wasm.Executor
}

// engineExecutor is one executor per engine for the whole test binary.
func engineExecutor(t testing.TB, engine string) *wasm.Executor {
	t.Helper()
	if engine == wasm.DefaultEngine {
		return executor(t)
	}
	engineExecs.mu.Lock()
	defer engineExecs.mu.Unlock()
	if e := engineExecs.execs[engine]; e != nil {
		return e
	}
	e, err := wasm.New(filepath.Join(tmpRoot, "cache-"+engine), wasm.WithEngine(engine))
	if err != nil {
		t.Fatal(err)
	}
	if engineExecs.execs == nil {
		engineExecs.execs = map[string]*wasm.Executor{}
	}
	engineExecs.execs[engine] = e
	return e
}

var builds struct {
	mu   sync.Mutex
	done map[string]*build
}

type build struct {
	once sync.Once
	path string
	err  error
}

// buildWASM builds the Go main package pkg for wasip1 (once per test
// binary) and returns the module's path. Tests are skipped without a Go
// toolchain.
func buildWASM(t testing.TB, pkg string) string {
	t.Helper()
	// go test puts its own toolchain's bin first in PATH.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain to build wasip1 guests")
	}
	builds.mu.Lock()
	if builds.done == nil {
		builds.done = make(map[string]*build)
	}
	b, ok := builds.done[pkg]
	if !ok {
		b = &build{}
		builds.done[pkg] = b
	}
	builds.mu.Unlock()
	b.once.Do(func() {
		out := filepath.Join(tmpRoot, "build", strings.NewReplacer("/", "_", ".", "_").Replace(pkg)+".wasm")
		cmd := exec.Command(goTool, "build", "-trimpath", "-ldflags=-s", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("build %s: %v\n%s", pkg, err, msg)
			return
		}
		b.path = out
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// guest is the test program in testdata/guest.
func guest(t testing.TB) string { return buildWASM(t, "./testdata/guest") }

// writeModule writes a hand-assembled module and returns its path.
func writeModule(t testing.TB, bin []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "module.wasm")
	if err := os.WriteFile(p, bin, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// newJob returns a deterministic job of module with an empty work dir of
// its own (base/work), inside a temp dir nothing else uses.
func newJob(t testing.TB, module string, args ...string) *sandbox.Job {
	t.Helper()
	work := filepath.Join(t.TempDir(), "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	return &sandbox.Job{
		ID:            "job-" + t.Name(),
		Module:        module,
		Args:          args,
		WorkDir:       work,
		Limits:        sandbox.Limits{Timeout: 30 * time.Second, MemoryBytes: 128 << 20},
		Deterministic: true,
	}
}

// put writes a file into the job's work dir at guest path p.
func put(t testing.TB, job *sandbox.Job, p string, data []byte) {
	t.Helper()
	host := filepath.Join(job.WorkDir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(host, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a bytes.Buffer safe for the executor's writes and the
// test's reads at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// run runs job on e and returns the result and the logs.
func run(t testing.TB, e sandbox.Executor, job *sandbox.Job) (*sandbox.Result, string) {
	t.Helper()
	return runCtx(t, t.Context(), e, job, nil)
}

func runCtx(t testing.TB, ctx context.Context, e sandbox.Executor, job *sandbox.Job, logs io.Writer) (*sandbox.Result, string) {
	t.Helper()
	var buf syncBuffer
	w := io.Writer(&buf)
	if logs != nil {
		w = io.MultiWriter(&buf, logs)
	}
	res, err := e.Run(ctx, job, w)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.OutputDir == "" {
		t.Fatalf("Run returned no OutputDir: %+v", res)
	}
	t.Cleanup(func() { os.RemoveAll(res.OutputDir) })
	return res, buf.String()
}

// output reads a collected output at guest path p.
func output(t testing.TB, res *sandbox.Result, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(res.OutputDir, filepath.FromSlash(p)))
	if err != nil {
		t.Fatalf("output %s: %v (result %+v)", p, err, res)
	}
	return b
}

// Hand-assembled modules, for what a Go guest cannot do.
var (
	wasmHeader = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	// type 0: func() -> ()
	secType = []byte{0x01, 0x04, 0x01, 0x60, 0x00, 0x00}
	// one function of type 0
	secFunc = []byte{0x03, 0x02, 0x01, 0x00}
	// export func 0 as "_start"
	secExportStart = []byte{0x07, 0x0a, 0x01, 0x06, '_', 's', 't', 'a', 'r', 't', 0x00, 0x00}
	// export func 0 as "_start" and memory 0 as "memory"
	secExportStartMemory = []byte{0x07, 0x13, 0x02,
		0x06, '_', 's', 't', 'a', 'r', 't', 0x00, 0x00,
		0x06, 'm', 'e', 'm', 'o', 'r', 'y', 0x02, 0x00}
	// function bodies: unreachable; or nothing
	secCodeUnreachable = []byte{0x0a, 0x05, 0x01, 0x03, 0x00, 0x00, 0x0b}
	secCodeNop         = []byte{0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b}
	// function body: loop (br 0) end, a tight loop with no calls out
	secCodeLoop = []byte{0x0a, 0x09, 0x01, 0x07, 0x00, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b}
	// one memory of at least 8192 pages (512 MiB)
	secMemoryHuge = []byte{0x05, 0x04, 0x01, 0x00, 0x80, 0x40}
	// import env.f of type 0
	secImportEnv = []byte{0x02, 0x09, 0x01, 0x03, 'e', 'n', 'v', 0x01, 'f', 0x00, 0x00}
)

func module(sections ...[]byte) []byte {
	return bytes.Join(append([][]byte{wasmHeader}, sections...), nil)
}
