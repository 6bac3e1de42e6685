package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/provider"
)

// TestUnderStakedProviderNamed: with the only provider under the minimum
// stake (as after a slash), quote, job status and provider status name it,
// say what it lacks, and give the one command that fixes it: stake add
// while its balance covers the difference, a send to it when it does not;
// and that command, run, makes the job placeable again.
func TestUnderStakedProviderNamed(t *testing.T) {
	s := newStory(t)
	spec := filepath.Join(s.home, "spec", "job.yaml")
	addr := s.prov.Addr.String()
	// Before: nothing is under-staked, nothing said.
	if out := s.ok("quote", spec); strings.Contains(out, "under-staked") {
		t.Fatalf("quote with a staked provider:\n%s", out)
	}
	s.chain.Send(s.prov, &ledger.MsgUnstake{Amount: 1_000_000})

	// Its balance covers the missing 1 SYNC: stake add, with the key's
	// name where the keyring knows it (here it does not).
	stakeAdd := "fix: gpunet stake add 1000000usync --from PROVIDER_KEY"
	said := "under-staked: " + addr + " has 9 SYNC staked of the 10 SYNC minimum, so no job is placed on it"
	out := s.ok("quote", spec)
	for _, want := range []string{"it would wait: 0 of 1 providers within the price can run it: 1 are under-staked", said, stakeAdd} {
		if !strings.Contains(out, want) {
			t.Errorf("quote lacks %q:\n%s", want, out)
		}
	}
	var q struct {
		Code        string     `json:"code"`
		UnderStaked []stakeFix `json:"under_staked"`
	}
	if err := json.Unmarshal([]byte(s.ok("quote", spec, "-o", "json")), &q); err != nil {
		t.Fatal(err)
	}
	if q.Code != ledger.QuoteNoFit || len(q.UnderStaked) != 1 || q.UnderStaked[0].Provider != addr || q.UnderStaked[0].Missing != 1_000_000 || q.UnderStaked[0].Command != strings.TrimPrefix(stakeAdd, "fix: ") {
		t.Errorf("quote -o json: %+v", q)
	}

	s.ok("job", "submit", spec, "--from", "alice")
	if out := s.ok("job", "status", "1"); !strings.Contains(out, "1 are under-staked") || !strings.Contains(out, said) || !strings.Contains(out, stakeAdd) {
		t.Errorf("job status of a job waiting for the under-staked provider:\n%s", out)
	}

	// The provider's own status, from its agent's home.
	st := provider.Status{Name: "p1", Address: addr}
	b, _ := json.Marshal(st)
	os.MkdirAll(filepath.Join(s.home, "provider"), 0o755)
	if err := os.WriteFile(provider.StatusFile(s.home, "p1"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if out := s.ok("provider", "status", "--from", "p1"); !strings.Contains(out, said) || !strings.Contains(out, stakeAdd) {
		t.Errorf("provider status of an under-staked provider:\n%s", out)
	}

	// With its balance gone, the fix is to send it what it lacks: its
	// agent stakes what it receives.
	kv, release := s.chain.View()
	acct, err := ledger.GetAccount(kv, s.prov.Addr)
	release()
	if err != nil {
		t.Fatal(err)
	}
	s.chain.Send(s.prov, &ledger.MsgSend{To: s.bob.Address, Amount: ledger.Amount(acct.Balance)})
	send := "fix: gpunet tx send " + addr + " 1000000usync --from FUNDED_KEY"
	for _, args := range [][]string{{"quote", spec}, {"job", "status", "1"}, {"provider", "status", "--from", "p1"}} {
		if out := s.ok(args...); !strings.Contains(out, send) || !strings.Contains(out, "; its balance (0 SYNC) cannot make up the 1 SYNC missing") {
			t.Errorf("gpunet %s with no balance to stake from:\n%s", strings.Join(args, " "), out)
		}
	}
	// The command as given, with a funded key, and the agent's stake.
	s.ok("tx", "send", addr, "1000000usync", "--from", "alice")
	s.chain.Send(s.prov, &ledger.MsgStake{Amount: 1_000_000})
	if out := s.ok("quote", spec); strings.Contains(out, "under-staked") || !strings.HasPrefix(out, "1 provider(s) can run") {
		t.Errorf("quote once fixed:\n%s", out)
	}
}
