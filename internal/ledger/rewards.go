package ledger

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
)

// Rewards: what each epoch mints, and who gets it (DESIGN.md section 6,
// issue 14).
//
// An epoch's emission is max(0, params.emission_target − what consumers
// paid providers in it), and at most params.reward_fee_cap_ppm of the
// protocol fees paid in it: it shrinks as paid demand grows, and it never
// exceeds the fees behind it. params.reward_validator_ppm of it goes to
// the active validators by power (as their fee share does); the rest to
// the providers, in proportion to their verified work: the usync paid for
// the results a verdict accepted (decide), audited or not. Work is
// weighed by what was paid for it, not by unit-seconds, so that each
// usync of reward stands on at least 1/cap usync of fees. A provider
// renting itself (under any address) thus gets back at most cap × its
// fee in rewards, and with the validators' fee share (cap + share < 1:
// FeeCapPPM) less than the fee it paid: self-dealing always loses. Work
// and fees where the job's owner is the provider do not count at all.
//
// Paying 100k providers at an epoch's end would cost far more than the
// epoch's other work, so each provider's share is settled lazily: the
// epoch's end mints the providers' pool into the reward pool
// (chain/rewardpool) and records the epoch's rate (rwd/r/<epoch>: pool,
// work, providers still to settle); a provider's work record
// (rwd/w/<address>) is settled, and paid from the pool, when it next
// records work, when it claims (MsgClaimRewards), or forfeited when it is
// slashed. When the last provider of an epoch has settled, the rounding
// left in its pool goes to the treasury.

// MsgClaimRewards pays the sender the rewards of its closed epochs.
type MsgClaimRewards struct{}

// Type implements Msg.
func (*MsgClaimRewards) Type() MsgType { return MsgTypeClaimRewards }

// ValidateBasic implements Msg.
func (*MsgClaimRewards) ValidateBasic() error { return nil }

func execClaimRewards(o *Overlay, from address.Address, _ *MsgClaimRewards, _ Params, _ BlockInfo) ([]Event, error) {
	w := getRewardWork(o, from)
	ep := GetEpoch(o)
	var amt uint64
	hasWork := w.Work > 0 && w.Epoch < ep.Number
	if hasWork {
		var err error
		if amt, err = settleRewardWork(o, from, &w, false); err != nil {
			return nil, err
		}
	}
	// And its delegations' rewards (delegation_rewards.go).
	delegated, err := claimDelegationRewards(o, from)
	if err != nil {
		return nil, err
	}
	if !hasWork && delegated == 0 {
		return nil, fmt.Errorf("%s has no rewards to claim (work of epoch %d, the open epoch is %d; no delegation rewards): %w", from, w.Epoch, ep.Number, ErrInvalidMsg)
	}
	return []Event{{Type: "rewards_claimed", Attrs: []Attr{{"provider", from.String()}, {"amount", strconv.FormatUint(amt, 10)}, {"delegations", strconv.FormatUint(delegated, 10)}}}}, nil
}

// RewardPool is the minted usync not yet paid to providers.
func RewardPool(kv KV) uint64 { return getUint(kv, keyRewardPool) }

// Minted is all the usync ever minted as rewards.
func Minted(kv KV) uint64 { return getUint(kv, keyMinted) }

// mint adds amt to the supply, into the account at key (a counter).
func mint(o *Overlay, key []byte, amt uint64) {
	if amt == 0 {
		return
	}
	setUint(o, keySupply, Supply(o)+amt)
	setUint(o, keyMinted, Minted(o)+amt)
	setUint(o, key, getUint(o, key)+amt)
}

// EpochDemand is what the open epoch's rewards are computed from.
type EpochDemand struct {
	Fees      uint64 `json:"fees"`      // protocol fees consumers paid
	Paid      uint64 `json:"paid"`      // what consumers paid providers
	Work      uint64 `json:"work"`      // verified work, usync paid for it
	Providers uint64 `json:"providers"` // providers with work
}

func getEpochDemand(kv KV) EpochDemand {
	var d EpochDemand
	if b := kv.Get(keyRewardEpoch); len(b) == 32 {
		d = EpochDemand{binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:]), binary.BigEndian.Uint64(b[16:]), binary.BigEndian.Uint64(b[24:])}
	}
	return d
}

