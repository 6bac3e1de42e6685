package ledger_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

const (
	engineA = "wasmtime-39.0.1/linux-amd64/cranelift-speed/wasi-gpunet-1"
	engineB = "wazero-1.12.0/linux-amd64/wasi-gpunet-1"
)

// engineChain has a funded consumer and providers, a treasury for
// audits, and a staked CPU provider per engine given, provs[i] asking
// 36,000 × (i+1) usync per core-hour and running engines[i].
func engineChain(t *testing.T, engines ...string) *lt.Chain {
	t.Helper()
	g := lt.Genesis(100_000_000_000, append([]string{"consumer"}, provNames...)...)
	g.Params.LivenessRatePPM = 0
	g.Treasury = 1_000_000_000
	c := lt.NewChain(t, g)
	for i, e := range engines {
		addEngineProvider(t, c, i, e)
	}
	return c
}

// addEngineProvider registers and stakes provs[i] running engine.
func addEngineProvider(t *testing.T, c *lt.Chain, i int, engine string) {
	t.Helper()
	info := lt.ProviderInfo("", 0, uint64(36_000*(i+1)))
	info.WasmEngine = engine
	must(t, []ledger.TxResult{send(t, c, provs[i], &ledger.MsgRegisterProvider{ProviderInfo: info})})
	must(t, []ledger.TxResult{send(t, c, provs[i], &ledger.MsgStake{Amount: stake})})
}

func fullJob(name string) ledger.JobSpec {
	s := lt.WasmJob(name, 1_000_000, 600)
	s.Verification = ledger.VerifyFull
	return s
}

func enginesOf(j *ledger.Job) []string {
	var out []string
	for _, a := range j.Assignments {
		out = append(out, a.WasmEngine)
	}
	return out
}

// TestReplicasWaitForOneEngine: a full wasm job over two providers of two
// engines waits, saying so in its reason and its wait code (and a quote
// says the same), until a second provider of one engine comes; then both
// replicas run on that engine. A wasm job whose results are not compared
// is placed over any engine, and records the one it ran on.
func TestReplicasWaitForOneEngine(t *testing.T) {
	c := engineChain(t, engineA, engineB)
	spec := fullJob("full")
	q, err := ledger.QuoteJob(c.KV, &spec)
	if err != nil {
		t.Fatal(err)
	}
	if m := q.Miss; q.Code != ledger.QuoteNoEngine || m == nil || m.Engines != 2 || m.Fitting != 2 || m.Fit != 1 {
		t.Fatalf("quote over two engines: code %q, miss %+v; want 2 fitting on 2 engines, 1 on one", q.Code, m)
	}
	must(t, []ledger.TxResult{submit(t, c, spec)})
	j := job(t, c, 1)
	if m := unplaced(j); j.State != ledger.JobQueued || j.WaitCode != ledger.QuoteNoEngine || m == nil || m.Fitting != 2 || m.Engines != 2 || m.Fit != 1 || m.Need != 2 {
		t.Fatalf("full job over two engines: %s, code %q, miss %+v, assignments %v", j.State, j.WaitCode, m, enginesOf(j))
	}

	// Not compared: placed on the cheapest, whatever its engine.
	must(t, []ledger.TxResult{submit(t, c, lt.WasmJob("once", 1_000_000, 600))})
	if j := job(t, c, 2); j.State != ledger.JobAssigned || len(j.Assignments) != 1 || j.Assignments[0].WasmEngine != engineA || j.WaitCode != "" {
		t.Fatalf("unverified job: %s %v code %q (%s)", j.State, enginesOf(j), j.WaitCode, j.Reason)
	}

	addEngineProvider(t, c, 2, engineB)
	j = job(t, c, 1)
	if j.State != ledger.JobAssigned || len(j.Assignments) != 2 || j.WaitCode != "" {
		t.Fatalf("with a second %s provider: %s, code %q (%s)", engineB, j.State, j.WaitCode, j.Reason)
	}
	for _, a := range j.Assignments {
		if a.WasmEngine != engineB || (a.Provider != prov2.Addr && a.Provider != prov3.Addr) {
			t.Fatalf("replicas %v on %v, want both on %s (prov2, prov3)", enginesOf(j), a.Provider, engineB)
		}
	}
	if got := j.PinnedEngine(); got != engineB {
		t.Fatalf("pinned engine %q, want %q", got, engineB)
	}
}

