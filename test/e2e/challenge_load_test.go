package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpunet/gpunet/examples"
	"github.com/gpunet/gpunet/examples/wordcount/count"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/ledger"
)

// The challenge-under-load test's settings.
//
// On a devnet with 1-s blocks a challenge sized for T seconds of work at
// the claimed throughput has a deadline of 1.25·T + 3 s (the slack, and
// three blocks' allowance for getting the commit on chain), so on an idle
// machine the deadline tells a claim more than 1.25 + 3/T times what the
// device does (docs/challenge.md, "What the deadline can tell"). For an
// overclaim of 3 that needs T > 3 / (3 − 1.25) = 1.71 s, with no latency
// and a prover no slower than the benchmark. At 1 s (a 4.25-s deadline for
// 3 s of work) a 3× overclaimer passes on an idle machine; at 2.5 s its
// 7.5 s of work (at least: this machine's prover is slower than its
// benchmark, and the commit waits for a block) meets a 6.125-s deadline,
// late even if its benchmark read 18% low (the factor is 2.45).
//
// The test does not wait for re-challenges: a passed challenge is
// challenged again only 75 × T later (187 s), which is what made this test
// long. Each honest agent takes its first challenge under the load
// instead, while the agents started before it prove theirs: the load, and
// those agents, are held still (SIGSTOP) only while a new agent measures
// the machine, until it has registered, before it can have computed
// anything of its first challenge.
//
// GPUNET_CHALLENGE_SOAK=5m (any duration) keeps the load, and jobs one
// after another, going until that long after it began, for a soak run of
// the several minutes; the checks are the same.
const (
	loadChallengeTime = "2500ms"
	loadOverclaim     = 3
	// loadJobs is how many wordcount jobs run one after another under the
	// load once every agent has registered.
	loadJobs = 2
)

// loadProviderJSON is what the test reads of `gpunet query provider -o json`.
type loadProviderJSON struct {
	Address     string  `json:"address"`
	Height      uint64  `json:"height"`
	TOPS        float64 `json:"tops"` // effective: each device's claim capped by its ruling
	Schedulable bool    `json:"schedulable"`
	Record      struct {
		Stake       uint64 `json:"stake"`
		Reputation  uint64 `json:"reputation"`
		Slashed     uint64 `json:"slashed"`
		SlashEvents []struct {
			Height uint64 `json:"height"`
			Amount uint64 `json:"amount"`
			Reason string `json:"reason"`
		} `json:"slash_events"`
		Measured struct {
			Int8GOPS uint64 `json:"int8_gops"` // the CPU's claim
		} `json:"measured"`
		Inventory struct {
			GPUs []struct {
				Int8GOPS uint64 `json:"int8_gops"`
			} `json:"gpus"`
		} `json:"inventory"`
		Challenges struct {
			Passed      uint64 `json:"passed"`
			Late        uint64 `json:"late"`
			Missed      uint64 `json:"missed"`
			Failed      uint64 `json:"failed"`
			Proven      bool   `json:"proven"`
			ProvenGOPS  uint64 `json:"proven_gops"`
			LastFailure string `json:"last_failure"`
		} `json:"challenges"`
	} `json:"record"`
}

// loadAgent is a `gpunet provider start` process with its own home.
type loadAgent struct {
	name, home, addr string
	overclaim        bool
	proc             *proc
	// loadFrom is the height at which the load ran again after this
	// (honest) agent registered: its first challenge is ruled after it.
	loadFrom int64
}

