package provider_test

import (
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/hwinfo/nvmlsim"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/provider"
)

// TestSlashedProviderTopsUpStake runs two agents that fake their hardware
// proofs (a wrong opening: slashed on the first challenge) at the
// minimum stake, so that the slash leaves them under it, where no job is
// placed. The one with a balance tops its stake up by itself and says
// so. The one whose balance is empty says what is missing and the
// command that fixes it; once that command has run, it stakes what it
// received and is schedulable again.
func TestSlashedProviderTopsUpStake(t *testing.T) {
	n := startNetworkWith(t, func(p *ledger.Params) {
		p.HWRatePPM = 1_000_000
		p.HWTargetMillis = 200
		p.HWAllowanceMillis = 3_000
	}, "rich", "poor", "funder")
	ctx := t.Context()
	params, err := n.cl.Params(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The poor provider has exactly the minimum stake, and nothing more.
	poorKey, err := n.kr.Get("poor")
	if err != nil {
		t.Fatal(err)
	}
	funder, err := n.kr.Get("funder")
	if err != nil {
		t.Fatal(err)
	}
	bal, err := n.cl.Balance(ctx, poorKey.Address)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.cl.SendMsg(ctx, poorKey, 0, &ledger.MsgSend{To: funder.Address, Amount: ledger.Amount(bal.Balance - params.MinStakeCPU)}); err != nil {
		t.Fatal(err)
	}

	cpu := nvmlsim.Lib(nvmlsim.GPU{}, 0)
	faker := &provider.Faults{FakeChallenges: true}
	richLog, poorLog := &syncLog{}, &syncLog{}
	rich, _ := runAgentWith(t, n, "rich", cpu, "eu", 36_000, func(o *provider.Options) {
		o.Faults, o.Logger = faker, slog.New(slog.NewTextHandler(richLog, nil))
	})
	poor, _ := runAgentWith(t, n, "poor", cpu, "eu", 36_000, func(o *provider.Options) {
		o.Faults, o.Logger = faker, slog.New(slog.NewTextHandler(poorLog, nil))
	})
	record := func(a *provider.Agent) *ledger.Provider {
		p, err := n.cl.Provider(ctx, a.Status().Key())
		if err != nil {
			return nil
		}
		return p.Record
	}

	// Slashed under the minimum, the rich one tops up from its balance.
	waitForWithin(t, time.Minute, "the rich provider slashed and topped up", func() bool {
		r := record(rich)
		return r != nil && r.Slashed > 0 && strings.Contains(richLog.String(), "topped it up from the balance")
	})
	waitFor(t, "the rich provider schedulable again", func() bool {
		r := record(rich)
		return r.Stake >= params.MinStakeCPU
	})
	if l := richLog.String(); !strings.Contains(l, "amount_usync=") || strings.Contains(l, "UNDER-STAKED") {
		t.Errorf("the rich agent's log:\n%s", l)
	}

	// The poor one cannot: it says what is missing and how to fix it.
	var missing uint64
	waitForWithin(t, time.Minute, "the poor provider slashed and saying what it lacks", func() bool {
		r := record(poor)
		if r == nil || r.Slashed == 0 || !strings.Contains(poorLog.String(), "UNDER-STAKED") {
			return false
		}
		// What the agent said it lacks, in its latest warning: another
		// slash may already be on chain that it has not spoken of yet.
		said := saidMissing(poorLog.String())
		missing = said[len(said)-1]
		return true
	})
	cmd := fmt.Sprintf("gpunet tx send %s %dusync --from FUNDED_KEY", poorKey.Address, missing)
	if l := poorLog.String(); !strings.Contains(l, cmd) || !distinct(saidMissing(l)) {
		t.Fatalf("the poor agent's log lacks %q, or says one amount twice:\n%s", cmd, l)
	}
	if r := record(poor); r.Stake >= params.MinStakeCPU {
		t.Fatalf("the poor provider is at %d, not under the minimum %d", r.Stake, params.MinStakeCPU)
	}
	// The command, as the log gives it, with the funder's key. Its
	// challenges go on (faked) while it waits, so another slash may come
	// before the funds do (a CI run under load): it then says the new
	// amount it lacks, once, and that is sent in turn.
	for round := 1; ; round++ {
		said := strings.Count(poorLog.String(), "UNDER-STAKED")
		if _, err := n.cl.SendMsg(ctx, funder, 0, &ledger.MsgSend{To: poorKey.Address, Amount: ledger.Amount(missing)}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the poor provider staking what it received, or saying what it still lacks", func() bool {
			l := poorLog.String()
			return strings.Contains(l, "topped it up from the balance") || strings.Count(l, "UNDER-STAKED") > said
		})
		l := poorLog.String()
		if strings.Contains(l, "topped it up from the balance") {
			break
		}
		if round == 3 {
			t.Fatalf("slashed again after each of 3 fundings:\n%s", l)
		}
		m := regexp.MustCompile(`UNDER-STAKED.*missing_usync=(\d+)`).FindAllStringSubmatch(l, -1)
		missing, _ = strconv.ParseUint(m[len(m)-1][1], 10, 64)
		t.Logf("slashed again before the funds came: it now lacks %d usync", missing)
	}
	waitFor(t, "the poor provider's stake back at the minimum", func() bool {
		r := record(poor)
		return r != nil && r.Stake >= params.MinStakeCPU
	})
}

// saidMissing returns, in order, the missing_usync of each UNDER-STAKED
// warning in an agent's log.
func saidMissing(log string) []uint64 {
	var out []uint64
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "UNDER-STAKED") {
			continue
		}
		_, rest, ok := strings.Cut(line, "missing_usync=")
		if !ok {
			continue
		}
		f, _, _ := strings.Cut(rest, " ")
		if v, err := strconv.ParseUint(f, 10, 64); err == nil {
			out = append(out, v)
		}
	}
	return out
}

// distinct reports whether no amount appears twice in a row: the agent
// speaks again only of a new shortfall.
func distinct(v []uint64) bool {
	for i := 1; i < len(v); i++ {
		if v[i] == v[i-1] {
			return false
		}
	}
	return true
}
