// Package e2e runs the real gpunet binary as subprocesses — devnets and
// multi-validator networks on loopback — and checks what a user sees through
// the CLI's JSON output, plus crash safety and consensus behaviour.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/bintest"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/keys"
)

// gpunetBin is the gpunet binary, built once for every package that runs
// it (internal/bintest).
var gpunetBin string

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	bin, err := bintest.Build(ctx, "github.com/gpunet/gpunet/cmd/gpunet")
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gpunetBin = bin
	setParallel()
	os.Exit(m.Run())
}

// e2ePassphrase encrypts the keys the tests create with `keys add`.
const e2ePassphrase = "e2e passphrase"

// cleanEnv is the environment of every gpunet subprocess: ours without the
// GPUNET_* variables, so that only explicit flags choose homes and nodes;
// with GPUNET_KEYRING_PASSPHRASE, so that no command prompts; and with the
// test keyring (keys.InsecureTestKeyringEnv), so that the keys the tests
// add are still encrypted but cost a millisecond, not seconds of scrypt, at
// every command that signs with them.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GPUNET_") {
			env = append(env, kv)
		}
	}
	return append(env, "GPUNET_KEYRING_PASSPHRASE="+e2ePassphrase, keys.InsecureTestKeyringEnv+"=1")
}

// ---------------------------------------------------------------------------
// Long-running processes (devnet, node).

// proc is a long-running gpunet process. Its output is captured and shown
// when the test fails; it is always killed when the test ends.
type proc struct {
	t      testing.TB
	name   string
	cmd    *exec.Cmd
	stdout *lineBuffer
	stderr *lineBuffer
	done   chan struct{}
	err    error // cmd.Wait's result, once done is closed
	// dumpedAt is the length of stderr when the process was asked for
	// its goroutines (-1: not asked).
	dumpedAt int
}

// running is every test's processes, for the goroutine dump of a failed
// test.
var running = &procRegistry{byTest: map[testing.TB][]*proc{}}

type procRegistry struct {
	mu     sync.Mutex
	byTest map[testing.TB][]*proc
	dumped map[testing.TB]bool
}

func (r *procRegistry) add(t testing.TB, p *proc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byTest[t] = append(r.byTest[t], p)
}

// dumpAll asks each of t's processes still running for its goroutines at
// once, the first time it is called for t, and waits for them to exit.
func (r *procRegistry) dumpAll(t testing.TB) {
	r.mu.Lock()
	if r.dumped == nil {
		r.dumped = map[testing.TB]bool{}
	}
	if r.dumped[t] {
		r.mu.Unlock()
		return
	}
	r.dumped[t] = true
	procs := r.byTest[t]
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		select {
		case <-p.done:
			continue
		default:
		}
		p.dumpedAt = len(p.stderr.String())
		wg.Go(func() { bintest.DumpStacks(p.cmd.Process, p.done, 5*time.Second) })
	}
	wg.Wait()
}

// startProc starts gpunet with args.
func startProc(t testing.TB, name string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, stdout: newLineBuffer(), stderr: newLineBuffer(), done: make(chan struct{}), dumpedAt: -1}
	p.cmd = exec.Command(gpunetBin, args...)
	p.cmd.Env = cleanEnv()
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	running.add(t, p)
	t.Cleanup(func() {
		if !t.Failed() {
			p.kill()
			return
		}
		// A failed test may have failed because a process stopped making
		// progress: the first of its processes' cleanups asks every one
		// still running to print where its goroutines are (SIGQUIT), all
		// at once so that one's wait shows beside the other's state; the
		// log shows those in gpunet code.
		running.dumpAll(t)
		p.kill()
		all := p.stderr.String()
		logged := len(all)
		if p.dumpedAt >= 0 {
			logged = p.dumpedAt
		}
		t.Logf("--- %s %v (exit: %v)\nstdout:\n%s\nstderr (tail):\n%s", name, args, p.err, p.stdout.String(), tail(all[:logged], 4000))
		if st := bintest.OurStacks(all[logged:], 60000); st != "" {
			t.Logf("--- %s: its goroutines in gpunet code when the test failed:\n%s", name, st)
		}
	})
	return p
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.t.Errorf("%s: still running 10s after SIGKILL", p.name)
	}
}