// TestChallengesUnderLoad: an honest provider on a busy machine is never
// slashed, and an overclaimer beside it is caught (issue 26). A devnet
// with 2.5-s hardware challenges (see loadChallengeTime) runs four `gpunet
// provider start` agents, each in its own home. Each measures the machine
// alone: while it starts, until it has registered, the load and the
// agents started before it are held still (SIGSTOP).
//
//   - mallory, which declares three times the throughput it measured
//     (--fault-overclaim 3), starts first and takes its first challenge on
//     the idle machine. The rule for a claim the deadline can tell
//     (docs/challenge.md, "Rulings") is a late ruling: not slashed, and the
//     throughput the proof showed replaces the claim. checkOverclaimCaught
//     asserts exactly that, on its first challenge.
//   - carol, dave and erin are honest. From each one's registration on,
//     busy loops, twice as many as the machine has cores, run, so that its
//     first challenge is computed under the load.
//
// Once all have registered, alice runs loadJobs wordcount jobs one after
// another under the load, which lasts until each honest agent's first
// challenge is ruled. No honest provider is slashed (its record and
// the chain's events), each one's first challenge is ruled passed or late
// (a late proof measures the device and is not slashed), each is
// schedulable afterwards, and every job succeeds with the right output.
func TestChallengesUnderLoad(t *testing.T) {
	parallel(t, cpuBudget)
	started := time.Now()
	home := t.TempDir()
	_, info := startDevnet(t, home, "--hw-challenges", "--hw-challenge-time", loadChallengeTime, "--block-time", "1s")
	factor := deadlineFactor(t, info.API)
	if loadOverclaim <= factor {
		t.Fatalf("the deadline tells a claim more than %.2f times what a device does; an overclaim of %d is within it", factor, loadOverclaim)
	}
	query := func(addr string) loadProviderJSON {
		t.Helper()
		var p loadProviderJSON
		gpunetJSON(t, &p, "query", "provider", addr, "--home", home)
		return p
	}
	height := func() int64 { return status(t, "--home", home).Height }
	api := nodeAPI(t, home, "")
	// record polls the node's API (a CLI process every poll would load
	// the machine the agents measure); nil until a is registered.
	record := func(a *loadAgent) *ledger.Provider {
		ctx, cancel := pollCtx(t)
		defer cancel()
		body, err := api.Provider(ctx, keyAddress(t, a.home, a.addr))
		if err != nil || body.Record == nil {
			return nil
		}
		return body.Record
	}
	ruled := func(r *ledger.Provider) bool {
		if r == nil {
			return false
		}
		c := r.Challenges
		return c.Passed+c.Late+c.Missed+c.Failed > 0
	}

	load := newCPULoad(t, 2*runtime.NumCPU())
	var loadStart time.Time
	agents := []*loadAgent{{name: "mallory", overclaim: true}, {name: "carol"}, {name: "dave"}, {name: "erin"}}
	for _, a := range agents {
		a.home = filepath.Join(t.TempDir(), a.name)
		var k keyJSON
		gpunetJSON(t, &k, "keys", "add", a.name, "--home", a.home)
		a.addr = k.Address
		gpunetJSON(t, &map[string]any{}, "tx", "send", a.addr, "100sync", "--from", "alice", "--home", home)
	}
	for _, a := range agents {
		// Each agent measures the machine alone: the load is held, and so
		// are the agents started before it (their proofs, late anyway
		// under the load, wait the few seconds until it has registered).
		load.hold()
		thaw := freeze(t, agents)
		args := []string{"provider", "start", "--from", a.name, "--home", a.home, "--node", info.API,
			"--bench-time", "1s", "--region", "eu", "--price", "0.05sync", "--executors", "wasm"}
		if a.overclaim {
			args = append(args, "--fault-overclaim", strconv.Itoa(loadOverclaim))
		}
		a.proc = startProc(t, "provider "+a.name, args...)
		// Its benchmark comes before its registration, and its first
		// challenge at the earliest at the end of the block that
		// registers it.
		waitUntil(t, time.Minute, a.name+" registered", func() bool { return record(a) != nil })
		thaw()
		if a.overclaim {
			// The overclaimer's first challenge is on the idle machine,
			// where the deadline can tell its claim.
			waitUntil(t, 2*time.Minute, a.name+"'s first hardware challenge ruled", func() bool { return ruled(record(a)) })
			p := query(a.addr)
			t.Logf("%s (%s): claims %d GOPS; on the idle machine: passed %d late %d missed %d failed %d, proven %d GOPS (at %s)",
				a.name, a.addr, p.Record.Measured.Int8GOPS, p.Record.Challenges.Passed, p.Record.Challenges.Late,
				p.Record.Challenges.Missed, p.Record.Challenges.Failed, p.Record.Challenges.ProvenGOPS, time.Since(started).Round(time.Second))
			continue
		}
		load.run()
		if loadStart.IsZero() {
			loadStart = time.Now()
		}
		a.loadFrom = height()
		t.Logf("%s (%s) registered, claiming %d GOPS; load: %d busy loops from height %d (at %s)",
			a.name, a.addr, record(a).Measured.Int8GOPS, 2*runtime.NumCPU(), a.loadFrom, time.Since(started).Round(time.Second))
	}

	var want bytes.Buffer
	var c count.Counts
	if err := c.Add(bytes.NewReader(examples.WordcountInput)); err != nil {
		t.Fatal(err)
	}
	c.Report(&want)
	// Jobs one after another while the honest agents prove under the
	// load; then the load lasts until each honest agent's first challenge
	// is ruled (its late window is 50 deadlines: about 5 minutes).
	jobs := 0
	for ; jobs < loadJobs; jobs++ {
		runLoadJob(t, home, jobs+1, want.Bytes())
	}
	waitUntil(t, 6*time.Minute, "each honest agent's first hardware challenge ruled", func() bool {
		for _, a := range agents {
			if !a.overclaim && !ruled(record(a)) {
				return false
			}
		}
		return true
	})
	if soak := os.Getenv("GPUNET_CHALLENGE_SOAK"); soak != "" {
		d, err := time.ParseDuration(soak)
		if err != nil {
			t.Fatalf("GPUNET_CHALLENGE_SOAK=%s: %v", soak, err)
		}
		for ; time.Since(loadStart) < d; jobs++ {
			runLoadJob(t, home, jobs+1, want.Bytes())
		}
	}
	to := height()
	load.stop()
	t.Logf("load ended at height %d after %s; %d jobs run under it (at %s)", to, time.Since(loadStart).Round(time.Second), jobs, time.Since(started).Round(time.Second))

	final := map[string]loadProviderJSON{}
	var upTo uint64
	for _, a := range agents {
		final[a.addr] = query(a.addr)
		upTo = max(upTo, final[a.addr].Height)
	}
	rulings := challengeRulings(t, info.API, int64(upTo))
	byAddr := map[string]*loadAgent{}
	for _, a := range agents {
		byAddr[a.addr] = a
	}
	for _, r := range rulings {
		if a := byAddr[r.provider]; a != nil {
			t.Logf("height %d: %s %s %s", r.height, a.name, r.kind, r.attrs)
		}
	}
	// What this machine's CPU does with a prover's workers: the most any
	// agent measured (a benchmark on a busy machine reads low, not high),
	// the overclaimer's claim / loadOverclaim among them.
	var machineGOPS uint64
	for _, a := range agents {
		g := final[a.addr].Record.Measured.Int8GOPS
		if a.overclaim {
			g /= loadOverclaim
		}
		machineGOPS = max(machineGOPS, g)
	}
	for _, a := range agents {
		p := final[a.addr]
		ch := p.Record.Challenges
		t.Logf("%s: claims %d GOPS, counts %.0f GOPS (proven %v %d); passed %d late %d missed %d failed %d; stake %d, slashed %d, reputation %d",
			a.name, p.Record.Measured.Int8GOPS, p.TOPS*1000, ch.Proven, ch.ProvenGOPS, ch.Passed, ch.Late, ch.Missed, ch.Failed,
			p.Record.Stake, p.Record.Slashed, p.Record.Reputation)
		if a.overclaim {
			checkOverclaimCaught(t, a, p, rulings, machineGOPS, factor)
			continue
		}
		if p.Record.Slashed != 0 || len(p.Record.SlashEvents) != 0 || ch.Failed != 0 {
			t.Errorf("honest %s slashed %d usync (%d failed challenges, last: %q): %+v", a.name, p.Record.Slashed, ch.Failed, ch.LastFailure, p.Record.SlashEvents)
		}
		first := true
		for _, r := range rulings {
			if r.provider != a.addr {
				continue
			}
			if r.kind == "hw_challenge_failed" {
				t.Errorf("honest %s: %s at height %d: %s", a.name, r.kind, r.height, r.attrs)
			}
			if first && (r.height <= a.loadFrom || r.kind != "hw_challenge_passed" && r.kind != "hw_challenge_late") {
				t.Errorf("honest %s: its first ruling, under the load from height %d, is %s at height %d, want passed or late after it", a.name, a.loadFrom, r.kind, r.height)
			}
			first = false
		}
		if first {
			t.Errorf("honest %s: no hardware challenge ruled", a.name)
		}
		if !p.Schedulable {
			t.Errorf("honest %s is not schedulable after the load (stake %d)", a.name, p.Record.Stake)
		}
	}
}

