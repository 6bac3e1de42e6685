package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
)

// verdictNet is a devnet whose providers are `gpunet provider start`
// processes, each one killable on its own.
type verdictNet struct {
	home  string
	procs map[string]*proc  // name → agent
	names map[string]string // address → name
	dead  map[string]bool   // killed agents
}

// kill kills the agent name with SIGKILL.
func (n *verdictNet) kill(name string) {
	n.procs[name].kill()
	n.dead[name] = true
}

// startProvider adds and starts the provider agent name, funded by bob (so
// that alice's balance moves only with her jobs).
func (n *verdictNet) startProvider(t *testing.T, name string) {
	t.Helper()
	p, addr := startProvider(t, n.home, name, "bob")
	n.procs[name], n.names[addr] = p, name
}

// waitOffers waits until exactly the named providers are schedulable.
func (n *verdictNet) waitOffers(t *testing.T, names ...string) {
	t.Helper()
	slices.Sort(names)
	cl := nodeAPI(t, n.home, "")
	waitUntil(t, 90*time.Second, fmt.Sprintf("offers from exactly %v", names), func() bool {
		ctx, cancel := pollCtx(t)
		defer cancel()
		offers, err := cl.Offers(ctx, "", "", false)
		if err != nil {
			t.Fatalf("offers: %v", err)
		}
		var got []string
		for _, o := range offers {
			got = append(got, n.names[o.Address])
		}
		slices.Sort(got)
		return slices.Equal(got, names)
	})
	// What the CLI lists.
	var offers []struct {
		Address string `json:"address"`
	}
	gpunetJSON(t, &offers, "offers", "--home", n.home)
	var got []string
	for _, o := range offers {
		got = append(got, n.names[o.Address])
	}
	slices.Sort(got)
	if !slices.Equal(got, names) {
		t.Fatalf("gpunet offers lists %v, want %v", got, names)
	}
}

// chainParams reads the parameters the bound is made of from the chain.
func (n *verdictNet) chainParams(t *testing.T) ledger.Params {
	t.Helper()
	var table map[string]struct {
		Value uint64 `json:"value"`
	}
	gpunetJSON(t, &table, "query", "params", "--home", n.home)
	p := ledger.DefaultParams()
	for name, field := range map[string]*uint64{
		"reveal_timeout": &p.RevealTimeout, "job_grant_timeout": &p.JobGrantTimeout, "job_start_timeout": &p.JobStartTimeout,
		"job_result_grace": &p.JobResultGrace, "job_max_attempts": &p.JobMaxAttempts, "max_replicas": &p.MaxReplicas,
		"slash_compensation_bps": &p.SlashCompensationBps,
	} {
		v, ok := table[name]
		if !ok {
			t.Fatalf("query params has no %s", name)
		}
		*field = v.Value
	}
	return p
}

// job reads job id as its owner's CLI shows it, without --from: the owner
// grants nothing, it is offline.
func (n *verdictNet) job(t *testing.T, id string) ledger.Job {
	t.Helper()
	var j ledger.Job
	gpunetJSON(t, &j, "job", "status", id, "--home", n.home)
	return j
}

// poll reads job id as job does, through the API: what the waits use.
func (n *verdictNet) poll(t *testing.T, id string) ledger.Job {
	t.Helper()
	return chainJob(t, nodeAPI(t, n.home, ""), id)
}