// stop sends SIGINT and returns the exit code, failing the test unless the
// process exits within timeout.
func (p *proc) stop(timeout time.Duration) int {
	p.t.Helper()
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.t.Fatalf("%s: did not exit within %s of SIGINT", p.name, timeout)
	}
	return exitCode(p.err)
}

// jsonLine waits for the first stdout line that is a JSON object and
// decodes it into v.
func (p *proc) jsonLine(timeout time.Duration, v any) {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, l := range p.stdout.Lines() {
			if strings.HasPrefix(l, "{") {
				if err := json.Unmarshal([]byte(l), v); err != nil {
					p.t.Fatalf("%s: stdout line %q: %v", p.name, l, err)
				}
				return
			}
		}
		select {
		case <-p.done:
			p.t.Fatalf("%s exited (%v) before printing its JSON line", p.name, p.err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	p.t.Fatalf("%s: no JSON line on stdout within %s", p.name, timeout)
}

// lineBuffer is a goroutine-safe output sink.
type lineBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func newLineBuffer() *lineBuffer { return &lineBuffer{} }

func (b *lineBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lineBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines returns the complete lines written so far.
func (b *lineBuffer) Lines() []string {
	s := b.String()
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return strings.Split(s[:i], "\n")
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode() // -1 when killed by a signal
	default:
		return -2
	}
}

// ---------------------------------------------------------------------------
// Devnets.

// devnetInfo is the JSON line `gpunet devnet --output json` prints once running.
type devnetInfo struct {
	ChainID  string `json:"chain_id"`
	API      string `json:"api"`
	APIToken string `json:"api_token"`
	Home     string `json:"home"`
	Created  bool   `json:"created"`
	Keys     []struct {
		Name    string `json:"name"`
		Address string `json:"address"`
	} `json:"keys"`
}

// addr returns the address of the dev key name.
func (d devnetInfo) addr(t testing.TB, name string) string {
	t.Helper()
	for _, k := range d.Keys {
		if k.Name == name {
			return k.Address
		}
	}
	t.Fatalf("devnet keys %+v have no %q", d.Keys, name)
	return ""
}

// startDevnet runs `gpunet devnet` in home and waits until it is serving.
// Unless extra says otherwise it runs no providers, so tests of the chain
// and the CLI see only the dev keys, and a new chain has no hardware
// challenges (see withoutHWChallenges).
func startDevnet(t testing.TB, home string, extra ...string) (*proc, devnetInfo) {
	t.Helper()
	args := withoutHWChallenges(append([]string{"devnet", "--home", home, "--output", "json"}, extra...))
	if !slices.Contains(extra, "--providers") {
		args = append(args, "--providers", "0")
	}
	p := startProc(t, "devnet "+filepath.Base(home), args...)
	// The devnet's node and providers log to HOME/logs/devnet.log, not its
	// stderr: a failed test shows that log's tail (registered after the
	// process's own cleanup, so it runs first, while the process lives).
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(home, "logs", "devnet.log")); err == nil {
				t.Logf("--- devnet %s: HOME/logs/devnet.log (tail):\n%s", filepath.Base(home), tail(string(b), 12000))
			}
		}
	})
	var info devnetInfo
	p.jsonLine(60*time.Second, &info)
	if info.API == "" || info.Home != home {
		t.Fatalf("devnet JSON line %+v: want api and home %s", info, home)
	}
	return p, info
}

