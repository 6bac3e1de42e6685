package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Keeping the stake. The agent bonds its stake when it connects, and each
// poll it checks that the ledger still counts it: a slash takes a share of
// the stake and can leave it under the minimum (Provider.RequiredStake:
// params.min_stake_cpu, or min_stake_per_gpu per GPU), where the scheduler
// passes the provider over ("are under-staked"). The agent then tops the
// stake up from its balance and says so. When the balance cannot cover it,
// it says what is missing and the one command that fixes it (sending the
// difference to the provider's address: it stakes it by itself), once per
// shortfall, and looks again at the next poll.

// stakeKeeper is what the agent remembers between polls about its stake.
type stakeKeeper struct {
	// said is the shortfall last logged, so that a poll logs only news.
	said string
	// pending is a top-up that was accepted but not in a block yet: the
	// stake it was sent at, and until when not to send another.
	pendingAt    uint64
	pendingUntil time.Time
}

// stakeTarget is the stake the agent keeps: Options.Stake, and at least
// the ledger's minimum for this machine.
func (a *Agent) stakeTarget(p *apiwire.ProviderBody) uint64 {
	return max(a.o.Stake, p.RequiredStake)
}

// stakeCommand is the command that bonds amount more stake for this
// provider.
func (a *Agent) stakeCommand(amount uint64) string {
	return fmt.Sprintf("gpunet stake add %dusync --from %s", amount, a.o.Key.Name)
}

// fundCommand is the command that sends amount to this provider's
// account, for the agent to stake.
func (a *Agent) fundCommand(amount uint64) string {
	return fmt.Sprintf("gpunet tx send %s %dusync --from FUNDED_KEY", a.o.Key.Address, amount)
}

// keepStake tops the stake of provider p up to its target from the balance
// when it is under floor (the ledger's minimum when the agent serves; the
// target itself when it connects), or says why it cannot. It never fails
// the poll: the agent goes on answering challenges under-staked.
func (a *Agent) keepStake(ctx context.Context, p *apiwire.ProviderBody, floor uint64, connecting bool) {
	r, k := p.Record, &a.stake
	target := a.stakeTarget(p)
	if r.Stake >= floor || r.Stake >= target {
		if k.said != "" {
			a.log.Info("stake back at its target", "stake_usync", r.Stake, "minimum_usync", p.RequiredStake)
		}
		k.said, k.pendingUntil = "", time.Time{}
		return
	}
	if r.Stake == k.pendingAt && a.clk.Now().Before(k.pendingUntil) {
		return // the last top-up is on its way into a block
	}
	need := target - r.Stake
	bal, err := a.o.Chain.Balance(ctx, a.o.Key.Address)
	if err != nil {
		a.sayStake("cannot read the balance to top up the stake", "err", err)
		return
	}
	if bal.Balance < need {
		missing := need - bal.Balance
		a.sayStake(fmt.Sprintf("UNDER-STAKED: the stake is under the ledger's minimum, so no job or service is placed here, and the balance cannot top it up; send %dusync to this provider and it stakes it by itself: %s", missing, a.fundCommand(missing)),
			"stake_usync", r.Stake, "minimum_usync", p.RequiredStake, "target_usync", target, "balance_usync", bal.Balance, "missing_usync", missing, "slashed_usync", r.Slashed)
		return
	}
	_, err = a.o.Chain.SendMsg(ctx, a.o.Key, 0, &ledger.MsgStake{Amount: ledger.Amount(need)})
	switch {
	case errors.Is(err, chainclient.ErrNotInBlockYet):
		k.pendingAt, k.pendingUntil = r.Stake, a.clk.Now().Add(30*time.Second)
	case err != nil:
		a.sayStake(fmt.Sprintf("UNDER-STAKED: the stake is under the ledger's minimum, so no job or service is placed here, and topping it up failed; to do it by hand: %s", a.stakeCommand(need)),
			"stake_usync", r.Stake, "minimum_usync", p.RequiredStake, "err", err)
		return
	}
	if connecting {
		a.log.Info("staking", "amount_usync", need, "target_usync", target, "minimum_usync", p.RequiredStake)
	} else {
		a.log.Info("the stake was under the ledger's minimum: topped it up from the balance",
			"amount_usync", need, "stake_usync", r.Stake+need, "minimum_usync", p.RequiredStake, "balance_usync", bal.Balance-need, "slashed_usync", r.Slashed)
	}
	k.said = ""
}

// sayStake logs a problem with the stake once, until it changes.
func (a *Agent) sayStake(msg string, args ...any) {
	key := fmt.Sprint(append([]any{msg}, args...)...)
	if key == a.stake.said {
		return
	}
	a.stake.said = key
	a.log.Warn(msg, args...)
}