// deadlineFactor is the chain's deadline / compute time of a hardware
// challenge: a claim more than this many times what a device does cannot
// be committed by the deadline (docs/challenge.md, "What the deadline can
// tell").
func deadlineFactor(t *testing.T, api string) float64 {
	t.Helper()
	p, err := chainclient.New(api).Params(t.Context())
	if err != nil || p.HWTargetMillis == 0 {
		t.Fatalf("params: %v (hw_target_millis %d)", err, p.HWTargetMillis)
	}
	target := float64(p.HWTargetMillis)
	return (target*float64(p.HWSlackPermille)/1000 + float64(p.HWAllowanceMillis)) / target
}

// checkOverclaimCaught checks that the overclaiming agent a got the ruling
// the rules give a claim the deadline can tell (its claim is more than
// factor times what its CPU does, machineGOPS): its first challenge, on
// the idle machine, is late and shows at most machineGOPS, which replaces
// its claim; no later one passes (each is sized at the claim again);
// nothing is slashed (a claim under hw_overclaim_factor times the device
// is measured, not punished); and its record counts at most machineGOPS.
func checkOverclaimCaught(t *testing.T, a *loadAgent, p loadProviderJSON, rulings []challengeRuling, machineGOPS uint64, factor float64) {
	t.Helper()
	claim := p.Record.Measured.Int8GOPS
	t.Logf("overclaiming %s: claims %d GOPS, the machine does %d: %.2f× (the deadline tells more than %.2f×)",
		a.name, claim, machineGOPS, float64(claim)/float64(machineGOPS), factor)
	n := 0
	for _, r := range rulings {
		if r.provider != a.addr || r.device != "0" {
			continue
		}
		n++
		switch {
		case n == 1 && r.kind != "hw_challenge_late":
			t.Errorf("overclaiming %s: its first challenge, on the idle machine, was %s at height %d (%s), want hw_challenge_late", a.name, r.kind, r.height, r.attrs)
		case r.kind == "hw_challenge_passed" || r.kind == "hw_challenge_failed":
			t.Errorf("overclaiming %s: %s at height %d (%s): a %d× claim is neither met nor slashed", a.name, r.kind, r.height, r.attrs, loadOverclaim)
		case r.kind == "hw_challenge_late":
			if shown, err := strconv.ParseUint(r.attr("shown_gops"), 10, 64); err != nil || shown > machineGOPS {
				t.Errorf("overclaiming %s: late at height %d shows %s GOPS, more than the machine does (%d)", a.name, r.height, r.attr("shown_gops"), machineGOPS)
			}
		}
	}
	if n == 0 {
		t.Errorf("overclaiming %s: no challenge on its CPU was ruled", a.name)
	}
	ch := p.Record.Challenges
	if p.Record.Slashed != 0 || ch.Failed != 0 {
		t.Errorf("overclaiming %s slashed %d usync (%d failed), want none for a %d× claim", a.name, p.Record.Slashed, ch.Failed, loadOverclaim)
	}
	if !ch.Proven || ch.ProvenGOPS > machineGOPS {
		t.Errorf("overclaiming %s: CPU ruling proven %v at %d GOPS, want at most the machine's %d (claim %d)", a.name, ch.Proven, ch.ProvenGOPS, machineGOPS, claim)
	}
	if len(p.Record.Inventory.GPUs) == 0 && p.TOPS*1000 > float64(machineGOPS) {
		t.Errorf("overclaiming %s counts %.0f GOPS in offers, want at most the machine's %d", a.name, p.TOPS*1000, machineGOPS)
	}
}

