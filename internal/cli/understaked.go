package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/chainclient"
)

// Under-staked providers. The scheduler passes over an online provider
// whose stake is under the ledger's minimum (its reason says "N are
// under-staked"; a slash is the usual way there). The ledger records only
// the count; provider status, quote and job status name the providers and
// the one command that makes each schedulable again.

// stakeFix is an online provider the scheduler passes over for its stake,
// and the command that fixes it.
type stakeFix struct {
	Provider string `json:"provider"`
	Name     string `json:"name,omitempty"` // its key's name in this keyring
	Stake    uint64 `json:"stake"`
	Required uint64 `json:"required_stake"`
	Balance  uint64 `json:"balance"`
	// Missing is the stake it lacks (required − stake); Fund what must be
	// sent to it first when its balance cannot cover that (0 when it
	// can).
	Missing uint64 `json:"missing"`
	Fund    uint64 `json:"fund,omitempty"`
	Command string `json:"command"`
}

// maxStakeFixes bounds the providers quote and job status list.
const maxStakeFixes = 10

// stakeFixOf returns the fix for provider p, or nil when p is offline or
// staked at least the minimum. It reads p's balance.
func stakeFixOf(ctx context.Context, cl *chainclient.Client, p *apiwire.ProviderBody, names keyNames) (*stakeFix, error) {
	r := p.Record
	if r == nil || !r.Online || r.Stake >= p.RequiredStake {
		return nil, nil
	}
	bal, err := cl.Balance(ctx, r.Address)
	if err != nil {
		return nil, err
	}
	f := &stakeFix{
		Provider: r.Address.String(), Name: names.name(r.Address),
		Stake: r.Stake, Required: p.RequiredStake, Balance: bal.Balance, Missing: p.RequiredStake - r.Stake,
	}
	if f.Balance >= f.Missing {
		key := f.Name
		if key == "" {
			key = "PROVIDER_KEY"
		}
		f.Command = hint(fmt.Sprintf("stake add %dusync --from %s", f.Missing, key))
	} else {
		// The agent stakes what reaches its balance by itself.
		f.Fund = f.Missing - f.Balance
		f.Command = hint(fmt.Sprintf("tx send %s %dusync --from FUNDED_KEY", f.Provider, f.Fund))
	}
	return f, nil
}

// underStaked returns the online providers that are under-staked (online
// but not schedulable: the only other condition), the first
// maxStakeFixes with their fixes, and how many there are in all.
func underStaked(ctx context.Context, cl *chainclient.Client, names keyNames) ([]stakeFix, int, error) {
	all, err := cl.Offers(ctx, "", "", true)
	if err != nil {
		return nil, 0, err
	}
	schedulable, err := cl.Offers(ctx, "", "", false)
	if err != nil {
		return nil, 0, err
	}
	ok := map[string]bool{}
	for _, o := range schedulable {
		ok[o.Address] = true
	}
	var fixes []stakeFix
	count := 0
	for _, o := range all {
		if !o.Online || ok[o.Address] {
			continue
		}
		count++
		if len(fixes) >= maxStakeFixes {
			continue
		}
		a, err := address.Parse(o.Address)
		if err != nil {
			return nil, 0, err
		}
		p, err := cl.Provider(ctx, a)
		if err != nil {
			return nil, 0, err
		}
		f, err := stakeFixOf(ctx, cl, p, names)
		if err != nil {
			return nil, 0, err
		}
		if f != nil {
			fixes = append(fixes, *f)
		}
	}
	return fixes, count, nil
}

// printStakeFix writes one under-staked provider and its fix for people.
func printStakeFix(w io.Writer, f *stakeFix, names keyNames) {
	who := f.Provider
	if a, err := address.Parse(f.Provider); err == nil {
		who = names.addr(a)
	}
	fmt.Fprintf(w, "under-staked: %s has %s staked of the %s minimum, so no job is placed on it", who, formatSync(f.Stake), formatSync(f.Required))
	if f.Fund > 0 {
		fmt.Fprintf(w, "; its balance (%s) cannot make up the %s missing", formatSync(f.Balance), formatSync(f.Missing))
	}
	fmt.Fprintln(w)
	if f.Fund > 0 {
		fmt.Fprintf(w, "  fix: %s   (its agent stakes what it receives)\n", f.Command)
		return
	}
	fmt.Fprintf(w, "  fix: %s\n", f.Command)
}

// printStakeFixes writes the under-staked providers of a job that cannot
// be placed.
func printStakeFixes(w io.Writer, fixes []stakeFix, count int, names keyNames) {
	for i := range fixes {
		printStakeFix(w, &fixes[i], names)
	}
	if more := count - len(fixes); more > 0 {
		fmt.Fprintf(w, "under-staked: %d more (gpunet offers --all lists every provider)\n", more)
	}
}
