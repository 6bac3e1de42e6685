package jobtext

import (
	"testing"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

var (
	a1 = address.Address{1}
	a2 = address.Address{2}
)

// TestJobWait: every job code renders the sentence the ledger wrote
// before it recorded codes (issue 28); tests and docs match some of them.
func TestJobWait(t *testing.T) {
	spec := &ledger.JobSpec{Verification: ledger.VerifyFull, MaxPricePerHour: 10_000, GPUCount: 1, GPUModels: []string{"RTX_4090"}}
	for _, c := range []struct {
		w    ledger.Wait
		want string
	}{
		{ledger.Wait{Code: ledger.WaitQueued}, "waiting for the scheduler at the end of the block"},
		{ledger.Wait{Code: ledger.WaitPlaced}, "placed; waiting for the owner to grant the job key"},
		{ledger.Wait{Code: ledger.WaitExtraPlaced}, "extra replica placed; waiting for its job key (from the owner, or handed over by a committed replica)"},
		{ledger.Wait{Code: ledger.WaitExtraPlacedOwnerKey}, "extra replica placed; waiting for the owner to grant it the job key"},
		{ledger.Wait{Code: ledger.WaitKeyGranted}, "key granted; waiting for the provider to start"},
		{ledger.Wait{Code: ledger.WaitKeyGrantedExtra}, "key granted; waiting for the new replica to start"},
		{ledger.Wait{Code: ledger.WaitHandoverRequested}, "waiting for the new replica's job key (from the owner, or handed over by a committed replica)"},
		{ledger.Wait{Code: ledger.WaitKeyHandedOver}, "key handed over; waiting for the new replica to start"},
		{ledger.Wait{Code: ledger.WaitExtraRunning}, "the extra replica is running"},
		{ledger.Wait{Code: ledger.WaitReported, Count: 1, Of: 2}, "1 of 2 replicas reported"},
		{ledger.Wait{Code: ledger.WaitAudit}, "audit: another provider re-runs the job to check the result"},
		{ledger.Wait{Code: ledger.WaitRevealing, Count: 1, Of: 3}, "revealing: 1 of 3 replicas opened their results"},
		{ledger.Wait{Code: ledger.WaitEscalating, Distinct: 2, Of: 2, Count: 3, Limit: 5}, "replicas disagree (2 results from 2 replicas); adding replica 3 of at most 5"},
		{ledger.Wait{Code: ledger.WaitCheckpointDisagree, Seq: 4, Distinct: 2, Of: 2, Count: 3}, "replicas disagree at checkpoint 4 (2 distinct states from 2 replicas); restarting with 3 replicas"},
		{ledger.Wait{Code: ledger.WaitCheckpointDisagree, Seq: 4, Distinct: 2, Of: 2, Count: 3, ResumeSeq: 3, Kept: 90}, "replicas disagree at checkpoint 4 (2 distinct states from 2 replicas); restarting with 3 replicas; resumes from checkpoint 3 (90s of run kept)"},
		{ledger.Wait{Code: ledger.WaitPreempted, Tier: "priority", Job: 9, Providers: []address.Address{a1}, At: 1700000100}, "preempted by priority job 9 on " + a1.String() + ": it may checkpoint until 1700000100, then it is requeued"},
		{ledger.Wait{Code: ledger.WaitPreemptRequeued, Providers: []address.Address{a1}, ResumeSeq: 2, Kept: 60}, "preempted by a higher tier on " + a1.String() + "; requeued; resumes from checkpoint 2 (60s of run kept)"},
		{ledger.Wait{Code: ledger.WaitReplacing, Cause: ledger.CauseOffline, Providers: []address.Address{a1}}, "provider went offline (" + a1.String() + "); placing another replica"},
		{ledger.Wait{Code: ledger.WaitRequeued, Cause: ledger.CauseReleased, Text: "disk full", Providers: []address.Address{a1}}, "provider handed the job back: disk full (" + a1.String() + "); placing it again"},
		{ledger.Wait{Code: ledger.WaitRequeued, Cause: ledger.CauseNotStarted, Providers: []address.Address{a1, a2}, ResumeSeq: 1, Kept: 5}, "provider did not start in time; resumes from checkpoint 1 (5s of run kept) (" + a1.String() + "," + a2.String() + "); placing it again"},
		{ledger.Wait{Code: ledger.WaitRequeued, Cause: ledger.CauseEngineChanged, Text: "wazero-1", Providers: []address.Address{a1}}, "provider now runs another wasm engine than wazero-1 (" + a1.String() + "); placing it again"},
		{ledger.Wait{Code: ledger.WaitRequeued, Cause: ledger.CauseBumped, Providers: []address.Address{a1}}, "placement bumped: another job's key was granted first and took the provider's slot (" + a1.String() + "); placing it again"},
		{ledger.Wait{Code: ledger.WaitCancelled}, "cancelled by its owner"},
		{ledger.Wait{Code: ledger.WaitKeyNotGranted, Amount: 120}, "the owner did not grant the job key in time; paid 120usync for the provider slots it held"},
		{ledger.Wait{Code: ledger.WaitGaveUp, Cause: ledger.CauseNoResult, Providers: []address.Address{a1}, Count: 3}, "provider did not report a result in time (" + a1.String() + "); gave up after 3 placements"},
		{ledger.Wait{Code: ledger.WaitPreemptUnfunded, Providers: []address.Address{a1}, Amount: 5, Needed: 9}, "preempted by a higher tier on " + a1.String() + ", and its owner has 5usync of the 9usync another run needs in escrow; the rest is refunded"},
		{ledger.Wait{Code: ledger.WaitBumpUnfunded, Providers: []address.Address{a1}, Amount: 5, Needed: 9}, "its placement on " + a1.String() + " was bumped before its key was granted, and its owner has 5usync of the 9usync another run needs in escrow; the rest is refunded"},
		{ledger.Wait{Code: ledger.WaitBadHandover, Providers: []address.Address{a1}, Amount: 7}, "the new replica could not run: " + a1.String() + " handed it a key that is not the job's (slashed 7usync); refunded"},
		{ledger.Wait{Code: ledger.WaitHandoverWithheld, Slashed: 1}, "the new replica could not run: neither the owner nor a committed replica gave the new replica the job key in time; 1 committed replica(s) slashed for withholding the key; refunded"},
		{ledger.Wait{Code: ledger.WaitNoMajority, Of: 3, Distinct: 3}, "no majority among 3 replicas (3 distinct results); refunded in full, nobody who revealed slashed"},
		{ledger.Wait{Code: ledger.WaitNoMajority, Of: 3, Distinct: 2, Slashed: 1}, "no majority among 3 replicas (2 distinct results); refunded in full, nobody who revealed slashed; 1 that did not reveal slashed"},
		{ledger.Wait{Code: ledger.WaitLoneResult, Count: 1, Of: 2, Slashed: 1}, "the one result revealed (by 1 of 2 replicas) is not a majority and no further replica could check it; refunded in full, nobody who revealed paid or slashed; 1 that did not reveal slashed"},
		{ledger.Wait{Code: ledger.WaitNoneRevealed, Of: 2}, "no replica revealed its result in time (2 committed, each slashed); refunded in full"},
		{ledger.Wait{Code: ledger.WaitCheckpointNoMajority, Of: 3, Seq: 2, Distinct: 3}, "no majority among 3 replicas at checkpoint 2 (3 distinct states); the rest of the escrow is refunded, nobody slashed"},
		{ledger.Wait{Code: ledger.WaitJobFailed, Text: "exited 1"}, "the job failed: exited 1"},
		{ledger.Wait{Code: ledger.WaitJobFailed, Text: "exited 1", Count: 2, Of: 3}, "the job failed: exited 1; 2 of 3 replicas agree"},
		{ledger.Wait{Code: ledger.WaitAgreed, Count: 3, Of: 3}, "3 of 3 replicas agree"},
		{ledger.Wait{Code: ledger.WaitUnplaced, Miss: &ledger.PlacementMiss{Need: 1}}, "no online provider offers RTX_4090"},
		{ledger.Wait{Code: "from_a_newer_node"}, "wait code from_a_newer_node"},
	} {
		if got := JobWait(&c.w, spec); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.w.Code, got, c.want)
		}
	}
}

