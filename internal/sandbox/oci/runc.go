package oci

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// runc drives the runc binary. Every call names its own state directory
// (--root), so the executor's containers never mix with a Docker's or
// another runc user's.
type runc struct {
	path string
	root string
}

// runcCandidates are where Debian and others install runc, for a PATH
// (an unprivileged user's, say) that lacks /usr/sbin.
var runcCandidates = []string{"/usr/sbin/runc", "/usr/bin/runc", "/usr/local/sbin/runc", "/usr/local/bin/runc"}

// findRunc returns the runc binary to use: explicit if given, else runc on
// PATH, else a usual location.
func findRunc(explicit string) (string, error) {
	if explicit != "" {
		p, err := exec.LookPath(explicit)
		if err != nil {
			return "", fmt.Errorf("runc %q: %w", explicit, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("runc"); err == nil {
		return p, nil
	}
	for _, c := range runcCandidates {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return c, nil
		}
	}
	return "", errors.New("runc not found in PATH or " + strings.Join(runcCandidates, ", ") + "; install it (Debian/Ubuntu: apt-get install runc)")
}

func (r *runc) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, r.path, append([]string{"--root", r.root}, args...)...)
	cmd.Env = runcEnv()
	return cmd
}

// runcEnv is the environment runc runs in: a PATH for the hooks it starts,
// and XDG_RUNTIME_DIR for rootless runc; nothing else of the agent's.
func runcEnv() []string {
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if v := os.Getenv("XDG_RUNTIME_DIR"); v != "" {
		env = append(env, "XDG_RUNTIME_DIR="+v)
	}
	return env
}

// output runs a short runc command and returns its stdout, or an error
// carrying its stderr.
func (r *runc) output(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := r.command(ctx, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return out, fmt.Errorf("runc %s: %s", args[0], msg)
	}
	return out, nil
}

func (r *runc) version(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, r.path, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", r.path, err)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line), nil
}

// runcFeatures is the part of `runc features` the probe reads.
type runcFeatures struct {
	Linux struct {
		Namespaces []string `json:"namespaces"`
		Seccomp    *struct {
			Enabled *bool `json:"enabled"`
		} `json:"seccomp"`
	} `json:"linux"`
}

// features returns `runc features`, or nil for a runc too old to have it.
func (r *runc) features(ctx context.Context) *runcFeatures {
	out, err := r.output(ctx, "features")
	if err != nil {
		return nil
	}
	var f runcFeatures
	if json.Unmarshal(out, &f) != nil {
		return nil
	}
	return &f
}

type runcState struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Bundle string `json:"bundle"`
}

func (r *runc) list(ctx context.Context) ([]runcState, error) {
	out, err := r.output(ctx, "list", "--format", "json")
	if err != nil {
		return nil, err
	}
	var l []runcState
	if s := strings.TrimSpace(string(out)); s == "" || s == "null" {
		return nil, nil
	}
	if err := json.Unmarshal(out, &l); err != nil {
		return nil, fmt.Errorf("runc list: %w", err)
	}
	return l, nil
}

// kill sends SIGKILL to every process of a container (to its init alone
// where runc cannot list them without cgroups; the others die with it, in
// its pid namespace).
func (r *runc) kill(ctx context.Context, id string) error {
	if _, err := r.output(ctx, "kill", "--all", id, "KILL"); err == nil {
		return nil
	}
	_, err := r.output(ctx, "kill", id, "KILL")
	return err
}

// remove deletes a container, killing what is left of it.
func (r *runc) remove(ctx context.Context, id string) error {
	_, err := r.output(ctx, "delete", "--force", id)
	if err != nil && strings.Contains(err.Error(), "does not exist") {
		return nil
	}
	return err
}

// runOutcome is how a container run ended.
type runOutcome struct {
	// Started is true once the container's process was created (runc
	// wrote its pid file).
	Started bool
	// ExitCode is runc's exit status: the program's, or 128+signal.
	ExitCode int
	// StartError is runc's own error when the container did not start.
	StartError string
	// Elapsed runs from starting runc to its exit.
	Elapsed time.Duration
	// Killed is true when the run was stopped through ctx.
	Killed bool
}

// killGrace is how long a killed container may take to go before runc
// itself is killed.
const killGrace = 10 * time.Second

// run runs the container of bundle in the foreground (runc stays its
// parent, so its exit status comes back) with its output to out, and keeps
// it after it exits so that its cgroup can be read; the caller removes it.
// When ctx ends, the container is killed and run returns once it is gone.
func (r *runc) run(ctx context.Context, id, bundle string, out io.Writer) (runOutcome, error) {
	pidFile := filepath.Join(bundle, "pid")
	logFile := filepath.Join(bundle, "runc.log")
	cmd := exec.Command(r.path, "--root", r.root, "--log", logFile, "--log-format", "json",
		"run", "--keep", "--pid-file", pidFile, "--bundle", bundle, id)
	cmd.Env = runcEnv()
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group: a Ctrl-C meant for the agent reaches the
	// container only through the agent cancelling it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The container's processes all die with its init (pid namespace), so
	// its output pipes close; don't wait long for stragglers regardless.
	cmd.WaitDelay = 2 * time.Second
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return runOutcome{}, fmt.Errorf("start runc: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var o runOutcome
	var werr error
	select {
	case werr = <-done:
	case <-ctx.Done():
		o.Killed = true
		werr = r.killUntilGone(id, cmd, done)
	}
	o.Elapsed = time.Since(t0)
	if _, err := os.Stat(pidFile); err == nil {
		o.Started = true
	}
	var ee *exec.ExitError
	switch {
	case werr == nil:
	case errors.As(werr, &ee):
		o.ExitCode = ee.ExitCode()
		if o.ExitCode < 0 {
			o.ExitCode = 128 + int(syscall.SIGKILL) // runc itself was killed
		}
	case errors.Is(werr, exec.ErrWaitDelay):
		o.ExitCode = cmd.ProcessState.ExitCode()
	default:
		return o, fmt.Errorf("runc run: %w", werr)
	}
	if !o.Started {
		o.StartError = runcError(logFile)
		if o.StartError == "" && o.ExitCode != 0 {
			o.StartError = fmt.Sprintf("runc exited %d before starting the container", o.ExitCode)
		}
	}
	return o, nil
}

// killUntilGone kills the container until runc run returns; runc itself
// is killed if the container outlives killGrace.
func (r *runc) killUntilGone(id string, cmd *exec.Cmd, done <-chan error) error {
	deadline := time.After(killGrace)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		// Fails while the container is still being created; try again.
		r.kill(context.Background(), id)
		select {
		case err := <-done:
			return err
		case <-tick.C:
		case <-deadline:
			cmd.Process.Kill()
			return <-done
		}
	}
}

// runcError returns the last error runc logged (its --log, JSON lines).
func runcError(logFile string) string {
	f, err := os.Open(logFile)
	if err != nil {
		return ""
	}
	defer f.Close()
	var last string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
		}
		if json.Unmarshal(sc.Bytes(), &e) == nil && (e.Level == "error" || e.Level == "fatal") {
			last = e.Msg
		}
	}
	return last
}