// TestAuditReplicaSameEngine: a spot job's audit replica is drawn among
// the providers of the primary's engine: the cheaper provider of another
// engine is passed over; with none of the engine free the audit waits,
// with the engine named in its reason and no_engine as its code.
func TestAuditReplicaSameEngine(t *testing.T) {
	c := engineChain(t, engineA, engineB, engineA)
	must(t, []ledger.TxResult{submit(t, c, spotJob("spot"))})
	primary := runReplicas(t, c, 1, 100, nil)[0]
	if primary.Addr != prov1.Addr {
		t.Fatalf("primary %s, want the cheapest, prov1", primary.Addr)
	}
	j := job(t, c, 1)
	if !j.AuditDrawn || len(j.Assignments) != 2 {
		t.Fatalf("no audit placed: %s (%s)", j.State, j.Reason)
	}
	if a := j.Assignments[1]; a.Provider != prov3.Addr || a.WasmEngine != engineA {
		t.Fatalf("audit on %s (%s), want prov3 on %s, not the cheaper prov2 on %s", a.Provider, a.WasmEngine, engineA, engineB)
	}

	// No provider of the engine free: the audit waits for one.
	c = engineChain(t, engineA, engineB)
	must(t, []ledger.TxResult{submit(t, c, spotJob("spot"))})
	runReplicas(t, c, 1, 100, nil)
	j = job(t, c, 1)
	if m := unplaced(j); len(j.Assignments) != 1 || j.WaitCode != ledger.QuoteNoEngine || m == nil || m.OtherEngine != 1 || m.Pinned != engineA || m.Assigned != 1 || m.Need != 1 {
		t.Fatalf("audit with only another engine free: %d assignments, code %q, miss %+v; want 1 on another engine than %s", len(j.Assignments), j.WaitCode, m, engineA)
	}
	addEngineProvider(t, c, 2, engineA)
	if j = job(t, c, 1); len(j.Assignments) != 2 || j.Assignments[1].Provider != prov3.Addr || j.WaitCode != "" {
		t.Fatalf("audit after a provider of the engine came: %v (%s)", enginesOf(j), j.Reason)
	}
}

// TestTieBreakerSameEngine: when the primary and its audit disagree, the
// tie-breaking replica runs their engine too, passing over two cheaper
// free providers of another.
func TestTieBreakerSameEngine(t *testing.T) {
	c := engineChain(t, engineA, engineB, engineA, engineB, engineA)
	must(t, []ledger.TxResult{submit(t, c, spotJob("spot"))})
	cheater := runReplicas(t, c, 1, 100, map[address.Address]bool{prov1.Addr: true})[0]
	auditor := runReplicas(t, c, 1, 100, nil)[0]
	if auditor.Addr != prov3.Addr {
		t.Fatalf("audit on %s, want prov3 (engine A)", auditor.Addr)
	}
	must(t, []ledger.TxResult{reveal(t, c, 1, cheater, true)})
	must(t, []ledger.TxResult{reveal(t, c, 1, auditor, false)})
	j := job(t, c, 1)
	if j.Replicas != 3 || len(j.Assignments) != 3 {
		t.Fatalf("no tie-breaker placed: replicas %d, %v (%s)", j.Replicas, enginesOf(j), j.Reason)
	}
	if a := j.Assignments[2]; a.Provider != provs[4].Addr || a.WasmEngine != engineA {
		t.Fatalf("tie-breaker on %s (%s), want prov5 on %s", a.Provider, a.WasmEngine, engineA)
	}
}