// TestMiss: the scheduler's verdict renders as scheduler.go's
// unplacedReason and verdict.String did.
func TestMiss(t *testing.T) {
	cpu := &ledger.JobSpec{Verification: ledger.VerifyFull, Executor: "wasm", MaxPricePerHour: 10_000, CPUMilli: 1500, Memory: 1 << 40, Disk: 1 << 30, Region: "eu"}
	gpu := &ledger.JobSpec{Verification: ledger.VerifySpot, MaxPricePerHour: 10_000, GPUCount: 2, MinVRAM: 80 << 30, MinComputeCap: "9.0"}
	for _, c := range []struct {
		name string
		m    ledger.PlacementMiss
		spec *ledger.JobSpec
		want string
	}{
		{"no cpu offer", ledger.PlacementMiss{}, cpu, "no online provider offers CPU capacity"},
		{"no gpu model", ledger.PlacementMiss{}, gpu, "no online provider offers any GPU class"},
		{"over market", ledger.PlacementMiss{OverMarket: 1, MarketPrice: 36_000, Classes: 1}, cpu, "the market price for tier on-demand is 0.036 SYNC/h (the class's index × the tier's factor), above max 0.01 SYNC/h"},
		{"every need", ledger.PlacementMiss{Classes: 1, Seen: 13, Executor: 1, GPUs: 1, VRAM: 1, ComputeCap: 1, Stake: 1, Busy: 1, Region: 1, Network: 1, CPU: 1, RAM: 2, Disk: 1, OtherEngine: 1, NoEngine: 1, Pinned: "e1", CheapestAbove: 36_000}, cpu,
			"0 of 13 providers within the price can run it: 1 lack the wasm executor, 1 have fewer than 0 GPUs, 1 have less than 0 GiB VRAM, 1 have compute capability below , 1 have fewer than 1.5 cores, 2 have less than 1048576 MiB RAM, 1 have less than 1024 MiB disk, 1 are outside region eu, 1 do not allow network access, 1 are under-staked, 1 match but are busy, 1 run another wasm engine than its replicas' (e1), 1 declare no wasm engine; cheapest other ask 0.036 SYNC/h > max 0.01 SYNC/h"},
		{"gpu needs", ledger.PlacementMiss{Classes: 1, Seen: 2, GPUs: 1, VRAM: 1}, gpu, "0 of 2 providers within the price can run it: 1 have fewer than 2 GPUs, 1 have less than 80 GiB VRAM"},
		{"too few", ledger.PlacementMiss{Classes: 1, Seen: 1, Busy: 1, Fit: 1, Need: 3}, cpu, "needs 2 distinct providers for verification full, 1 fit; 0 of 1 providers within the price can run it: 1 match but are busy"},
		{"engines", ledger.PlacementMiss{Classes: 1, Fitting: 2, Engines: 2, Fit: 1, Need: 3}, cpu, "needs 2 distinct providers on one wasm engine for verification full: 2 fit, but they run 2 engines, at most 1 on one; no online provider offers CPU capacity"},
		{"extra replica", ledger.PlacementMiss{Classes: 1, Seen: 1, Busy: 1, Need: 1, Assigned: 1}, cpu, "waiting for 1 more distinct provider(s) to verify it: 0 of 1 providers within the price can run it: 1 match but are busy"},
		{"preempting", ledger.PlacementMiss{Classes: 1, Seen: 1, Busy: 1, Need: 1, Preempting: 1, PreemptAt: 99}, cpu, "0 of 1 providers within the price can run it: 1 match but are busy; preempting 1 spot job(s), whose slots free at 99"},
		{"preempt wait", ledger.PlacementMiss{Classes: 1, Seen: 1, Busy: 1, Need: 1, PreemptWait: 98}, cpu, "0 of 1 providers within the price can run it: 1 match but are busy; waiting for the slots of the spot jobs it preempted (free by 98)"},
	} {
		if got := JobMiss(&c.m, c.spec); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
	svc := &ledger.ServiceSpec{Replicas: 2, MaxPricePerHour: 10_000}
	m := &ledger.PlacementMiss{Classes: 1, Seen: 1, Busy: 1, Fit: 0, Need: 2, Excluded: 1}
	if got, want := ServiceMiss(m, svc), "waiting for 2 more provider(s): 0 of 1 providers within the price can run it: 1 match but are busy; 1 that fit are excluded (they gave back, dropped or were evicted from a replica of it)"; got != want {
		t.Errorf("service:\n got %q\nwant %q", got, want)
	}
	if got, want := ServiceQuoteMiss(&ledger.PlacementMiss{Fit: 1, Need: 2}, svc), "1 of 2 replica(s) would wait for a provider: each needs its own, and 1 fit now"; got != want {
		t.Errorf("service quote:\n got %q\nwant %q", got, want)
	}
}

// TestMissSentences: every branch of a placement miss renders, word for
// word, the sentence the ledger built itself before it recorded a
// PlacementMiss (scheduler.go's missReason and unplacedReason, and
// service_place.go, issue 28); e2e tests, the docs and people's scripts
// match them. The wants were captured from those builders.
func TestMissSentences(t *testing.T) {
	full := &ledger.JobSpec{Verification: ledger.VerifyFull, Executor: "wasm", MaxPricePerHour: 1_500_000, CPUMilli: 2000, Memory: 4 << 30, Disk: 1 << 30}
	spot := &ledger.JobSpec{Verification: ledger.VerifySpot, Executor: "oci", Tier: ledger.TierSpot, MaxPricePerHour: 1_000_000, GPUCount: 1, MinVRAM: 80 << 30, MinComputeCap: "9.0"}
	models := &ledger.JobSpec{Verification: ledger.VerifyNone, Executor: "oci", MaxPricePerHour: 1_500_000, GPUCount: 2, GPUModels: []string{"H100_SXM", "A100_80GB"}, MinComputeCap: "8.0", Region: "us-east"}
	svc := &ledger.ServiceSpec{Replicas: 3, MaxPricePerHour: 10_000, CPUMilli: 500, Memory: 2 << 30, Disk: 512 << 20}
	gpuSvc := &ledger.ServiceSpec{Replicas: 2, MaxPricePerHour: 2_000_000, GPUCount: 1}
	for _, c := range []struct {
		name, kind string // kind: job, quote, service, service quote
		m          ledger.PlacementMiss
		job        *ledger.JobSpec
		svc        *ledger.ServiceSpec
		want       string
	}{
		{"no offer of the models", "job", ledger.PlacementMiss{Need: 1}, models, nil, "no online provider offers H100_SXM or A100_80GB"},
		{"over price", "job", ledger.PlacementMiss{Classes: 1, CheapestAbove: 2_100_000, Need: 2}, full, nil, "0 of 0 providers within the price can run it; cheapest other ask 2.1 SYNC/h > max 1.5 SYNC/h"},
		{"the docs' example", "job", ledger.PlacementMiss{Classes: 2, Seen: 12, VRAM: 3, Busy: 2, CheapestAbove: 2_100_000, Need: 1}, spot, nil, "0 of 12 providers within the price can run it: 3 have less than 80 GiB VRAM, 2 match but are busy; cheapest other ask 2.1 SYNC/h > max 1 SYNC/h"},
		{"over market, spot", "job", ledger.PlacementMiss{OverMarket: 2, MarketPrice: 1_234_500, Classes: 2, Need: 1}, spot, nil, "the market price for tier spot is 1.2345 SYNC/h (the class's index × the tier's factor), above max 1 SYNC/h"},
		{"no fit, nothing named", "job", ledger.PlacementMiss{Classes: 1, Seen: 3, Need: 1}, models, nil, "0 of 3 providers within the price can run it"},
		{"region and executor", "job", ledger.PlacementMiss{Classes: 2, Seen: 7, Executor: 2, Region: 4, ComputeCap: 1, Need: 1}, models, nil, "0 of 7 providers within the price can run it: 2 lack the oci executor, 1 have compute capability below 8.0, 4 are outside region us-east"},
		{"extra replica on the pinned engine", "job", ledger.PlacementMiss{Classes: 1, Seen: 4, OtherEngine: 2, Busy: 1, NoEngine: 1, Pinned: "wasmtime-25", Fit: 1, Need: 2, Assigned: 2}, full, nil, "waiting for 2 more distinct provider(s) to verify it: needs 2 distinct providers for verification full, 1 fit; 0 of 4 providers within the price can run it: 1 match but are busy, 2 run another wasm engine than its replicas' (wasmtime-25), 1 declare no wasm engine"},
		{"too few, preempting", "job", ledger.PlacementMiss{Classes: 1, Seen: 3, Busy: 3, Fit: 1, Need: 2, Preempting: 1, PreemptAt: 1700000120}, full, nil, "needs 2 distinct providers for verification full, 1 fit; 0 of 3 providers within the price can run it: 3 match but are busy; preempting 1 spot job(s), whose slots free at 1700000120"},
		{"waiting for preempted slots", "job", ledger.PlacementMiss{Classes: 1, Seen: 2, Busy: 2, CPU: 1, Need: 1, PreemptWait: 1700000090}, full, nil, "0 of 2 providers within the price can run it: 1 have fewer than 2 cores, 2 match but are busy; waiting for the slots of the spot jobs it preempted (free by 1700000090)"},
		{"quote over engines", "quote", ledger.PlacementMiss{Classes: 1, Seen: 3, Fitting: 3, Engines: 3, Fit: 1, Need: 2}, full, nil, "needs 2 distinct providers on one wasm engine for verification full: 3 fit, but they run 3 engines, at most 1 on one; 0 of 3 providers within the price can run it"},
		{"quote too few", "quote", ledger.PlacementMiss{Classes: 1, Seen: 2, RAM: 1, Disk: 1, Fit: 1, Need: 2, CheapestAbove: 1_600_000}, full, nil, "needs 2 distinct providers for verification full, 1 fit; 0 of 2 providers within the price can run it: 1 have less than 4096 MiB RAM, 1 have less than 1024 MiB disk; cheapest other ask 1.6 SYNC/h > max 1.5 SYNC/h"},
		{"service, some excluded", "service", ledger.PlacementMiss{Classes: 1, Seen: 5, RAM: 2, Stake: 1, Network: 1, Fit: 1, Need: 3, Excluded: 2}, nil, svc, "waiting for 2 more provider(s): 0 of 5 providers within the price can run it: 2 have less than 2048 MiB RAM, 1 do not allow network access, 1 are under-staked; 2 that fit are excluded (they gave back, dropped or were evicted from a replica of it)"},
		{"service, no offer", "service", ledger.PlacementMiss{Need: 2}, nil, gpuSvc, "waiting for 2 more provider(s): no online provider offers any GPU class"},
		{"service quote, none fit", "service quote", ledger.PlacementMiss{Need: 2}, nil, gpuSvc, "no replica would be placed: no online provider offers any GPU class"},
		{"service quote, over price", "service quote", ledger.PlacementMiss{Classes: 1, CheapestAbove: 36_000, Need: 3}, nil, svc, "no replica would be placed: 0 of 0 providers within the price can run it; cheapest other ask 0.036 SYNC/h > max 0.01 SYNC/h"},
		{"service quote, some fit", "service quote", ledger.PlacementMiss{Classes: 1, Seen: 2, Fit: 2, Need: 3}, nil, svc, "1 of 3 replica(s) would wait for a provider: each needs its own, and 2 fit now"},
	} {
		var got string
		switch c.kind {
		case "job":
			got = JobWait(&ledger.Wait{Code: ledger.WaitUnplaced, Miss: &c.m}, c.job)
		case "quote":
			got = QuoteMiss(&c.m, c.job)
		case "service":
			got = Service(&ledger.Service{Spec: *c.svc, Wait: &ledger.Wait{Code: ledger.WaitUnplaced, Miss: &c.m}})
		case "service quote":
			got = ServiceQuoteMiss(&c.m, c.svc)
		}
		if got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// TestOlderRecords: a record from before version 6 holds its sentence,
// which renders as it is; a finished job's leftover wait renders nothing.
func TestOlderRecords(t *testing.T) {
	j := &ledger.Job{State: ledger.JobQueued, Reason: "an older sentence", Wait: &ledger.Wait{Code: ledger.WaitQueued}}
	if got := Job(j); got != "an older sentence" {
		t.Errorf("older job: %q", got)
	}
	j = &ledger.Job{State: ledger.JobSucceeded, Wait: &ledger.Wait{Code: ledger.WaitRevealing, Count: 1, Of: 1}}
	if got := Job(j); got != "" {
		t.Errorf("succeeded with a leftover wait: %q", got)
	}
	j = &ledger.Job{AuditDropped: "old why", Released: a1.String() + ": old", CheckpointNote: "old note"}
	if Dropped(j) != "old why" || Released(j) != a1.String()+": old" || CheckpointNote(j) != "old note" {
		t.Errorf("older job's notes: %q %q %q", Dropped(j), Released(j), CheckpointNote(j))
	}
	if got := Slash(&ledger.SlashEvent{Reason: "job 1: outvoted by 2 of 3 replicas"}); got != "job 1: outvoted by 2 of 3 replicas" {
		t.Errorf("older slash: %q", got)
	}
	if got := Service(&ledger.Service{Reason: "old"}); got != "old" {
		t.Errorf("older service: %q", got)
	}
	if got := Proposal(&ledger.Proposal{Reason: "old"}); got != "old" {
		t.Errorf("older proposal: %q", got)
	}
	if got := ReplicaEnd(&ledger.ReplicaEnd{Why: "old"}); got != "old" {
		t.Errorf("older replica end: %q", got)
	}
}

func TestNotes(t *testing.T) {
	by := a1
	j := &ledger.Job{Released: "input blob missing", ReleasedBy: &by, Dropped: &ledger.Wait{Code: ledger.DropNoMoreReplacements, Cause: ledger.CauseOffline, Providers: []address.Address{a2}}}
	if got, want := Released(j), a1.String()+": input blob missing"; got != want {
		t.Errorf("released %q, want %q", got, want)
	}
	if got, want := Dropped(j), "provider went offline; no more replacements"; got != want {
		t.Errorf("dropped %q, want %q", got, want)
	}
	for _, c := range []struct {
		w    ledger.Wait
		want string
	}{
		{ledger.Wait{Code: ledger.DropNotPlaced}, "no provider could take the extra replica in time"},
		{ledger.Wait{Code: ledger.DropNotGranted}, "the owner did not grant the extra replica the job key in time"},
		{ledger.Wait{Code: ledger.DropNoKey}, "neither the owner nor a committed replica gave the new replica the job key in time"},
		{ledger.Wait{Code: ledger.DropBumpUnfunded, Providers: []address.Address{a1}, Amount: 3, Needed: 8}, "its placement on " + a1.String() + " was bumped before its key was granted, and the owner has 3usync of the 8usync its escrow must hold for another"},
	} {
		if got := Dropped(&ledger.Job{Dropped: &c.w}); got != c.want {
			t.Errorf("dropped %s: %q", c.w.Code, got)
		}
	}
	for _, c := range []struct {
		w    ledger.Wait
		want string
	}{
		{ledger.Wait{Code: ledger.CheckpointRefused, Providers: []address.Address{a1}, Seq: 3, Text: "too big"}, a1.String() + " could not take checkpoint 3: too big"},
		{ledger.Wait{Code: ledger.CheckpointFallback, Providers: []address.Address{a1}, Seq: 0, ResumeSeq: 2, Text: "corrupt"}, a1.String() + " started from the beginning instead of checkpoint 2: corrupt"},
		{ledger.Wait{Code: ledger.CheckpointFallback, Providers: []address.Address{a1}, Seq: 1, ResumeSeq: 2, Text: "corrupt"}, a1.String() + " started from checkpoint 1 instead of checkpoint 2: corrupt"},
		{ledger.Wait{Code: ledger.CheckpointOutvoted, Providers: []address.Address{a1}, Seq: 3, Count: 2, Of: 3}, "replicas disagree at checkpoint 3: " + a1.String() + " outvoted by 2 of 3 and dropped"},
	} {
		if got := CheckpointNote(&ledger.Job{CheckpointWait: &c.w}); got != c.want {
			t.Errorf("checkpoint %s:\n got %q\nwant %q", c.w.Code, got, c.want)
		}
	}
}

func TestService(t *testing.T) {
	for _, c := range []struct {
		w    ledger.Wait
		want string
	}{
		{ledger.Wait{Code: ledger.WaitBudgetRanOut, At: 1700000000}, "the budget ran out at 2023-11-14T22:13:20Z"},
		{ledger.Wait{Code: ledger.WaitBudgetRanOut, At: 1700000000, Warned: 1699999000}, "the budget ran out at 2023-11-14T22:13:20Z; its owner was warned at 2023-11-14T21:56:40Z"},
		{ledger.Wait{Code: ledger.WaitStoppedByOwner, At: 1700000000}, "stopped by its owner at 2023-11-14T22:13:20Z"},
		{ledger.Wait{Code: ledger.WaitReplicasFailed, Count: 2, Limit: 600, Cause: ledger.EndReleased, Text: "crashed"}, "2 replicas failed (given back or never ready) while none stayed ready for 600s; the last: released by its provider: crashed"},
		{ledger.Wait{Code: ledger.WaitReplicasFailed, Count: 2, Limit: 600, Cause: ledger.EndNotReady, Seconds: 60}, "2 replicas failed (given back or never ready) while none stayed ready for 600s; the last: not ready within 60s of its placement"},
	} {
		if got := Service(&ledger.Service{Wait: &c.w}); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.w.Code, got, c.want)
		}
	}
	for _, c := range []struct {
		e    ledger.ReplicaEnd
		want string
	}{
		{ledger.ReplicaEnd{Code: ledger.EndReleased, Text: "readiness failed 3 times"}, "released by its provider: readiness failed 3 times"},
		{ledger.ReplicaEnd{Code: ledger.EndReleased}, "released by its provider"},
		{ledger.ReplicaEnd{Code: ledger.EndEvicted, Text: "does not answer"}, "evicted by its owner: does not answer"},
		{ledger.ReplicaEnd{Code: ledger.EndNotReady, Seconds: 30}, "not ready within 30s of its placement"},
		{ledger.ReplicaEnd{Code: ledger.EndSilent}, "provider stopped reporting"},
		{ledger.ReplicaEnd{Code: ledger.EndUnreachable}, "validators holding more than two thirds of the voting power could not reach it"},
		{ledger.ReplicaEnd{Code: ledger.EndOffline}, "provider went offline"},
		{ledger.ReplicaEnd{Code: ledger.EndTEELapsed}, "provider's TEE attestation ended (expired, or its encryption key changed)"},
		{ledger.ReplicaEnd{Code: ledger.EndUnwitnessed, Seconds: 300}, "no quorum of witnesses saw it serve for 300s while they saw other replicas serve"},
		{ledger.ReplicaEnd{Code: ledger.EndScaledDown}, "scaled down by its owner"},
		{ledger.ReplicaEnd{Code: ledger.EndServiceStopped}, "service stopped"},
		{ledger.ReplicaEnd{Code: ledger.EndServiceFailed}, "service failed"},
	} {
		if got := ReplicaEnd(&c.e); got != c.want {
			t.Errorf("%s: %q, want %q", c.e.Code, got, c.want)
		}
	}
}

func TestProposal(t *testing.T) {
	tally := &ledger.Tally{Yes: 50, No: 10, Abstain: 5, Veto: 5, Bonded: 100}
	for _, c := range []struct {
		w    ledger.Wait
		want string
	}{
		{ledger.Wait{Code: ledger.WaitDepositShort, Amount: 5, Needed: 10, Height: 40}, "deposits reached 5 of the 10 usync needed by height 40"},
		{ledger.Wait{Code: ledger.WaitNoQuorum, PPM: 334_000}, "no quorum: 70% of the bonded stake voted, 33.4000% needed"},
		{ledger.Wait{Code: ledger.WaitVetoed, PPM: 50_000}, "vetoed: 7.1428% of the votes were veto, more than 5%"},
		{ledger.Wait{Code: ledger.WaitAllAbstained}, "every vote abstained"},
		{ledger.Wait{Code: ledger.WaitPassed, PPM: 500_000}, "76.9230% yes of yes, no and veto, more than 50%"},
		{ledger.Wait{Code: ledger.WaitRejected, PPM: 800_000}, "76.9230% yes of yes, no and veto, 80% needed"},
		{ledger.Wait{Code: ledger.WaitNotExecuted, Cause: ledger.NotExecutedTreasury, Amount: 3, Needed: 9}, "passed but not executed: the treasury holds 3 usync, the spend is 9"},
		{ledger.Wait{Code: ledger.WaitNotExecuted, Cause: ledger.NotExecutedOverflow, Providers: []address.Address{a1}}, "passed but not executed: the balance of " + a1.String() + " would overflow"},
		{ledger.Wait{Code: ledger.WaitNotExecuted, Cause: ledger.NotExecutedParams}, "passed but not executed: its parameter changes are not valid against the parameters it passed under"},
	} {
		if got := Proposal(&ledger.Proposal{Tally: tally, Wait: &c.w}); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.w.Code, got, c.want)
		}
	}
}

