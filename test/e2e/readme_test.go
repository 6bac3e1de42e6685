package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
	"github.com/gpunet/gpunet/internal/sandbox/oci/ocitest"
)

// readmeSkips are the README's command lines this test does not run, each
// with the reason; a line that is neither run nor listed here fails the
// test, so a new README line is tried as soon as it is written.
var readmeSkips = []struct{ prefix, why string }{
	{"go test -timeout 60m ./...", "the whole test suite, this test included"},
	{"apt-get install", "installs system packages"},
	{"GPUNET_SCREENSHOTS=", "runs TestDashboardInBrowser, which is in this suite"},
	{"ls shots/", "the screenshots of the line before"},
	{"go run ./examples/gpugemm -cpu 4096", "a 4096³ int8 product on the CPU takes minutes; TestExampleImage checks -cpu against the GPU path's line"},
}

// readmeGPU marks the lines that need an NVIDIA GPU provider (the GPU
// example's block): they run only where the machine has one.
const readmeGPU = "examples/container/gpu.yaml"

// readmeLine is a command line of a README code block.
type readmeLine struct {
	n     int    // line number in README.md
	cmd   string // the command, comment included
	block int    // which ```sh block
	// want is the output its comment shows after "→" (… matches
	// anything), or nil.
	want *regexp.Regexp
	// python: cmd is a whole ```python block, run as one script (r.python).
	python bool
}

// readmeCommands reads the command lines of README.md's ```sh blocks.
func readmeCommands(t *testing.T, path string) []readmeLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []readmeLine
	sc := bufio.NewScanner(f)
	inSh, block, n := false, 0, 0
	var py *readmeLine // the ```python block being read
	for sc.Scan() {
		n++
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "```sh"):
			inSh = true
			block++
			continue
		case strings.HasPrefix(l, "```python"):
			py = &readmeLine{n: n + 1, python: true}
			continue
		case py != nil && strings.HasPrefix(l, "```"):
			lines = append(lines, *py)
			py = nil
			continue
		case py != nil:
			py.cmd += l + "\n"
			continue
		case strings.HasPrefix(l, "```"):
			inSh = false
			continue
		}
		if !inSh || strings.TrimSpace(l) == "" {
			continue
		}
		rl := readmeLine{n: n, cmd: l, block: block}
		if _, out, ok := strings.Cut(l, "# → "); ok {
			parts := strings.Split(strings.TrimSpace(out), "…")
			for i, p := range parts {
				parts[i] = regexp.QuoteMeta(p)
			}
			rl.want = regexp.MustCompile(strings.Join(parts, ".*"))
		}
		lines = append(lines, rl)
	}
	return lines
}

// TestREADME runs every command line of README.md's shell blocks, top to
// bottom, as a new user would: in a fresh $HOME (so ~/.gpunet is new), from
// a working directory holding the README's ./gpunet and the repository's
// examples/, with the devnet the README starts running beside. IDs and the
// address placeholder are replaced by what the commands before printed;
// each line must exit 0 and, where its comment shows the output after "→",
// print it. A README line that stops working fails CI here.
//
// Long-running lines (devnet, node, provider start) run in the background
// and the test waits for each to be ready; devnet lines run the binary
// TestMain built rather than go run (the same program), from the
// repository's root, as the README says.
func TestREADME(t *testing.T) {
	parallel(t, weightHeavy)
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	r := &readmeRun{t: t, repo: repo, home: t.TempDir(), work: t.TempDir()}
	if err := os.Symlink(filepath.Join(repo, "examples"), filepath.Join(r.work, "examples")); err != nil {
		t.Fatal(err)
	}
	gpu := hasGPU()
	lines := readmeCommands(t, filepath.Join(repo, "README.md"))
	if len(lines) < 30 {
		t.Fatalf("README.md has %d command lines; the parser lost some", len(lines))
	}
	gpuBlock := map[int]bool{}
	for _, l := range lines {
		if strings.Contains(l.cmd, readmeGPU) {
			gpuBlock[l.block] = true
		}
	}
	for _, l := range lines {
		if why := skipReason(l.cmd); why != "" {
			t.Logf("README.md:%d: not run (%s): %s", l.n, why, l.cmd)
			continue
		}
		if gpuBlock[l.block] && !gpu {
			t.Logf("README.md:%d: not run (no NVIDIA GPU here: the GPU example's block): %s", l.n, l.cmd)
			continue
		}
		start := time.Now()
		r.line(l)
		t.Logf("README.md:%d: ran in %.1fs: %s", l.n, time.Since(start).Seconds(), l.cmd)
		if t.Failed() {
			return
		}
	}
	r.stopAll()
}