// TestWasmEngineDeclaration: a declaration offering wasm names a well
// formed engine; one not offering wasm names none. Registration and update
// refuse the rest, naming wasm_engine.
func TestWasmEngineDeclaration(t *testing.T) {
	for _, tc := range []struct {
		name   string
		engine string
		execs  []string
		want   string // in the error; "" for accepted
	}{
		{"engine", engineA, []string{"wasm"}, ""},
		{"as the sandbox names it", "wasmtime-39.0.1/linux-arm64/cranelift-speed,relaxed-simd-deterministic,no-threads/wasi-gpunet-1", []string{"wasm"}, ""},
		{"wazero", engineB, []string{"oci", "wasm"}, ""},
		{"no engine", "", []string{"wasm"}, "wasm_engine is empty"},
		{"space", "wasmtime 39", []string{"wasm"}, `wasm_engine "wasmtime 39"`},
		{"control", "wasmtime\x00", []string{"oci", "wasm"}, `wasm_engine "wasmtime\x00"`},
		{"not ascii", "wasmtimé", []string{"wasm"}, "wasm_engine"},
		{"leading dash", "-x", []string{"wasm"}, "wasm_engine"},
		{"too long", strings.Repeat("w", ledger.MaxWasmEngineLen+1), []string{"wasm"}, "wasm_engine is 129 bytes long, at most 128"},
		{"longest", strings.Repeat("w", ledger.MaxWasmEngineLen), []string{"wasm"}, ""},
		{"without wasm", engineA, []string{"oci"}, "wasm_engine is set, but executors do not include wasm"},
		{"oci alone", "", []string{"oci"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info := lt.ProviderInfo("", 0, 36_000)
			info.Executors, info.WasmEngine = tc.execs, tc.engine
			err := info.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ledger.ErrInvalidMsg) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an invalid message saying %q", err, tc.want)
			}
			c := engineChain(t)
			if r := send(t, c, prov1, &ledger.MsgRegisterProvider{ProviderInfo: info}); !errors.Is(r.Err, ledger.ErrInvalidMsg) || !strings.Contains(r.Err.Error(), "wasm_engine") {
				t.Fatalf("register: %v", r.Err)
			}
			addEngineProvider(t, c, 0, engineA)
			if r := send(t, c, prov1, &ledger.MsgUpdateProvider{ProviderInfo: info}); !errors.Is(r.Err, ledger.ErrInvalidMsg) {
				t.Fatalf("update: %v", r.Err)
			}
			if got := provider(t, c, prov1).WasmEngine; got != engineA {
				t.Fatalf("after a refused update the engine is %q", got)
			}
		})
	}
}

// TestEngineChangeKeepsAssignments: a provider may declare another engine
// while it holds replicas. Its assignments keep the engine they were
// placed with, and the job's further replicas go to that engine even
// though no provider holding one declares it any more; its new engine
// counts for the jobs placed after.
func TestEngineChangeKeepsAssignments(t *testing.T) {
	c := engineChain(t, engineA, engineA, engineB)
	must(t, []ledger.TxResult{submit(t, c, fullJob("full"))})
	j := job(t, c, 1)
	if len(j.Assignments) != 2 || j.PinnedEngine() != engineA {
		t.Fatalf("full job: %v (%s)", enginesOf(j), j.Reason)
	}
	grants := []ledger.Grant{{Provider: prov1.Addr, WrappedKey: []byte("k")}, {Provider: prov2.Addr, WrappedKey: []byte("k")}}
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgGrantKey{JobID: 1, Grants: grants})})
	for _, k := range []lt.Key{prov1, prov2} {
		must(t, []ledger.TxResult{send(t, c, k, &ledger.MsgStartJob{JobID: 1})})
	}
	cm := ledger.ResultCommitment(manifest(true, prov1), prov1.Addr, salt(prov1))
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgCommitResult{JobID: 1, Commitment: &cm, MeteredSeconds: 10})})

	// prov1 moves to engine B, holding its committed replica.
	moved := provider(t, c, prov1).ProviderInfo
	moved.WasmEngine = engineB
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgUpdateProvider{ProviderInfo: moved})})
	if a := assignmentOf(job(t, c, 1), prov1.Addr); a.WasmEngine != engineA {
		t.Fatalf("prov1's assignment says %q after it declared %s, want %q", a.WasmEngine, engineB, engineA)
	}

	// prov2 leaves before committing: its replacement must run engine A.
	// prov3 (engine B) is free, prov4 (engine A) joins dearer.
	must(t, []ledger.TxResult{send(t, c, prov2, &ledger.MsgSetProviderStatus{Online: false})})
	if j = job(t, c, 1); len(j.Assignments) != 1 || j.WaitCode != ledger.QuoteNoEngine {
		t.Fatalf("replacement with only engine B free: %v code %q (%s)", enginesOf(j), j.WaitCode, j.Reason)
	}
	addEngineProvider(t, c, 3, engineA)
	j = job(t, c, 1)
	if a := assignmentOf(j, provs[3].Addr); len(j.Assignments) != 2 || a == nil || a.WasmEngine != engineA {
		t.Fatalf("replacement: %v on %v (%s)", enginesOf(j), j.Assignments, j.Reason)
	}

	// A job placed now pairs prov1 with prov3, both on engine B.
	must(t, []ledger.TxResult{submit(t, c, fullJob("after"))})
	j = job(t, c, 2)
	if len(j.Assignments) != 2 || j.PinnedEngine() != engineB || assignmentOf(j, prov1.Addr) == nil || assignmentOf(j, prov3.Addr) == nil {
		t.Fatalf("new job after the change: %v on %v (%s)", enginesOf(j), j.Assignments, j.Reason)
	}
}