// freeze stops the agents' processes that have started (SIGSTOP) until
// thaw is called (SIGCONT), at the latest when the test ends.
func freeze(t *testing.T, agents []*loadAgent) (thaw func()) {
	t.Helper()
	var stopped []*proc
	for _, a := range agents {
		if a.proc == nil {
			continue
		}
		if err := a.proc.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatalf("freeze %s: %v", a.name, err)
		}
		stopped = append(stopped, a.proc)
	}
	var once sync.Once
	thaw = func() {
		once.Do(func() {
			for _, p := range stopped {
				p.cmd.Process.Signal(syscall.SIGCONT)
			}
		})
	}
	t.Cleanup(thaw) // before the agents' own cleanups, which signal them
	return thaw
}

// cpuLoad is n busy loops (sh spinning), started by the first run and
// held still (SIGSTOP) between hold and the next run.
type cpuLoad struct {
	t      *testing.T
	n      int
	ctx    context.Context
	cancel context.CancelFunc
	cmds   []*exec.Cmd
	once   sync.Once
}

// newCPULoad returns a load of n busy loops, none started yet. They end
// when stop is called or the test ends, and at the latest after ten
// minutes.
func newCPULoad(t *testing.T, n int) *cpuLoad {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	l := &cpuLoad{t: t, n: n, ctx: ctx, cancel: cancel}
	t.Cleanup(l.stop)
	return l
}