// withoutHWChallenges adds --hw-challenges=false to the args of a command
// that writes a new chain's genesis (devnet, init) unless they say
// --hw-challenges themselves. A hardware challenge has a deadline, which
// an honest provider on a busy machine can miss: only the tests about
// challenges (they pass --hw-challenges) should depend on how busy the
// machine running them is.
func withoutHWChallenges(args []string) []string {
	for _, a := range args {
		if a == "--hw-challenges" || strings.HasPrefix(a, "--hw-challenges=") {
			return args
		}
	}
	return append(args, "--hw-challenges=false")
}

// initNet runs `gpunet init args…` (without hardware challenges unless args
// opt in, as withoutHWChallenges) and decodes its JSON into v.
func initNet(t testing.TB, v any, args ...string) {
	t.Helper()
	gpunetJSON(t, v, withoutHWChallenges(append([]string{"init"}, args...))...)
}

// ---------------------------------------------------------------------------
// One-shot CLI commands.

type cliResult struct {
	args           []string
	code           int
	stdout, stderr string
}

func (r cliResult) String() string {
	return fmt.Sprintf("gpunet %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(r.args, " "), r.code, r.stdout, tail(r.stderr, 2000))
}

// gpunet runs the CLI to completion (at most a minute) whatever its exit code.
func gpunet(t testing.TB, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gpunetBin, args...)
	cmd.Env = cleanEnv()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("gpunet %v: timed out", args)
	}
	r := cliResult{args: args, code: exitCode(err), stdout: out.String(), stderr: errOut.String()}
	if r.code < 0 {
		t.Fatalf("gpunet %v did not run: %v", args, err)
	}
	return r
}

// gpunetJSON runs the CLI with --output json, requires exit 0 and decodes stdout
// into v.
func gpunetJSON(t testing.TB, v any, args ...string) {
	t.Helper()
	r := gpunet(t, append(args, "--output", "json")...)
	if r.code != 0 {
		t.Fatalf("%s", r)
	}
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("%s\ndecode: %v", r, err)
	}
}

// wantFail runs the CLI, requiring exit code code and stderr mentioning
// each of want.
func wantFail(t testing.TB, code int, want []string, args ...string) cliResult {
	t.Helper()
	r := gpunet(t, args...)
	if r.code != code {
		t.Errorf("want exit %d:\n%s", code, r)
		return r
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr does not mention %q:\n%s", w, r)
		}
	}
	return r
}

// statusJSON is the stable part of `gpunet status -o json`.
type statusJSON struct {
	ChainID    string `json:"chain_id"`
	Height     int64  `json:"height"`
	AppHash    string `json:"app_hash"`
	API        string `json:"api"`
	CatchingUp bool   `json:"catching_up"`
	Validators []struct {
		Address     string `json:"address"`
		VotingPower int64  `json:"voting_power"`
	} `json:"validators"`
}

type balanceJSON struct {
	Address string `json:"address"`
	Balance uint64 `json:"balance"`
	Height  uint64 `json:"height"`
}

type accountJSON struct {
	Address  string `json:"address"`
	Balance  uint64 `json:"balance"`
	Sequence uint64 `json:"sequence"`
	Height   uint64 `json:"height"`
}

type txJSON struct {
	TxHash string `json:"tx_hash"`
	Height int64  `json:"height"`
	Code   uint32 `json:"code"`
	Log    string `json:"log"`
}

type keyJSON struct {
	Name      string `json:"name"`
	Address   string `json:"address"`
	Encrypted bool   `json:"encrypted"`
}

func status(t testing.TB, args ...string) statusJSON {
	t.Helper()
	var s statusJSON
	gpunetJSON(t, &s, append([]string{"status"}, args...)...)
	return s
}

func balance(t testing.TB, who string, args ...string) uint64 {
	t.Helper()
	var b balanceJSON
	gpunetJSON(t, &b, append([]string{"query", "balance", who}, args...)...)
	return b.Balance
}

// ---------------------------------------------------------------------------
// Waiting and watching.