// TestOCIAndUncheckedJobsIgnoreEngines: an oci job, even verified, and a
// non-deterministic wasm job run on providers of any engine.
func TestOCIAndUncheckedJobsIgnoreEngines(t *testing.T) {
	c := engineChain(t)
	for i, e := range []string{engineA, engineB} {
		info := lt.ProviderInfo("", 0, uint64(36_000*(i+1)))
		info.Executors, info.WasmEngine = []string{"oci", "wasm"}, e
		must(t, []ledger.TxResult{send(t, c, provs[i], &ledger.MsgRegisterProvider{ProviderInfo: info})})
		must(t, []ledger.TxResult{send(t, c, provs[i], &ledger.MsgStake{Amount: stake})})
	}
	oci := fullJob("oci")
	oci.Executor, oci.Module, oci.Image = "oci", "", "registry.example/app@sha256:"+strings.Repeat("a", 64)
	must(t, []ledger.TxResult{submit(t, c, oci)})
	if j := job(t, c, 1); len(j.Assignments) != 2 || j.Assignments[0].WasmEngine != "" || j.Assignments[1].WasmEngine != "" {
		t.Fatalf("full oci job: %s %v (%s)", j.State, enginesOf(j), j.Reason)
	}
	loose := spotJob("loose")
	loose.Deterministic = false
	must(t, []ledger.TxResult{submit(t, c, loose)})
	if j := job(t, c, 2); j.State != ledger.JobAssigned || j.Spec.SharesEngine() {
		t.Fatalf("non-deterministic wasm job: %s (%s)", j.State, j.Reason)
	}
}

// TestEngineChangeReassignsUncommittedReplicas: a provider that declares a
// new engine (upgraded) while it holds a replica it has not committed
// gives that replica back before running it on the new engine, where it
// could disagree with its peers. With nothing committed the job is placed
// afresh, on one engine, each replica recording what its provider runs
// now; the provider is not slashed.
func TestEngineChangeReassignsUncommittedReplicas(t *testing.T) {
	c := engineChain(t, engineA, engineA, engineB)
	must(t, []ledger.TxResult{submit(t, c, fullJob("full"))})
	if j := job(t, c, 1); len(j.Assignments) != 2 || j.PinnedEngine() != engineA {
		t.Fatalf("full job: %v (%s)", enginesOf(j), j.Reason)
	}
	moved := provider(t, c, prov2).ProviderInfo
	moved.WasmEngine = engineB
	res := send(t, c, prov2, &ledger.MsgUpdateProvider{ProviderInfo: moved})
	must(t, []ledger.TxResult{res})
	reassigned := false
	for _, e := range res.Events {
		reassigned = reassigned || e.Type == "job_reassigned"
	}
	if !reassigned {
		t.Errorf("no job_reassigned event from prov2's upgrade: %v", res.Events)
	}
	j := job(t, c, 1)
	if len(j.Assignments) != 2 {
		t.Fatalf("after prov2's upgrade: %v (%s)", enginesOf(j), j.Reason)
	}
	for _, a := range j.Assignments {
		var k lt.Key
		for _, p := range []lt.Key{prov1, prov2, prov3} {
			if p.Addr == a.Provider {
				k = p
			}
		}
		if now := provider(t, c, k).WasmEngine; a.WasmEngine != now || a.WasmEngine != j.PinnedEngine() {
			t.Errorf("replica on %s records %q, its provider runs %q, the job is pinned to %q", a.Provider, a.WasmEngine, now, j.PinnedEngine())
		}
	}
	if p := provider(t, c, prov2); p.Slashed != 0 {
		t.Errorf("prov2 slashed %d for an upgrade", p.Slashed)
	}
}