func TestSlash(t *testing.T) {
	for _, c := range []struct {
		e    ledger.SlashEvent
		want string
	}{
		{ledger.SlashEvent{Code: ledger.SlashOutvoted, Job: 2, Count: 2, Of: 3}, "job 2: outvoted by 2 of 3 replicas"},
		{ledger.SlashEvent{Code: ledger.SlashUnrevealed, Job: 2}, "job 2: committed a result and did not reveal it"},
		{ledger.SlashEvent{Code: ledger.SlashBadHandover, Job: 2}, "job 2: handed a new replica a key that is not the job's"},
		{ledger.SlashEvent{Code: ledger.SlashWithheldKey, Job: 2}, "job 2: did not hand the job key to the replica that waited for it"},
		{ledger.SlashEvent{Code: ledger.SlashCheckpointOutvoted, Job: 2, Seq: 4, Count: 2, Of: 3}, "job 2: checkpoint 4 outvoted by 2 of 3 replicas"},
		{ledger.SlashEvent{Code: ledger.SlashHardware}, "hardware challenge failed"},
	} {
		if got := Slash(&c.e); got != c.want {
			t.Errorf("%s: %q, want %q", c.e.Code, got, c.want)
		}
	}
}

func TestChallengeFailure(t *testing.T) {
	for _, c := range []struct {
		f    ledger.ChallengeFailure
		want string
	}{
		{ledger.ChallengeFailure{Code: ledger.ChallengeWrongOpening, Cause: ledger.ChallengeCauseEntry}, "the CPU: wrong opening: an opened entry is not the product A·B"},
		{ledger.ChallengeFailure{Code: ledger.ChallengeWrongOpening, Device: 2, DeviceUUID: "GPU-B", Cause: ledger.ChallengeCauseProof}, `gpus[1] "GPU-B": wrong opening: a Merkle proof does not lead to the committed root`},
		{ledger.ChallengeFailure{Code: ledger.ChallengeOverclaim, Device: 1, ElapsedMillis: 90_000, DeadlineMillis: 600, ShownGOPS: 1, ClaimedGOPS: 500, Factor: 100},
			"gpus[0]: commit 90000 ms after the challenge, deadline 600 ms: shows 1 GOPS, claimed 500: a second proof in a row under 1/100 of the claim"},
		{ledger.ChallengeFailure{Code: ledger.ChallengeMissLimit, Cause: ledger.ChallengeCauseNoCommit, Misses: 3, CommitByMillis: 30_000, DeadlineMillis: 600, ClaimedGOPS: 2},
			"the CPU: no commit within 30000 ms (deadline 600 ms at the claimed 2 GOPS): 3 challenges missed in a row"},
		{ledger.ChallengeFailure{Code: ledger.ChallengeMissLimit, Cause: ledger.ChallengeCauseNoOpening, Misses: 3}, "the CPU: no opening in time: 3 challenges missed in a row"},
	} {
		if got := ChallengeFailure(&c.f); got != c.want {
			t.Errorf("%+v:\n got %s\nwant %s", c.f, got, c.want)
		}
	}
}