// run starts the busy loops, or lets them go on after hold.
func (l *cpuLoad) run() {
	l.t.Helper()
	if l.cmds == nil {
		for range l.n {
			cmd := exec.CommandContext(l.ctx, "sh", "-c", "while :; do :; done")
			cmd.WaitDelay = 5 * time.Second
			if err := cmd.Start(); err != nil {
				l.stop()
				l.t.Fatalf("start a busy loop: %v", err)
			}
			l.cmds = append(l.cmds, cmd)
		}
		return
	}
	l.signal(syscall.SIGCONT)
}

// hold stops the busy loops where they are until the next run.
func (l *cpuLoad) hold() { l.signal(syscall.SIGSTOP) }

func (l *cpuLoad) signal(sig syscall.Signal) {
	for _, c := range l.cmds {
		if err := c.Process.Signal(sig); err != nil {
			l.t.Errorf("busy loop %d: %v: %v", c.Process.Pid, sig, err)
		}
	}
}

// stop ends the busy loops.
func (l *cpuLoad) stop() {
	l.once.Do(func() {
		l.cancel() // SIGKILL ends a stopped process too
		for _, c := range l.cmds {
			c.Wait()
		}
	})
}

// runLoadJob runs the wordcount example with `gpunet job run` (at most two
// minutes) and checks its output against the program's run natively. A
// failure is reported and the test goes on, so that what the providers'
// records say is reported too.
func runLoadJob(t *testing.T, home string, n int, want []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "out")
	start := time.Now()
	cmd := exec.CommandContext(ctx, gpunetBin, "job", "run", "../../examples/wordcount/job.yaml", "--from", "alice", "--home", home, "--out", out, "--output", "json")
	cmd.Env = cleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Errorf("job %d under load: %v after %s\nstdout: %s\nstderr: %s", n, err, time.Since(start).Round(time.Second), stdout.String(), tail(stderr.String(), 2000))
		return
	}
	got, err := os.ReadFile(filepath.Join(out, "out", "counts.txt"))
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("job %d under load delivered %q (%v), want the native output", n, got, err)
		return
	}
	t.Logf("job %d under load succeeded in %s", n, time.Since(start).Round(100*time.Millisecond))
}

// challengeRuling is a hardware challenge's ruling as the chain's events
// show it.
type challengeRuling struct {
	height   int64
	kind     string // hw_challenge_passed, _late, _missed, _busy or _failed
	provider string
	device   string
	attrs    string // all of them, for the log
	raw      map[string]string
}

func (r challengeRuling) attr(k string) string { return r.raw[k] }

// challengeRulings reads blocks 1 to upTo through the API and returns the
// hardware challenges' rulings in them, in chain order.
func challengeRulings(t *testing.T, api string, upTo int64) []challengeRuling {
	t.Helper()
	var out []challengeRuling
	for h := int64(1); h <= upTo; h++ {
		resp, err := http.Get(fmt.Sprintf("%s/v1/blocks/%d", api, h))
		if err != nil {
			t.Fatalf("block %d: %v", h, err)
		}
		var b apiwire.Block
		err = json.NewDecoder(resp.Body).Decode(&b)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil {
			t.Fatalf("block %d: %s, %v", h, resp.Status, err)
		}
		var evs []ledger.Event // the txs' events, then the block's own
		for _, tx := range b.Txs {
			evs = append(evs, tx.Events...)
		}
		evs = append(evs, b.Events...)
		for _, e := range evs {
			switch e.Type {
			case "hw_challenge_passed", "hw_challenge_late", "hw_challenge_missed", "hw_challenge_busy", "hw_challenge_failed":
			default:
				continue
			}
			r := challengeRuling{height: h, kind: e.Type, raw: map[string]string{}}
			var s []string
			for _, a := range e.Attrs {
				r.raw[a.Key] = a.Value
				if a.Key != "provider" {
					s = append(s, a.Key+"="+a.Value)
				}
			}
			r.provider, r.device, r.attrs = r.raw["provider"], r.raw["device"], strings.Join(s, " ")
			out = append(out, r)
		}
	}
	return out
}
