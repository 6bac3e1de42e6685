package ledger

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
)

// Staking: a provider bonds tokens as collateral. Unstaked tokens wait out
// the unbonding period (params.unbonding_blocks) before they return to the
// balance, so stake can still be slashed for what was done while bonded.

// MsgStake bonds Amount of the sender's balance to its provider stake.
type MsgStake struct {
	Amount Amount `json:"amount"`
}

// MsgUnstake starts unbonding Amount of the sender's provider stake.
type MsgUnstake struct {
	Amount Amount `json:"amount"`
}

// Type implements Msg.
func (*MsgStake) Type() MsgType { return MsgTypeStake }

// Type implements Msg.
func (*MsgUnstake) Type() MsgType { return MsgTypeUnstake }

// ValidateBasic implements Msg.
func (m *MsgStake) ValidateBasic() error { return positive(m.Amount) }

// ValidateBasic implements Msg.
func (m *MsgUnstake) ValidateBasic() error { return positive(m.Amount) }

func positive(a Amount) error {
	if a == 0 {
		return fmt.Errorf("amount must be positive, got 0: %w", ErrInvalidAmount)
	}
	return nil
}

// unbondingKey orders entries by the height at which they complete.
func unbondingKey(height uint64, a address.Address) []byte {
	k := binary.BigEndian.AppendUint64(slices.Clone(prefixUnbonding), height)
	return append(k, a[:]...)
}

// Unbonding is stake on its way back to an account's balance.
type Unbonding struct {
	Address address.Address `json:"address"`
	Amount  uint64          `json:"amount"`
	// CompletionHeight is the first block at whose start the amount is
	// back in the balance.
	CompletionHeight uint64 `json:"completion_height"`
}

// Staked returns the total bonded stake.
func Staked(kv KV) uint64 { return getUint(kv, keyStaked) }

// UnbondingTotal returns the total stake unbonding.
func UnbondingTotal(kv KV) uint64 { return getUint(kv, keyUnbonding) }

// GetUnbondings returns addr's unbonding entries (all when addr is zero),
// soonest first.
func GetUnbondings(kv KV, addr address.Address) []Unbonding {
	var out []Unbonding
	kv.Iterate(prefixUnbonding, prefixEnd(prefixUnbonding), func(k, v []byte) bool {
		u := Unbonding{CompletionHeight: binary.BigEndian.Uint64(k[len(prefixUnbonding):]), Amount: binary.BigEndian.Uint64(v)}
		copy(u.Address[:], k[len(prefixUnbonding)+8:])
		if addr.IsZero() || u.Address == addr {
			out = append(out, u)
		}
		return true
	})
	return out
}

func execStake(o *Overlay, from address.Address, m *MsgStake) ([]Event, error) {
	p, err := mustProvider(o, from)
	if err != nil {
		return nil, err
	}
	acct, err := GetAccount(o, from)
	if err != nil {
		return nil, err
	}
	amt := uint64(m.Amount)
	if acct.Balance < amt {
		return nil, fmt.Errorf("%s has %dusync, cannot stake %dusync: %w", from, acct.Balance, amt, ErrInsufficientFunds)
	}
	acct.Balance -= amt
	p.Stake += amt
	setAccount(o, &acct)
	setProvider(o, p)
	setUint(o, keyStaked, Staked(o)+amt)
	return []Event{{Type: "stake", Attrs: []Attr{{"provider", from.String()}, {"amount", strconv.FormatUint(amt, 10)}, {"stake", strconv.FormatUint(p.Stake, 10)}}}}, nil
}

func execUnstake(o *Overlay, from address.Address, m *MsgUnstake, params Params, info BlockInfo) ([]Event, error) {
	p, err := mustProvider(o, from)
	if err != nil {
		return nil, err
	}
	amt := uint64(m.Amount)
	if amt > p.Stake {
		return nil, fmt.Errorf("%s has %dusync staked, cannot unstake %dusync: %w", from, p.Stake, amt, ErrInsufficientStake)
	}
	p.Stake -= amt
	setProvider(o, p)
	setUint(o, keyStaked, Staked(o)-amt)
	done := uint64(info.Height) + params.UnbondingBlocks
	k := unbondingKey(done, from)
	setUint(o, k, getUint(o, k)+amt)
	setUint(o, keyUnbonding, UnbondingTotal(o)+amt)
	return []Event{{Type: "unstake", Attrs: []Attr{
		{"provider", from.String()}, {"amount", strconv.FormatUint(amt, 10)}, {"completion_height", strconv.FormatUint(done, 10)},
	}}}, nil
}