func skipReason(cmd string) string {
	for _, s := range readmeSkips {
		if strings.HasPrefix(cmd, s.prefix) {
			return s.why
		}
	}
	return ""
}

// hasGPU reports whether this machine has an NVIDIA driver (a GPU job
// could run here).
func hasGPU() bool {
	_, err := os.Stat("/dev/nvidiactl")
	return err == nil
}

// readmeRun is the state of a README walk.
type readmeRun struct {
	t          *testing.T
	repo       string // the repository's root
	home       string // $HOME
	work       string // the working directory of ./gpunet lines
	devnet     *readmeProc
	background []*readmeProc
	lastJob    string   // the id the last job submit printed
	address    string   // carol's address, for gpu1… placeholders
	commits    []string // HEAD before and after the README's go build
	starts     int      // devnets started so far
}

// readmeProc is a long-running process a README line started.
type readmeProc struct {
	name string
	cmd  *exec.Cmd
	out  *lineBuffer
	err  *lineBuffer
	done chan struct{}
}

func (r *readmeRun) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GPUNET_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "GOFLAGS=") {
			env = append(env, kv)
		}
	}
	// keys add asks for a passphrase: the README's user types it. The
	// keys are the test keyring's (cleanEnv).
	env = append(env, "HOME="+r.home, "GPUNET_KEYRING_PASSPHRASE="+e2ePassphrase, keys.InsecureTestKeyringEnv+"=1")
	// The README's go build uses this machine's build and module caches,
	// as a user's would use theirs: under the new HOME they would be
	// empty, and the build would compile (and download) everything.
	caches, err := goCaches()
	if err != nil {
		r.t.Fatal(err)
	}
	return append(env, caches...)
}

// goCaches returns GOCACHE, GOMODCACHE and GOPATH as the go command sees
// them in this process's environment.
var goCaches = sync.OnceValues(func() ([]string, error) {
	out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		return nil, fmt.Errorf("go env: %w", err)
	}
	v := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(v) != 3 {
		return nil, fmt.Errorf("go env printed %q", out)
	}
	return []string{"GOCACHE=" + v[0], "GOMODCACHE=" + v[1], "GOPATH=" + v[2]}, nil
})