func setEpochDemand(o *Overlay, d EpochDemand) {
	o.Set(keyRewardEpoch, appendUints(nil, d.Fees, d.Paid, d.Work, d.Providers))
}

func appendUints(b []byte, vs ...uint64) []byte {
	for _, v := range vs {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return b
}

func readUints(b []byte, vs ...*uint64) bool {
	if len(b) != 8*len(vs) {
		return false
	}
	for i, v := range vs {
		*v = binary.BigEndian.Uint64(b[8*i:])
	}
	return true
}

// notePayment counts a payment to a's provider from j's escrow (cost,
// and fee to the protocol) in the open epoch's demand. Called by
// payAssignment.
func notePayment(o *Overlay, j *Job, a *Assignment, cost, fee uint64) {
	if !countsInMarket(j, a) || cost+fee == 0 {
		return
	}
	d := getEpochDemand(o)
	d.Fees += fee
	d.Paid += cost
	setEpochDemand(o, d)
}

// RewardWork is a provider's verified work in its last epoch with work,
// not yet settled, and what it was paid in rewards so far.
type RewardWork struct {
	Epoch    uint64 `json:"epoch"`
	Work     uint64 `json:"work"`
	Rewarded uint64 `json:"rewarded"`
}

func rewardWorkKey(a address.Address) []byte { return append(slices.Clone(prefixRewardWork), a[:]...) }

func getRewardWork(kv KV, a address.Address) RewardWork {
	var w RewardWork
	readUints(kv.Get(rewardWorkKey(a)), &w.Epoch, &w.Work, &w.Rewarded)
	return w
}

func setRewardWork(o *Overlay, a address.Address, w RewardWork) {
	o.Set(rewardWorkKey(a), appendUints(nil, w.Epoch, w.Work, w.Rewarded))
}

// GetRewardWork returns a provider's reward record.
func GetRewardWork(kv KV, a address.Address) RewardWork { return getRewardWork(kv, a) }

// epochRate is a closed epoch's providers' pool, the work it is shared
// by, and how much of it is paid to how many providers still to settle.
type epochRate struct {
	pool, work, remaining, paid uint64
}

func rewardRateKey(epoch uint64) []byte { return u64(slices.Clone(prefixRewardRate), epoch) }

func getEpochRate(kv KV, epoch uint64) (epochRate, bool) {
	var r epochRate
	ok := readUints(kv.Get(rewardRateKey(epoch)), &r.pool, &r.work, &r.remaining, &r.paid)
	return r, ok
}

// PendingReward is what a provider's unsettled work of a closed epoch
// will pay (0 for work of the open epoch, whose rate is not known yet).
func PendingReward(kv KV, a address.Address) uint64 {
	w := getRewardWork(kv, a)
	if w.Work == 0 || w.Epoch >= GetEpoch(kv).Number {
		return 0
	}
	r, ok := getEpochRate(kv, w.Epoch)
	if !ok || r.work == 0 {
		return 0
	}
	return mulDiv(w.Work, r.pool, r.work)
}

// settleRewardWork settles a's work of a closed epoch: paid from the pool,
// or, forfeit, moved to the treasury. It leaves w empty and stored.
func settleRewardWork(o *Overlay, a address.Address, w *RewardWork, forfeit bool) (uint64, error) {
	var amt uint64
	if r, ok := getEpochRate(o, w.Epoch); ok && w.Work > 0 {
		if r.work > 0 {
			amt = min(mulDiv(w.Work, r.pool, r.work), r.pool-r.paid)
		}
		r.paid += amt
		r.remaining--
		pool := RewardPool(o)
		if pool < amt {
			return 0, fmt.Errorf("reward pool %d cannot pay %d: %w", pool, amt, ErrInternal)
		}
		pool -= amt
		if forfeit {
			setUint(o, keyTreasury, Treasury(o)+amt)
		} else if amt > 0 {
			own := amt
			if p, ok, err := GetProvider(o, a); err != nil {
				return 0, err
			} else if ok {
				// Its delegators' part, after its commission.
				if own, err = distributeToTarget(o, Target{TargetProvider, a}, p.Stake, amt); err != nil {
					return 0, err
				}
			}
			acct, err := GetAccount(o, a)
			if err != nil {
				return 0, err
			}
			acct.Balance += own
			setAccount(o, &acct)
			w.Rewarded += amt
		}
		if r.remaining == 0 {
			// The epoch's last provider: what rounding left goes to the
			// treasury.
			dust := r.pool - r.paid
			pool -= min(dust, pool)
			setUint(o, keyTreasury, Treasury(o)+dust)
			o.Delete(rewardRateKey(w.Epoch))
		} else {
			o.Set(rewardRateKey(w.Epoch), appendUints(nil, r.pool, r.work, r.remaining, r.paid))
		}
		setUint(o, keyRewardPool, pool)
	}
	w.Work = 0
	setRewardWork(o, a, *w)
	return amt, nil
}

// recordWork adds verified work (usync paid for a result a verdict
// accepted) to a's provider in the open epoch, settling its earlier
// epoch first. Called by decide.
func recordWork(o *Overlay, j *Job, a *Assignment, paid uint64) error {
	if !countsInMarket(j, a) || paid == 0 {
		return nil
	}
	ep := GetEpoch(o).Number
	w := getRewardWork(o, a.Provider)
	if w.Epoch != ep && w.Work > 0 {
		if _, err := settleRewardWork(o, a.Provider, &w, false); err != nil {
			return err
		}
	}
	d := getEpochDemand(o)
	if w.Epoch != ep || w.Work == 0 {
		w.Epoch = ep
		d.Providers++
	}
	w.Work += paid
	d.Work += paid
	setEpochDemand(o, d)
	setRewardWork(o, a.Provider, w)
	return nil
}

// forfeitRewards takes a slashed provider's unsettled rewards: its work
// in the open epoch no longer counts, and what a closed epoch owed it goes
// to the treasury. Called by slash.
func forfeitRewards(o *Overlay, a address.Address) error {
	w := getRewardWork(o, a)
	if w.Work == 0 {
		return nil
	}
	if w.Epoch == GetEpoch(o).Number {
		d := getEpochDemand(o)
		d.Work -= min(d.Work, w.Work)
		d.Providers -= min(d.Providers, 1)
		setEpochDemand(o, d)
		w.Work = 0
		setRewardWork(o, a, w)
		return nil
	}
	_, err := settleRewardWork(o, a, &w, true)
	return err
}

// Emission is what an epoch with demand d mints under p: max(0, target −
// paid), at most FeeCapPPM of the fees.
func Emission(p Params, d EpochDemand) uint64 {
	var e uint64
	if p.EmissionTarget > d.Paid {
		e = p.EmissionTarget - d.Paid
	}
	return min(e, mulDiv(d.Fees, p.FeeCapPPM(), ppm))
}

// FeeCapPPM is the share of an epoch's fees its emission may reach:
// params.reward_fee_cap_ppm, lowered if need be so that it and the
// validators' fee share stay below the whole fee (what someone renting
// itself gets back, as a provider and as a validator, is then always
// less than the fee it paid).
func (p Params) FeeCapPPM() uint64 {
	if p.ValidatorFeeSharePPM >= ppm {
		return 0
	}
	return min(p.RewardFeeCapPPM, ppm-1-p.ValidatorFeeSharePPM)
}

// endRewardsEpoch closes the rewards of epoch ep: it mints the emission,
// pays the validators' share by power, and records the providers' rate.
func endRewardsEpoch(o *Overlay, p Params, info BlockInfo, ep Epoch) ([]Event, error) {
	d := getEpochDemand(o)
	if o.Get(keyRewardEpoch) != nil {
		o.Delete(keyRewardEpoch)
	}
	emission := Emission(p, d)
	var toValidators, toProviders uint64
	var events []Event
	if emission > 0 && ManagesValidators(o) && len(activeSet(o)) > 0 {
		toValidators = mulDiv(emission, p.RewardValidatorPPM, ppm)
		if toValidators > 0 {
			// Minted into the treasury and paid out by power as the
			// validators' fee share is (what rounding leaves stays there).
			mint(o, keyTreasury, toValidators)
			all := p
			all.ValidatorFeeSharePPM = ppm
			evs, err := payFeeShare(o, all, toValidators)
			if err != nil {
				return nil, err
			}
			events = append(events, evs...)
		}
	}
	if d.Work > 0 && d.Providers > 0 {
		toProviders = emission - toValidators
	}
	if toProviders > 0 {
		mint(o, keyRewardPool, toProviders)
		o.Set(rewardRateKey(ep.Number), appendUints(nil, toProviders, d.Work, d.Providers, 0))
	}
	events = append(events, Event{Type: "rewards_epoch", Attrs: []Attr{
		{"epoch", strconv.FormatUint(ep.Number, 10)}, {"fees", strconv.FormatUint(d.Fees, 10)}, {"paid", strconv.FormatUint(d.Paid, 10)},
		{"work", strconv.FormatUint(d.Work, 10)}, {"validators", strconv.FormatUint(toValidators, 10)}, {"providers", strconv.FormatUint(toProviders, 10)},
		{"height", strconv.FormatInt(info.Height, 10)},
	}})
	return events, nil
}

// Rewards is the chain's reward state, for queries.
type Rewards struct {
	Epoch     Epoch       `json:"epoch"`
	Demand    EpochDemand `json:"demand"`   // of the open epoch so far
	Emission  uint64      `json:"emission"` // what the open epoch would mint if it closed now
	Pool      uint64      `json:"pool"`     // minted, not yet paid to providers
	Minted    uint64      `json:"minted"`   // ever
	Burned    uint64      `json:"burned"`   // ever
	Supply    uint64      `json:"supply"`
	Treasury  uint64      `json:"treasury"`
	FeeBurn   uint64      `json:"fee_burn_ppm"`
	FeeToVals uint64      `json:"validator_fee_share_ppm"`
}

// GetRewards reads the reward state.
func GetRewards(kv KV) (*Rewards, error) {
	p, err := GetParams(kv)
	if err != nil {
		return nil, err
	}
	d := getEpochDemand(kv)
	return &Rewards{Epoch: GetEpoch(kv), Demand: d, Emission: Emission(p, d), Pool: RewardPool(kv), Minted: Minted(kv),
		Burned: Burned(kv), Supply: Supply(kv), Treasury: Treasury(kv), FeeBurn: p.FeeBurnPPM, FeeToVals: p.ValidatorFeeSharePPM}, nil
}

// burnFees burns params.fee_burn_ppm of the block's fees from the
// treasury: the third part of the fee split (the validators' share is
// paid by endValidators, the rest stays in the treasury). It runs before
// endValidators, which clears the block's fees.
func burnFees(o *Overlay, p Params) []Event {
	amt := min(mulDiv(getUint(o, keyBlockFees), p.FeeBurnPPM, ppm), Treasury(o))
	if amt == 0 {
		return nil
	}
	setUint(o, keyTreasury, Treasury(o)-amt)
	burn(o, amt, "fees")
	return []Event{{Type: "fees_burned", Attrs: []Attr{{"amount", strconv.FormatUint(amt, 10)}}}}
}

// rewardsAddUp: the reward pool is what the closed epochs' rates still
// owe, and the open epoch's work and providers are the sum of the work
// records of that epoch.
func rewardsAddUp(s *invariantState) error {
	var owed uint64
	s.kv.Iterate(prefixRewardRate, prefixEnd(prefixRewardRate), func(_, v []byte) bool {
		var r epochRate
		readUints(v, &r.pool, &r.work, &r.remaining, &r.paid)
		owed += r.pool - r.paid
		return true
	})
	if pool := RewardPool(s.kv); pool != owed {
		return fmt.Errorf("invariant: reward pool %d != %d the closed epochs owe: %w", pool, owed, ErrInternal)
	}
	ep := GetEpoch(s.kv).Number
	var work, providers uint64
	s.kv.Iterate(prefixRewardWork, prefixEnd(prefixRewardWork), func(_, v []byte) bool {
		var w RewardWork
		readUints(v, &w.Epoch, &w.Work, &w.Rewarded)
		if w.Epoch == ep && w.Work > 0 {
			work += w.Work
			providers++
		}
		return true
	})
	if d := getEpochDemand(s.kv); d.Work != work || d.Providers != providers {
		return fmt.Errorf("invariant: open epoch counts work %d of %d providers, the records %d of %d: %w", d.Work, d.Providers, work, providers, ErrInternal)
	}
	return nil
}