// TestPrimaryKilledBeforeReveal (issue 26, "a job never stays verifying
// forever"): the owner submits a spot job and goes offline; the primary, a
// new provider so always audited, commits, hands the job key to the audit
// replica and is killed with SIGKILL before it reveals.
//
// With no other provider, the audit replica's result is the only one
// revealed, no majority of two, and nobody can take the escalation replica
// the job asks for: the job fails within the verdict window (reveal
// timeout + grant timeout) of the audit's commit, the killed primary slashed
// as one that withheld its reveal, the lone result neither paid nor
// slashed, the owner's escrow refunded in full plus its compensation share
// of the slash. Before, the job asked for the replica again at every grant
// deadline and stayed verifying with the escrow locked.
//
// Then, with a third provider started after the next primary is killed,
// the escalation replica gets the job key from the audit replica, whose
// own key was a handover (the owner is still offline), and the job is
// validated by the two replicas that revealed.
func TestPrimaryKilledBeforeReveal(t *testing.T) {
	parallel(t, weightLight)
	home := t.TempDir()
	startDevnet(t, home, "--block-time", "100ms", "--example=false")
	n := &verdictNet{home: home, procs: map[string]*proc{}, names: map[string]string{}, dead: map[string]bool{}}
	n.startProvider(t, "carol")
	n.startProvider(t, "dave")
	n.waitOffers(t, "carol", "dave")
	p := n.chainParams(t)

	dir := t.TempDir()
	wasm, err := os.ReadFile("../../examples/mandelbrot/mandelbrot.wasm")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "m.wasm"), wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	// Two seconds or so of wasm: the audit replica's run is the window in
	// which the primary has committed and cannot reveal yet.
	spec := `name: killed-primary
executor: wasm
module: ./m.wasm
args: ["1200", "800", "3000"]
outputs: [/out]
resources: {cpu: 1, memory: 256MiB, gpu: {count: 0}}
max_price: 0.5
timeout: 2m
verification: spot
`
	specPath := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}

	// submit submits the job, has the owner grant its primary the key once
	// (at submit, or with one status --from when it was placed later), and
	// returns its id and the primary's name.
	submit := func(t *testing.T) (string, string) {
		t.Helper()
		var sub struct {
			ID uint64 `json:"id"`
		}
		gpunetJSON(t, &sub, "job", "submit", specPath, "--from", "alice", "--home", home)
		id := fmt.Sprint(sub.ID)
		var j ledger.Job
		waitUntil(t, 30*time.Second, "job "+id+" placed", func() bool {
			j = n.poll(t, id)
			return len(j.Assignments) > 0 || j.Done()
		})
		j = n.job(t, id)
		if j.KeyCommitment == nil {
			t.Fatalf("job %s has no key commitment: %+v", id, j)
		}
		if j.Assignments[0].KeyGrant == nil {
			if r := gpunet(t, "job", "status", id, "--from", "alice", "--home", home); r.code != 0 {
				t.Fatalf("%s", r)
			}
		}
		return id, n.names[j.Assignments[0].Provider.String()]
	}

	// killAfterHandover waits until the primary of job id has committed and
	// handed the key to the audit replica, kills it, and returns the
	// auditor's name.
	killAfterHandover := func(t *testing.T, id, primary string) string {
		t.Helper()
		var j ledger.Job
		waitUntil(t, 90*time.Second, "the primary's handover to the audit replica", func() bool {
			j = n.poll(t, id)
			return j.Done() || len(j.Assignments) == 2 && j.Assignments[1].HandedBy != nil
		})
		if j.Done() || n.names[j.Assignments[1].HandedBy.String()] != primary {
			t.Fatalf("job %s: %s (%s), want the audit replica handed the key by %s: %+v", id, j.State, j.Reason, primary, j.Assignments)
		}
		n.kill(primary)
		j = n.job(t, id)
		if a := j.Assignments[0]; a.Commitment == nil || a.Result != nil || j.Revealing {
			t.Fatalf("killed %s, but not between its commit and its reveal: revealing %v, %+v", primary, j.Revealing, a)
		}
		auditor := n.names[j.Assignments[1].Provider.String()]
		t.Logf("job %s: killed the primary %s after its commit and handover, before its reveal; %s audits", id, primary, auditor)
		return auditor
	}

	// waitFinal follows job id to its final state, noting when its reveal
	// window opened, within limit.
	waitFinal := func(t *testing.T, id string, limit time.Duration) (ledger.Job, time.Time) {
		t.Helper()
		var j ledger.Job
		var opened time.Time
		waitUntil(t, limit, "job "+id+" final", func() bool {
			j = n.poll(t, id)
			if j.Revealing && opened.IsZero() {
				opened = time.Now()
			}
			return j.Done()
		})
		return n.job(t, id), opened
	}

	// settled checks what the killed primary and the owner got: the
	// primary slashed as a withheld reveal and unpaid, the owner nothing
	// charged and the compensation share of the slash paid.
	settled := func(t *testing.T, j ledger.Job, primary string, before uint64) {
		t.Helper()
		a := j.Assignments[0]
		if n.names[a.Provider.String()] != primary || a.Outcome != ledger.OutcomeUnrevealed || a.Slashed == 0 || a.Paid != 0 || a.Result != nil {
			t.Errorf("the killed primary %s: outcome %q slashed %d paid %d revealed %v; want unrevealed, slashed, unpaid", primary, a.Outcome, a.Slashed, a.Paid, a.Result != nil)
		}
		comp := a.Slashed * p.SlashCompensationBps / 10_000
		if after := balance(t, "alice", "--home", home); j.Cost != 0 || j.Fee != 0 || j.Escrow != 0 || after != before+comp {
			t.Errorf("owner: cost %d fee %d escrow left %d, balance %d → %d; want nothing charged and %d compensation", j.Cost, j.Fee, j.Escrow, before, after, comp)
		}
	}

	t.Run("nobody free to check", func(t *testing.T) {
		before := balance(t, "alice", "--home", home)
		id, primary := submit(t)
		auditor := killAfterHandover(t, id, primary)
		window := time.Duration(ledger.VerdictWindow(p)) * time.Second
		j, opened := waitFinal(t, id, 90*time.Second+window)
		if opened.IsZero() {
			t.Fatalf("job %s ended without a reveal window: %s (%s)", id, j.State, j.Reason)
		}
		// The bound: the verdict window after the audit's commit, which
		// opened the reveal (20 s of slack for blocks and polling here);
		// on the chain's clock, the job's timeout plus the verdict windows
		// after the audit replica started.
		if took := time.Since(opened); took > window+20*time.Second {
			t.Errorf("final %s after the reveal opened; the verdict window is %s", took.Round(time.Second), window)
		}
		au := j.Assignments[1]
		if lim := au.StartedAt + int64(j.Spec.TimeoutSeconds+p.JobResultGrace+ledger.VerdictWindow(p)); j.FinishedAt > lim {
			t.Errorf("finished at %d, after %d: the audit's start + timeout + result grace + verdict window", j.FinishedAt, lim)
		}
		if j.State != ledger.JobFailed || j.Verdict != ledger.VerdictNoMajority || j.Delivered != nil || len(j.Assignments) != 2 {
			t.Fatalf("job %s: %s %s delivered %v (%s); want failed, no majority", id, j.State, j.Verdict, j.Delivered, j.Reason)
		}
		if n.names[au.Provider.String()] != auditor || au.Outcome != ledger.OutcomeNoMajority || au.Paid != 0 || au.Slashed != 0 || j.AuditCost != 0 {
			t.Errorf("the lone revealer %s: outcome %q paid %d slashed %d (audit cost %d); want no_majority, neither paid nor slashed", auditor, au.Outcome, au.Paid, au.Slashed, j.AuditCost)
		}
		settled(t, j, primary, before)
		t.Logf("job %s: %s in %s after its reveal opened: %s", id, j.State, time.Since(opened).Round(time.Second), j.Reason)
		// It stays so: no replica is asked for again.
		time.Sleep(2 * time.Second)
		if again := n.job(t, id); again.FinishedAt != j.FinishedAt || again.Reason != j.Reason {
			t.Fatalf("the finished job changed: %+v", again)
		}
	})
	if t.Failed() {
		return
	}

	t.Run("the escalation replica gets the key by handover", func(t *testing.T) {
		alive := slices.DeleteFunc([]string{"carol", "dave"}, func(s string) bool { return n.dead[s] })
		n.startProvider(t, "erin")
		n.waitOffers(t, append(alive, "erin")...)
		before := balance(t, "alice", "--home", home)
		id, primary := submit(t)
		auditor := killAfterHandover(t, id, primary)
		// A third provider, only now: the audit is placed, the escalation
		// is not asked for yet.
		n.startProvider(t, "frank")
		j, _ := waitFinal(t, id, 4*time.Minute)
		if j.State != ledger.JobSucceeded || j.Verdict != ledger.VerdictValidated || len(j.Assignments) != 3 {
			t.Fatalf("job %s: %s %s on %d replicas (%s): %+v", id, j.State, j.Verdict, len(j.Assignments), j.Reason, j.Assignments)
		}
		au, esc := j.Assignments[1], j.Assignments[2]
		if n.names[au.Provider.String()] != auditor || au.HandedBy == nil || n.names[au.HandedBy.String()] != primary {
			t.Errorf("audit replica %+v: want %s, its key handed over by %s", au, auditor, primary)
		}
		if n.names[esc.Provider.String()] != "frank" || !esc.Extra || esc.HandedBy == nil || n.names[esc.HandedBy.String()] != auditor {
			t.Errorf("escalation replica %+v: want frank's, its key handed over by the audit replica %s", esc, auditor)
		}
		for _, a := range []ledger.Assignment{au, esc} {
			if a.Outcome != ledger.OutcomeMajority || a.Paid == 0 || a.Slashed != 0 {
				t.Errorf("%s: outcome %q paid %d slashed %d; want majority, paid by the treasury", n.names[a.Provider.String()], a.Outcome, a.Paid, a.Slashed)
			}
		}
		settled(t, j, primary, before)
		t.Logf("job %s: %s, %s (escalation by %s, key from %s)", id, j.State, j.Reason, "frank", auditor)
	})
}