// start runs a README line in the background, in its own process group.
func (r *readmeRun) start(name, dir string, args ...string) *readmeProc {
	r.t.Helper()
	p := &readmeProc{name: name, out: newLineBuffer(), err: newLineBuffer(), done: make(chan struct{})}
	p.cmd = exec.Command(args[0], args[1:]...)
	p.cmd.Dir, p.cmd.Env = dir, r.env()
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.err
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		r.t.Fatalf("%s: %v", name, err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	r.t.Cleanup(func() {
		p.stop(syscall.SIGKILL)
		if r.t.Failed() {
			r.t.Logf("--- %s\nstdout:\n%s\nstderr (tail):\n%s", name, tail(p.out.String(), 3000), tail(p.err.String(), 3000))
		}
	})
	return p
}

// stop signals the process group (what a line left running in the
// background too, after its shell exited) and waits for its leader.
func (p *readmeProc) stop(sig syscall.Signal) {
	syscall.Kill(-p.cmd.Process.Pid, sig)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

func (r *readmeRun) stopAll() {
	for _, p := range r.background {
		p.stop(syscall.SIGINT)
	}
	if r.devnet != nil {
		r.devnet.stop(syscall.SIGINT)
	}
}

// waitFor polls cond until it holds, failing after timeout and showing
// what p printed.
func (r *readmeRun) waitFor(l readmeLine, timeout time.Duration, what string, p *readmeProc, cond func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if p != nil {
			select {
			case <-p.done:
				r.t.Fatalf("README.md:%d: %s exited before %s:\n%s\nstderr:\n%s", l.n, l.cmd, what, p.out.String(), tail(p.err.String(), 3000))
			default:
			}
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("README.md:%d: %s: no %s within %s", l.n, l.cmd, what, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var (
	devnetLine  = regexp.MustCompile(`^go run \./cmd/gpunet devnet\b([^#]*)`)
	buildLine   = regexp.MustCompile(`^go build -o gpunet \./cmd/gpunet\s*(#.*)?$`)
	submittedRE = regexp.MustCompile(`(?m)^job (\d+) submitted`)
)

// line runs one README line.
func (r *readmeRun) line(l readmeLine) {
	t := r.t
	t.Helper()
	if l.python {
		r.python(l)
		return
	}
	// The placeholders are the command's, not its comment's.
	cmd, _, _ := strings.Cut(l.cmd, " #")
	if regexp.MustCompile(`\bID\b`).MatchString(cmd) {
		if r.lastJob == "" {
			t.Fatalf("README.md:%d: %s: no job was submitted before it", l.n, l.cmd)
		}
		cmd = regexp.MustCompile(`\bID\b`).ReplaceAllString(cmd, r.lastJob)
	}
	if before, after, ok := strings.Cut(cmd, "gpu1…"); ok {
		cmd = before + r.carol() + after
	}
	bin := filepath.Join(r.work, "gpunet")
	switch {
	case devnetLine.MatchString(cmd):
		r.startDevnet(l, strings.Fields(devnetLine.FindStringSubmatch(cmd)[1]))
		return
	case buildLine.MatchString(cmd):
		// The README's build, into the working directory. GOFLAGS is
		// the user's own (this machine's may turn VCS stamping off).
		c := exec.Command("go", "build", "-o", bin, "./cmd/gpunet")
		c.Dir, c.Env = r.repo, r.env()
		before := r.head()
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("README.md:%d: %s: %v\n%s", l.n, cmd, err, out)
		}
		// The build recorded the commit checked out while it ran.
		r.commits = []string{before, r.head()}
		return
	case strings.Contains(cmd, "gpunet provider start"):
		p := r.start("provider start", r.work, "bash", "-c", cmd)
		r.background = append(r.background, p)
		from := regexp.MustCompile(`--from (\S+)`).FindStringSubmatch(cmd)[1]
		r.waitFor(l, 2*time.Minute, "registered, online agent", p, func() bool {
			var st struct {
				Agent struct{ Registered, Online bool }
			}
			res := r.run(bin, "provider", "status", "--from", from, "-o", "json")
			return res.code == 0 && json.Unmarshal([]byte(res.stdout), &st) == nil && st.Agent.Registered && st.Agent.Online
		})
		return
	case strings.HasPrefix(cmd, "./gpunet node "), strings.HasPrefix(cmd, "for ") && strings.Contains(cmd, "gpunet node"):
		p := r.start("node", r.work, "bash", "-c", cmd)
		r.background = append(r.background, p)
		if home := regexp.MustCompile(`^\./gpunet node --home (\S+)`).FindStringSubmatch(cmd); home != nil {
			r.waitFor(l, time.Minute, "node answering", p, func() bool {
				return r.run("bash", "-c", "./gpunet status --home "+home[1]).code == 0
			})
		}
		return
	}
	res := r.run("bash", "-c", cmd)
	if res.code != 0 && strings.Contains(cmd, "gpunet status --home ./net/") {
		// Four nodes just started: status answers once node0 serves.
		r.waitFor(l, time.Minute, "answer", nil, func() bool {
			res = r.run("bash", "-c", cmd)
			return res.code == 0
		})
	}
	if res.code != 0 {
		t.Fatalf("README.md:%d: %s\nexit %d\nstdout:\n%s\nstderr:\n%s", l.n, cmd, res.code, res.stdout, res.stderr)
	}
	if l.want != nil && !l.want.MatchString(res.stdout) {
		t.Errorf("README.md:%d: %s\nprints:\n%s\nwant (as its comment shows): %s", l.n, cmd, res.stdout, l.want)
	}
	if m := submittedRE.FindStringSubmatch(res.stdout); m != nil && strings.Contains(cmd, "job submit") {
		r.lastJob = m[1]
	}
	r.check(l, cmd, res)
}

// check holds the lines whose comment says what they do to it.
func (r *readmeRun) check(l readmeLine, cmd string, res cliResult) {
	t := r.t
	switch {
	case strings.HasPrefix(cmd, "./gpunet version"):
		if len(r.commits) > 0 && r.commits[0] != "" {
			if !strings.Contains(res.stdout, "commit:   "+r.commits[0]) && !strings.Contains(res.stdout, "commit:   "+r.commits[1]) {
				t.Errorf("README.md:%d: %s prints\n%s\nwant the commit it was built from, %s", l.n, cmd, res.stdout, r.commits[0])
			}
		}
	case strings.HasPrefix(cmd, "./gpunet job wait "):
		if !strings.Contains(res.stdout, "state:    succeeded") {
			t.Errorf("README.md:%d: %s:\n%s", l.n, cmd, res.stdout)
		}
	case strings.HasPrefix(cmd, "./gpunet job get ") && strings.Contains(cmd, "--out mandelbrot"):
		if _, err := os.Stat(filepath.Join(r.work, "mandelbrot", "out", "mandelbrot.pgm")); err != nil {
			t.Errorf("README.md:%d: %s: %v", l.n, cmd, err)
		}
	case strings.HasPrefix(cmd, "./gpunet job logs "):
		if strings.TrimSpace(res.stdout) == "" {
			t.Errorf("README.md:%d: %s printed no log", l.n, cmd)
		}
	case strings.HasPrefix(cmd, "cat result/out/counts.txt"):
		if !strings.Contains(res.stdout, "top words:") {
			t.Errorf("README.md:%d: %s:\n%s", l.n, cmd, res.stdout)
		}
	}
}

// head is the repository's checked-out commit, or "" without git.
func (r *readmeRun) head() string {
	rev, err := exec.Command("git", "-C", r.repo, "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(rev))
}

// carol is the address of the README's key carol.
func (r *readmeRun) carol() string {
	if r.address == "" {
		var k keyJSON
		res := r.run(filepath.Join(r.work, "gpunet"), "keys", "show", "carol", "-o", "json")
		if res.code != 0 || json.Unmarshal([]byte(res.stdout), &k) != nil {
			r.t.Fatalf("keys show carol: %s", res)
		}
		r.address = k.Address
	}
	return r.address
}

// run runs a command in the working directory to completion (at most
// six minutes: job wait follows a CPU-heavy job).
func (r *readmeRun) run(args ...string) cliResult {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, args[0], args[1:]...)
	c.Dir, c.Env = r.work, r.env()
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	err := c.Run()
	if ctx.Err() != nil {
		r.t.Fatalf("%v: timed out\nstdout:\n%s\nstderr:\n%s", args, out.String(), errOut.String())
	}
	return cliResult{args: args, code: exitCode(err), stdout: out.String(), stderr: errOut.String()}
}

// startDevnet stops the running devnet and starts `gpunet devnet args`,
// from the repository's root, and waits until it is ready and its example
// (if it runs one) has printed its verified output.
func (r *readmeRun) startDevnet(l readmeLine, args []string) {
	t := r.t
	if r.devnet != nil {
		r.devnet.stop(syscall.SIGINT)
	}
	for _, a := range args {
		if a == "--registry" {
			_, err := oci.Probe(t.Context(), oci.Options{Dir: t.TempDir()})
			ocitest.RequireRunc(t, nil, err) // skips, or fails under CI=true
		}
	}
	// Without hardware challenges (withoutHWChallenges): the README's
	// commands must not depend on how busy the machine is.
	p := r.start("devnet "+strings.Join(args, " "), r.repo, append([]string{gpunetBin, "devnet"}, withoutHWChallenges(slices.Clone(args))...)...)
	r.devnet = p
	r.waitFor(l, 3*time.Minute, "'Press Ctrl-C to stop.'", p, func() bool { return strings.Contains(p.out.String(), "Press Ctrl-C to stop.") })
	// It says what it does while it starts, a line per step on stderr
	// (read apart from stdout: its last line may arrive a moment later).
	for _, step := range []string{"starting the node", "providers registering", "ready"} {
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(p.err.String(), step) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if !strings.Contains(p.err.String(), step) {
			t.Errorf("README.md:%d: the devnet's stderr does not say %q:\n%s", l.n, step, p.err.String())
		}
	}
	// A devnet runs its example on a home's first start only: a resumed
	// one says it ran and does not run it again.
	resumed := r.starts > 0 && !strings.Contains(strings.Join(args, " "), "--reset")
	r.starts++
	if resumed {
		r.waitFor(l, 10*time.Second, "word that its example ran", p, func() bool {
			return strings.Contains(p.out.String(), "The example job ran on this chain as job 1 ")
		})
		if strings.Contains(p.out.String(), "Running the bundled example job") {
			t.Errorf("README.md:%d: the resumed devnet runs its example again:\n%s", l.n, p.out.String())
		}
	}
	if strings.Contains(p.out.String(), "Running the bundled example job") {
		r.waitFor(l, 3*time.Minute, "example output", p, func() bool {
			return strings.Contains(p.out.String(), "Example job ") || strings.Contains(p.err.String(), "example job:")
		})
		out := p.out.String()
		m := regexp.MustCompile(`\(([0-9.]+)s after the devnet started\)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("README.md:%d: the example job did not succeed:\n%s\n%s", l.n, out, tail(p.err.String(), 2000))
		}
		t.Logf("README.md:%d: %s: the example's verified output %ss after the devnet started", l.n, l.cmd, m[1])
	}
	if strings.Contains(strings.Join(args, " "), "--registry") && !strings.Contains(p.out.String(), "registry:   ") {
		t.Fatalf("README.md:%d: devnet --registry does not say where its registry is:\n%s", l.n, p.out.String())
	}
	t.Logf("README.md:%d: %s is running", l.n, fmt.Sprint("devnet ", strings.Join(args, " ")))
}

// python runs a ```python block of README.md as one script (python3 -),
// from the README's working directory with the Python client in place
// (PYTHONPATH=sdk/python, as its README says), beside the running devnet.
// It must exit 0 and print what its "# → …" comments show. Without a
// python3 that has cryptography and yaml the block is not run, except
// under CI=true, where that fails (.ci/run installs them).
func (r *readmeRun) python(l readmeLine) {
	t := r.t
	t.Helper()
	py := ""
	for _, c := range []string{"python3", "/usr/bin/python3"} {
		if p, err := exec.LookPath(c); err == nil && exec.Command(p, "-c", "import cryptography, yaml").Run() == nil {
			py = p
			break
		}
	}
	if py == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("README.md:%d: no python3 with cryptography and yaml to run the Python example (.ci/run installs them)", l.n)
		}
		t.Logf("README.md:%d: not run (no python3 with cryptography and yaml): the Python example", l.n)
		return
	}
	c := exec.Command(py, "-")
	c.Dir, c.Env = r.work, append(r.env(), "PYTHONPATH="+filepath.Join(r.repo, "sdk", "python"), "PYTHONDONTWRITEBYTECODE=1")
	c.Stdin = strings.NewReader(l.cmd)
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("README.md:%d: the Python example: %v\n%s", l.n, err, out)
	}
	for _, m := range regexp.MustCompile(`# → (.*)`).FindAllStringSubmatch(l.cmd, -1) {
		if want := strings.TrimSpace(m[1]); !strings.Contains(string(out), want) {
			t.Errorf("README.md:%d: the Python example prints\n%s\nwant %q, as its comment shows", l.n, out, want)
		}
	}
}
