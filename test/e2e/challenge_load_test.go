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
	"testing"
	"time"

	"github.com/gpunet/gpunet/examples"
	"github.com/gpunet/gpunet/examples/wordcount/count"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/ledger"
)

// The challenge-under-load test's settings. A 1-s challenge (at the
// claimed throughput) gets a 4.25-s deadline on a devnet (×1.25 slack,
// plus three 1-s blocks of allowance), so on an idle machine the deadline
// tells a claim 4.25 times too high from an honest one: an overclaim of 6
// is late on its first challenge (6 s of work against 4.25). A device is
// challenged again 75 s (75 × 1 s) after a passed challenge, after a
// quarter of that after a late one. The load lasts at least loadMin, and
// on until every honest provider has had a challenge ruled under it, at
// most loadMax. (A 3-s challenge tells the same apart with a 225-s gap,
// which made this test alone take five minutes of the e2e suite.)
const (
	loadChallengeTime = "1s"
	loadMin           = 90 * time.Second
	loadMax           = 150 * time.Second
	loadOverclaim     = 6
	// overclaimCaughtWithin is how many of its challenges an overclaimer of
	// more than the deadline's factor takes to count at most what its
	// device does (docs/challenge.md, "An overclaimer gains nothing after
	// its first challenge"): its first is late, and the throughput it
	// shows replaces the claim.
	overclaimCaughtWithin = 1
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

func (p loadProviderJSON) ruled() uint64 {
	c := p.Record.Challenges
	return c.Passed + c.Late + c.Missed + c.Failed
}

// loadAgent is a `gpunet provider start` process with its own home.
type loadAgent struct {
	name, home, addr string
	overclaim        bool
}

// TestChallengesUnderLoad: an honest provider on a busy machine is never
// slashed (issue 26). A devnet with short hardware challenges, three
// honest `gpunet provider start` agents and one that declares six times
// the throughput it measured (--fault-overclaim 6), each in its own home;
// each agent measures the idle machine and takes its first challenge there.
// Then busy loops, twice as many as the machine has cores, run for one
// and a half to two and a half minutes (see loadMin), while alice runs
// wordcount jobs one after another. No honest provider is slashed (its record and the
// chain's events), each has a challenge ruled under the load (passed, or
// late: a late proof measures the device and is not slashed), and every
// job succeeds with the right output. The overclaimer comes to count at
// most what the machine's CPU does within overclaimCaughtWithin
// challenges (checkOverclaimCaught), and passes none under the load.
func TestChallengesUnderLoad(t *testing.T) {
	parallel(t, cpuBudget)
	home := t.TempDir()
	_, info := startDevnet(t, home, "--hw-challenges", "--hw-challenge-time", loadChallengeTime, "--block-time", "1s")
	query := func(addr string) loadProviderJSON {
		t.Helper()
		var p loadProviderJSON
		gpunetJSON(t, &p, "query", "provider", addr, "--home", home)
		return p
	}
	height := func() int64 { return status(t, "--home", home).Height }

	// One agent at a time, so that each measures a machine that runs no
	// other benchmark or proof: its claim is the idle machine's.
	agents := []*loadAgent{{name: "carol"}, {name: "dave"}, {name: "erin"}, {name: "mallory", overclaim: true}}
	for _, a := range agents {
		a.home = filepath.Join(t.TempDir(), a.name)
		var k keyJSON
		gpunetJSON(t, &k, "keys", "add", a.name, "--home", a.home)
		a.addr = k.Address
		gpunetJSON(t, &map[string]any{}, "tx", "send", a.addr, "100sync", "--from", "alice", "--home", home)
		args := []string{"provider", "start", "--from", a.name, "--home", a.home, "--node", info.API,
			"--bench-time", "1s", "--region", "eu", "--price", "0.05sync", "--executors", "wasm"}
		if a.overclaim {
			args = append(args, "--fault-overclaim", strconv.Itoa(loadOverclaim))
		}
		startProc(t, "provider "+a.name, args...)
		addr := keyAddress(t, a.home, a.addr)
		waitUntil(t, 2*time.Minute, a.name+" registered and its first hardware challenge ruled", func() bool {
			// Through the API (the body `query provider` prints): a
			// CLI process every poll would load the machine it measures.
			ctx, cancel := pollCtx(t)
			defer cancel()
			body, err := nodeAPI(t, home, "").Provider(ctx, addr)
			if err != nil {
				return false
			}
			var p loadProviderJSON
			b, err := json.Marshal(body)
			return err == nil && json.Unmarshal(b, &p) == nil && p.ruled() > 0
		})
		p := query(a.addr)
		t.Logf("%s (%s): claims %d GOPS; idle: passed %d late %d missed %d failed %d, proven %d GOPS",
			a.name, a.addr, p.Record.Measured.Int8GOPS, p.Record.Challenges.Passed, p.Record.Challenges.Late,
			p.Record.Challenges.Missed, p.Record.Challenges.Failed, p.Record.Challenges.ProvenGOPS)
	}

	var want bytes.Buffer
	var c count.Counts
	if err := c.Add(bytes.NewReader(examples.WordcountInput)); err != nil {
		t.Fatal(err)
	}
	c.Report(&want)

	from := height()
	atStart := map[string]uint64{}
	for _, a := range agents {
		atStart[a.addr] = query(a.addr).ruled()
	}
	// allRuled reports whether every honest provider has had a challenge
	// ruled since the load started.
	allRuled := func() bool {
		for _, a := range agents {
			if !a.overclaim && query(a.addr).ruled() == atStart[a.addr] {
				return false
			}
		}
		return true
	}
	loadStart := time.Now()
	stopLoad := startCPULoad(t, 2*runtime.NumCPU(), loadMax)
	t.Logf("load: %d busy loops from height %d", 2*runtime.NumCPU(), from)
	jobs := 0
	for {
		jobs++
		runLoadJob(t, home, jobs, want.Bytes())
		if d := time.Since(loadStart); d >= loadMax || d >= loadMin && allRuled() {
			break
		}
		select {
		case <-t.Context().Done():
			return
		case <-time.After(15 * time.Second):
		}
	}
	to := height()
	stopLoad()
	t.Logf("load ended at height %d after %s; %d jobs run under it", to, time.Since(loadStart).Round(time.Second), jobs)

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
			checkOverclaimCaught(t, a, p, rulings, from, to, machineGOPS, deadlineFactor(t, info.API))
			continue
		}
		if p.Record.Slashed != 0 || len(p.Record.SlashEvents) != 0 || ch.Failed != 0 {
			t.Errorf("honest %s slashed %d usync (%d failed challenges, last: %q): %+v", a.name, p.Record.Slashed, ch.Failed, ch.LastFailure, p.Record.SlashEvents)
		}
		underLoad := 0
		for _, r := range rulings {
			if r.provider != a.addr {
				continue
			}
			if r.kind == "hw_challenge_failed" {
				t.Errorf("honest %s: %s at height %d: %s", a.name, r.kind, r.height, r.attrs)
			}
			if r.height >= from && r.height <= to && (r.kind == "hw_challenge_passed" || r.kind == "hw_challenge_late") {
				underLoad++
			}
		}
		if underLoad == 0 {
			t.Errorf("honest %s: no hardware challenge passed or late between heights %d and %d (under load)", a.name, from, to)
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

// checkOverclaimCaught checks that the overclaiming agent a comes to count
// at most what its CPU does (machineGOPS) within overclaimCaughtWithin
// rulings on its CPU, counted from its first if its claim is more than
// factor times machineGOPS (the deadline can tell it on an idle machine),
// else from its first under the load (heights from to to), where the
// deadline tells it from what the device does then; that no challenge of
// it passes under the load; and that its record counts at most
// machineGOPS after a ruling that is not a pass.
func checkOverclaimCaught(t *testing.T, a *loadAgent, p loadProviderJSON, rulings []challengeRuling, from, to int64, machineGOPS uint64, factor float64) {
	t.Helper()
	claim := p.Record.Measured.Int8GOPS
	idleTells := float64(claim) > factor*float64(machineGOPS)
	t.Logf("overclaiming %s: claims %d GOPS, the machine does %d: %.2f× (the deadline tells more than %.2f× on an idle machine)",
		a.name, claim, machineGOPS, float64(claim)/float64(machineGOPS), factor)
	var last challengeRuling
	counted, caught := 0, 0
	for _, r := range rulings {
		if r.provider != a.addr || r.device != "0" || int64(p.Height) < r.height {
			continue
		}
		last = r
		if !idleTells && r.height < from {
			continue // ruled on before the load, within what the deadline can tell there
		}
		counted++
		switch r.kind {
		case "hw_challenge_passed":
			if r.height <= to || idleTells {
				t.Errorf("overclaiming %s passed a challenge at height %d (claim %d GOPS, the machine does %d): %s", a.name, r.height, claim, machineGOPS, r.attrs)
			}
		case "hw_challenge_late":
			if shown, err := strconv.ParseUint(r.attr("shown_gops"), 10, 64); err != nil || shown > machineGOPS {
				t.Errorf("overclaiming %s: late at height %d shows %s GOPS, more than the machine does (%d)", a.name, r.height, r.attr("shown_gops"), machineGOPS)
			} else if caught == 0 {
				caught = counted
			}
		case "hw_challenge_missed", "hw_challenge_failed": // counts 0, or what it showed
			if caught == 0 {
				caught = counted
			}
		}
	}
	switch {
	case counted == 0:
		t.Errorf("overclaiming %s: no challenge on its CPU was ruled (idle tells: %v)", a.name, idleTells)
	case caught == 0 || caught > overclaimCaughtWithin:
		t.Errorf("overclaiming %s: counted at most the machine's %d GOPS from ruling %d of %d on its CPU (idle tells: %v), want within %d",
			a.name, machineGOPS, caught, counted, idleTells, overclaimCaughtWithin)
	}
	if last.kind == "hw_challenge_passed" {
		t.Logf("overclaiming %s: its latest ruling, at height %d after the load, passed: its claim stands until the next", a.name, last.height)
		return
	}
	ch := p.Record.Challenges
	if !ch.Proven || ch.ProvenGOPS > machineGOPS {
		t.Errorf("overclaiming %s: CPU ruling proven %v at %d GOPS, want at most the machine's %d (claim %d)", a.name, ch.Proven, ch.ProvenGOPS, machineGOPS, claim)
	}
	if len(p.Record.Inventory.GPUs) == 0 && p.TOPS*1000 > float64(machineGOPS) {
		t.Errorf("overclaiming %s counts %.0f GOPS in offers, want at most the machine's %d", a.name, p.TOPS*1000, machineGOPS)
	}
}

// startCPULoad runs n busy loops (sh spinning) until stop is called, the
// test ends, or d plus a minute has passed, whichever comes first.
func startCPULoad(t *testing.T, n int, d time.Duration) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d+time.Minute)
	var cmds []*exec.Cmd
	for range n {
		cmd := exec.CommandContext(ctx, "sh", "-c", "while :; do :; done")
		cmd.WaitDelay = 5 * time.Second
		if err := cmd.Start(); err != nil {
			cancel()
			for _, c := range cmds {
				c.Wait()
			}
			t.Fatalf("start a busy loop: %v", err)
		}
		cmds = append(cmds, cmd)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			for _, c := range cmds {
				c.Wait()
			}
		})
	}
	t.Cleanup(stop)
	return stop
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
	kind     string // hw_challenge_passed, _late, _missed or _failed
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
			case "hw_challenge_passed", "hw_challenge_late", "hw_challenge_missed", "hw_challenge_failed":
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