// releaseUnbonded returns to their balances the unbonding entries that
// complete at or before height, but those of providers with unfinished
// jobs, which wait for the jobs' verdicts.
func releaseUnbonded(o *Overlay, height uint64) ([]Event, error) {
	end := unbondingKey(height+1, address.Address{})
	var done []Change
	o.Iterate(prefixUnbonding, end, func(k, v []byte) bool {
		done = append(done, Change{Key: slices.Clone(k), Value: slices.Clone(v)})
		return true
	})
	var events []Event
	for _, c := range done {
		addr, err := address.FromBytes(c.Key[len(prefixUnbonding)+8:])
		if err != nil {
			return nil, fmt.Errorf("unbonding key %x: %w: %w", c.Key, err, ErrInternal)
		}
		amt := binary.BigEndian.Uint64(c.Value)
		if hasActiveJobs(o, addr) || hasServiceReplicas(o, addr) {
			// Stake stays slashable until every job the provider took
			// part in has its verdict, and while it runs a service
			// replica (a provider busy as one with a job): try again
			// next block.
			o.Delete(c.Key)
			k := unbondingKey(height+1, addr)
			setUint(o, k, getUint(o, k)+amt)
			continue
		}
		acct, err := GetAccount(o, addr)
		if err != nil {
			return nil, err
		}
		acct.Balance += amt
		setAccount(o, &acct)
		setUint(o, keyUnbonding, UnbondingTotal(o)-amt)
		o.Delete(c.Key)
		events = append(events, Event{Type: "unbonded", Attrs: []Attr{{"address", addr.String()}, {"amount", strconv.FormatUint(amt, 10)}}})
	}
	return events, nil
}

// slashFor takes params.slash_bps of a provider's stake (bonded first, then
// unbonding) for the given reason: params.slash_compensation_bps of it to
// beneficiary (the harmed job's owner; the zero address: none), the rest
// to the treasury, and records why in the provider's slash events (ev,
// its height and amount filled in). It returns the amount slashed.
func slashFor(o *Overlay, addr, beneficiary address.Address, p Params, info BlockInfo, ev SlashEvent) (uint64, error) {
	pr, err := mustProvider(o, addr)
	if err != nil {
		return 0, err
	}
	unbonding := GetUnbondings(o, addr)
	var total uint64 = pr.Stake
	for _, u := range unbonding {
		total += u.Amount
	}
	amt := mulDiv(total, p.SlashBps, 10_000)
	if amt == 0 && pr.Delegated == 0 {
		return 0, nil
	}
	left := amt
	fromStake := min(left, pr.Stake)
	pr.Stake -= fromStake
	left -= fromStake
	setUint(o, keyStaked, Staked(o)-fromStake)
	for _, u := range unbonding {
		if left == 0 {
			break
		}
		take := min(left, u.Amount)
		k := unbondingKey(u.CompletionHeight, addr)
		if rest := u.Amount - take; rest == 0 {
			o.Delete(k)
		} else {
			setUint(o, k, rest)
		}
		setUint(o, keyUnbonding, UnbondingTotal(o)-take)
		left -= take
	}
	pr.Slashed += amt
	if err := forfeitRewards(o, addr); err != nil {
		return 0, err
	}
	// Its delegators, at the same rate. The ledger does not know when a
	// provider's fault was done (a verdict comes after the job), so, as
	// for its own unbonding stake, every delegation entry still in its
	// period is slashable (infraction height 1).
	tokens, fromDelegations, err := slashPool(o, Target{TargetProvider, addr}, p.SlashBps*100, 1)
	if err != nil {
		return 0, err
	}
	pr.Delegated = tokens
	setUint(o, keyTreasury, Treasury(o)+fromDelegations)
	ev.Height, ev.Amount = uint64(info.Height), amt
	pr.SlashEvents = append(pr.SlashEvents, ev)
	if len(pr.SlashEvents) > maxSlashEvents {
		pr.SlashEvents = pr.SlashEvents[len(pr.SlashEvents)-maxSlashEvents:]
	}
	setProvider(o, pr)
	comp := uint64(0)
	if !beneficiary.IsZero() {
		comp = mulDiv(amt, p.SlashCompensationBps, 10_000)
		acct, err := GetAccount(o, beneficiary)
		if err != nil {
			return 0, err
		}
		acct.Balance += comp
		setAccount(o, &acct)
	}
	setUint(o, keyTreasury, Treasury(o)+amt-comp)
	return amt, nil
}

// SlashEvent is one slash of a provider, kept in its record (the latest
// maxSlashEvents).
//
// Code says why (the Slash* codes), with the job (Job) and the numbers
// behind it; Reason is the sentence records written before version 6
// hold instead (the API fills it in from Code for people).
type SlashEvent struct {
	Height uint64 `json:"height"`
	Amount uint64 `json:"amount"`
	Reason string `json:"reason"`
	Code   string `json:"code,omitempty" rec:"since=6"`
	Job    uint64 `json:"job,omitempty" rec:"since=6"`
	Seq    uint64 `json:"seq,omitempty" rec:"since=6"` // the checkpoint outvoted
	Count  uint64 `json:"count,omitempty" rec:"since=6"`
	Of     uint64 `json:"of,omitempty" rec:"since=6"`
	// Service is the service whose replica answered wrongly
	// (SlashServiceOutvoted).
	Service uint64 `json:"service,omitempty" rec:"since=8"`
}

const maxSlashEvents = 16