// waitUntil polls cond until it holds, failing the test after timeout. It
// waits 50 ms between polls, or as long as the last poll took if longer, so
// that a cond that runs the CLI keeps at most half a core busy.
func waitUntil(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		start := time.Now()
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(max(50*time.Millisecond, time.Since(start)))
	}
}

// hashBook records the app hash each node reports at each height. One
// chain has one app hash per height, whoever reports it and whenever:
// before or after a crash, on any validator.
type hashBook struct {
	mu        sync.Mutex
	hash      map[int64]string          // height → app hash
	by        map[int64]string          // height → node that reported it first
	seen      map[string]map[int64]bool // node → heights it reported
	latest    map[string]int64          // node → last height reported
	compared  int                       // heights reported by more than one node
	conflicts []string
}

func newHashBook() *hashBook {
	return &hashBook{hash: map[int64]string{}, by: map[int64]string{}, seen: map[string]map[int64]bool{}, latest: map[string]int64{}}
}

func (b *hashBook) record(node string, h int64, hash string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.hash[h]; !ok {
		b.hash[h], b.by[h] = hash, node
	} else if old != hash && len(b.conflicts) < 20 {
		b.conflicts = append(b.conflicts, fmt.Sprintf("height %d: %s reports app hash %s, %s reported %s", h, node, hash, b.by[h], old))
	}
	if b.by[h] != node && !b.seen[node][h] {
		b.compared++
	}
	if b.seen[node] == nil {
		b.seen[node] = map[int64]bool{}
	}
	b.seen[node][h] = true
	b.latest[node] = max(b.latest[node], h)
}

// check fails the test if any two reports disagreed.
func (b *hashBook) check(t testing.TB) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.conflicts) > 0 {
		t.Fatalf("app hashes disagree (fork or non-determinism):\n%s", strings.Join(b.conflicts, "\n"))
	}
}

// maxHeight returns the highest height any of nodes reported; with no
// nodes, any node at all.
func (b *hashBook) maxHeight(nodes ...string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var m int64
	for n, h := range b.latest {
		if len(nodes) == 0 || slices.Contains(nodes, n) {
			m = max(m, h)
		}
	}
	return m
}

// minHeight returns the lowest of the nodes' latest heights.
func (b *hashBook) minHeight(nodes ...string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := int64(-1)
	for _, n := range nodes {
		if m < 0 || b.latest[n] < m {
			m = b.latest[n]
		}
	}
	return m
}

// commonHeights returns, ascending, the heights at or above from that all
// of nodes reported.
func (b *hashBook) commonHeights(from int64, nodes ...string) []int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var hs []int64
	for h := range b.seen[nodes[0]] {
		all := h >= from
		for _, n := range nodes[1:] {
			all = all && b.seen[n][h]
		}
		if all {
			hs = append(hs, h)
		}
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i] < hs[j] })
	return hs
}

// heights returns a copy of the height → app hash map.
func (b *hashBook) heights() map[int64]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := make(map[int64]string, len(b.hash))
	for h, x := range b.hash {
		m[h] = x
	}
	return m
}

// watcher polls one node's status through its API and records what it
// reports in a hashBook, until stopped.
type watcher struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	firstH int64 // first height reported, -1 until then
}

func watch(t testing.TB, book *hashBook, node, api string) *watcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{cancel: cancel, done: make(chan struct{}), firstH: -1}
	cl := chainclient.New(api)
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := cl.Status(cctx)
			ccancel()
			if err == nil {
				book.record(node, st.Height, st.AppHash)
				w.mu.Lock()
				if w.firstH < 0 {
					w.firstH = st.Height
				}
				w.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(25 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(w.stop)
	return w
}

// firstHeight returns the first height the watcher saw, or -1.
func (w *watcher) firstHeight() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.firstH
}

func (w *watcher) stop() {
	w.cancel()
	<-w.done
}
