package e2e

import (
	"testing"
	"time"
)

// providerJSON is the part of `gpunet query provider --output json` this
// test reads.
type providerJSON struct {
	Address     string  `json:"address"`
	Stake       uint64  `json:"stake"`
	Online      bool    `json:"online"`
	Reputation  float64 `json:"reputation"`
	Uptime      float64 `json:"uptime"`
	TOPS        float64 `json:"tops"`
	Schedulable bool    `json:"schedulable"`
	Record      struct {
		RegisteredHeight uint64 `json:"registered_height"`
		Answered         uint64 `json:"answered"`
		Missed           uint64 `json:"missed"`
		Reputation       uint64 `json:"reputation"`
	} `json:"record"`
}

func queryProvider(t testing.TB, home, name string) providerJSON {
	t.Helper()
	var p providerJSON
	gpunetJSON(t, &p, "query", "provider", name, "--home", home)
	return p
}

// TestProviderKilledAndRestarted runs `gpunet provider start` as its own
// process: killed with SIGKILL it goes offline once it misses its liveness
// challenges; restarted, it comes back as the same provider with its
// history; stopped with Ctrl-C it leaves cleanly.
func TestProviderKilledAndRestarted(t *testing.T) {
	parallel(t, weightLight)
	home := t.TempDir()
	startDevnet(t, home, "--block-time", "100ms")
	gpunetJSON(t, &map[string]any{}, "keys", "add", "carol", "--home", home)
	gpunetJSON(t, &map[string]any{}, "tx", "send", "carol", "100sync", "--from", "alice", "--home", home)
	args := []string{"provider", "start", "--from", "carol", "--home", home, "--bench-time", "300ms", "--region", "eu", "--price", "0.05sync"}

	prov := startProc(t, "provider carol", args...)
	carol := keyAddress(t, home, "carol")
	cl := nodeAPI(t, home, "")
	waitUntil(t, 30*time.Second, "carol registered, staked and answering challenges", func() bool {
		ctx, cancel := pollCtx(t)
		defer cancel()
		p, err := cl.Provider(ctx, carol)
		return err == nil && p.Record != nil && p.Online && p.Schedulable && p.Record.Answered >= 2
	})
	before := queryProvider(t, home, "carol")
	if before.TOPS <= 0 || before.Stake < 10_000_000 {
		t.Fatalf("registered provider: %+v", before)
	}
	var listed []providerJSON
	gpunetJSON(t, &listed, "offers", "region=eu price<=0.05", "--home", home)
	if len(listed) != 1 || listed[0].Address != before.Address {
		t.Fatalf("offers: %+v, want carol", listed)
	}

	prov.kill()
	waitUntil(t, 30*time.Second, "carol offline after missing challenges", func() bool {
		return !provider(t, home, "carol").Online
	})
	gone := queryProvider(t, home, "carol")
	if gone.Record.Missed < 3 || gone.Record.Reputation >= before.Record.Reputation {
		t.Fatalf("after SIGKILL: missed %d reputation %d (was %d)", gone.Record.Missed, gone.Record.Reputation, before.Record.Reputation)
	}
	gpunetJSON(t, &listed, "offers", "--home", home)
	if len(listed) != 0 {
		t.Fatalf("offline provider still offered: %+v", listed)
	}

	prov = startProc(t, "provider carol again", args...)
	waitUntil(t, 30*time.Second, "carol back online and answering", func() bool {
		p := provider(t, home, "carol")
		return p.Online && p.Record != nil && p.Record.Answered > gone.Record.Answered
	})
	back := queryProvider(t, home, "carol")
	if back.Address != before.Address || back.Record.RegisteredHeight != before.Record.RegisteredHeight {
		t.Fatalf("restarted provider is not the same: %+v vs %+v", back, before)
	}
	if back.Record.Missed < gone.Record.Missed || back.Record.Reputation >= before.Record.Reputation {
		t.Fatalf("history not kept: missed %d (was %d), reputation %d (before the kill %d)", back.Record.Missed, gone.Record.Missed, back.Record.Reputation, before.Record.Reputation)
	}

	if code := prov.stop(15 * time.Second); code != 0 {
		t.Fatalf("provider exited %d on SIGINT, want 0", code)
	}
	left := queryProvider(t, home, "carol")
	if left.Online {
		t.Fatal("provider still online after Ctrl-C")
	}
	time.Sleep(time.Second) // ten blocks: any open challenge would have expired
	if after := queryProvider(t, home, "carol"); after.Record.Missed != left.Record.Missed {
		t.Fatalf("a clean stop cost missed challenges: %d → %d", left.Record.Missed, after.Record.Missed)
	}
	var st map[string]any
	gpunetJSON(t, &st, "provider", "status", "--from", "carol", "--home", home)
	agent, _ := st["agent"].(map[string]any)
	if agent == nil || agent["address"] != before.Address || agent["inventory"] == nil || agent["measured"] == nil {
		t.Fatalf("provider status: %v", st)
	}
}
