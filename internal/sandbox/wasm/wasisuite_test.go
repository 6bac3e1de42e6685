package wasm_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/sandbox/wasm"
)

// wasiSuite is WebAssembly's WASI test suite (wasi-testsuite), its wasip1
// tests, vendored in testdata/wasi-testsuite (see the README there).
const wasiSuite = "testdata/wasi-testsuite"

// wasiExpectedFailures are the suite's tests that fail here on purpose,
// each with the reason. None may be a bug of ours: a test that fails for
// any other reason fails TestWASISuite, and so does one listed here that
// passes.
var wasiExpectedFailures = map[string]string{
	// A job cannot create symbolic links (see package wasi): these tests
	// need one to exist before they test anything else.
	"rust/nofollow_errors":  noSymlinks,
	"rust/path_exists":      noSymlinks,
	"rust/readlink":         noSymlinks,
	"rust/symlink_create":   noSymlinks,
	"rust/symlink_filestat": noSymlinks,
	// The test takes fd 3 for a closed one, as it is where its harness
	// preopens nothing; here fd 3 is always the job's root directory, so
	// shutdown(3) fails with ENOTSOCK, not EBADF (sock_shutdown-not_sock,
	// which checks that, passes).
	"c/sock_shutdown-invalid_fd": "fd 3 is the preopened root here, not a closed fd",
}

const noSymlinks = "creates a symbolic link, which path_symlink refuses by design (EPERM)"

// wasiTestConfig is a test's .json (the suite's "legacy" format).
type wasiTestConfig struct {
	Args     []string          `json:"args"`
	Env      map[string]string `json:"env"`
	Root     string            `json:"root"`
	ExitCode int               `json:"exit_code"`
	Stdout   *string           `json:"stdout"`
	Stderr   *string           `json:"stderr"`
}

// TestWASISuite runs every vendored test of the WASI test suite as a
// deterministic job (the default for wasm jobs), on every engine built in,
// with its root directory as the job's work dir, and checks its exit code
// and output as the suite's runner does.
func TestWASISuite(t *testing.T) {
	mods, err := filepath.Glob(filepath.Join(wasiSuite, "*", "*.wasm"))
	if err != nil || len(mods) < 50 {
		t.Fatalf("%d test modules in %s (%v)", len(mods), wasiSuite, err)
	}
	for _, engine := range wasm.Engines() {
		t.Run(engine, func(t *testing.T) {
			e, err := wasm.New(filepath.Join(tmpRoot, "cache-"+engine), wasm.WithEngine(engine))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.Close() })
			for _, mod := range mods {
				suite := filepath.Base(filepath.Dir(mod))
				name := strings.TrimSuffix(filepath.Base(mod), ".wasm")
				t.Run(suite+"/"+name, func(t *testing.T) {
					t.Parallel()
					why := runWASITest(t, e, mod)
					expected, listed := wasiExpectedFailures[suite+"/"+name]
					switch {
					case why != "" && !listed:
						t.Error(why)
					case why == "" && listed:
						t.Errorf("passes, but is listed as an expected failure (%s): take it off the list", expected)
					case why != "":
						t.Logf("expected failure (%s): %s", expected, why)
					}
				})
			}
		})
	}
}

// runWASITest runs one test and says how it failed ("" if it passed).
func runWASITest(t *testing.T, e *wasm.Executor, mod string) string {
	var cfg wasiTestConfig
	if b, err := os.ReadFile(strings.TrimSuffix(mod, ".wasm") + ".json"); err == nil {
		if err := json.Unmarshal(b, &cfg); err != nil {
			t.Fatal(err)
		}
	}
	job := newJob(t, mod, cfg.Args...)
	job.ID = "wasi-testsuite/" + mod
	job.Env = cfg.Env
	job.Limits.MemoryBytes = 256 << 20
	job.Limits.Timeout = time.Minute
	if cfg.Root != "" {
		copyTree(t, filepath.Join(filepath.Dir(mod), cfg.Root), job.WorkDir)
	}
	res, logs := run(t, e, job)
	var why []string
	if res.ExitCode != cfg.ExitCode {
		why = append(why, "exit code "+res.Reason)
	}
	want := ""
	if cfg.Stdout != nil {
		want += *cfg.Stdout
	}
	if cfg.Stderr != nil {
		want += *cfg.Stderr
	}
	if (cfg.Stdout != nil || cfg.Stderr != nil) && logs != want {
		why = append(why, "output "+strings.TrimSpace(logs)+", want "+want)
	} else if len(why) > 0 {
		why = append(why, "output: "+strings.TrimSpace(logs))
	}
	return strings.Join(why, "; ")
}

// copyTree copies the directory src into dst, files and directories only.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(target, b, 0o644)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
