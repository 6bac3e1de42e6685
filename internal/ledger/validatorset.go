package ledger

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// The validator set, block by block: at the start of a block, unbonded
// validator stake returns to its operators, CometBFT's evidence slashes and
// tombstones double signers, and the last commit's votes count missed
// blocks and jail validators that miss too many (after the Cosmos SDK's
// x/evidence and x/slashing); at the end, a share of the block's fees goes
// to the set and the set is recomputed from the bonds, and the changes go
// back to CometBFT (which applies changes returned at height H from
// height H+2).

// VoteInfo is one validator's part in the last commit, as CometBFT's
// DecidedLastCommit reports it.
type VoteInfo struct {
	Address ConsAddress
	// Signed is true for a precommit for the block or for nil: the
	// validator was there. False: absent.
	Signed bool
}

// Misbehavior kinds.
const (
	MisbehaviorDuplicateVote     = "duplicate_vote"
	MisbehaviorLightClientAttack = "light_client_attack"
)

// Misbehavior is evidence CometBFT committed against a validator.
type Misbehavior struct {
	Kind    string // MisbehaviorDuplicateVote or MisbehaviorLightClientAttack
	Address ConsAddress
	Height  int64 // of the offence
	Time    time.Time
}

// beginValidators runs at the start of every block of a chain that
// manages its validators.
func beginValidators(o *Overlay, p Params, info BlockInfo) ([]Event, error) {
	if !ManagesValidators(o) {
		return nil, nil
	}
	evs, err := releaseValidatorUnbonded(o, uint64(info.Height))
	if err != nil {
		return nil, err
	}
	for _, m := range info.Misbehavior {
		ev, err := handleMisbehavior(o, p, info, m)
		if err != nil {
			return nil, err
		}
		evs = append(evs, ev...)
	}
	if len(info.Votes) > 0 {
		inSet := map[ConsAddress]bool{}
		for _, vp := range activeSet(o) {
			inSet[vp.Address] = true
		}
		for _, vote := range info.Votes {
			if !inSet[vote.Address] {
				continue // left the set: CometBFT still lists it for two blocks
			}
			ev, err := countVote(o, p, info, vote)
			if err != nil {
				return nil, err
			}
			evs = append(evs, ev...)
		}
	}
	return evs, nil
}

// countVote records whether a validator of the set signed the last block,
// in the slot of this height in its window, and jails it when it missed
// more than params.downtime_max_missed of the window.
func countVote(o *Overlay, p Params, info BlockInfo, vote VoteInfo) ([]Event, error) {
	v, ok, err := GetValidator(o, vote.Address)
	if err != nil || !ok || !v.eligible() {
		return nil, err
	}
	k := valMissedKey(vote.Address, uint64(info.Height)%p.DowntimeWindow)
	was := o.Get(k) != nil
	switch {
	case was == !vote.Signed:
		return nil, nil // the slot already says so: nothing to write
	case vote.Signed:
		o.Delete(k)
		v.Missed--
	default:
		o.Set(k, []byte{1})
		v.Missed++
	}
	old := *v
	if v.Missed <= p.DowntimeMaxMissed {
		setValidator(o, &old, v)
		return nil, nil
	}
	// Delegations: the pool, and entries made since the block whose
	// votes showed the downtime (height − 2, as the Cosmos SDK counts).
	amt, err := slashValidator(o, v, p.DowntimeSlashPPM, 0, max(uint64(info.Height), 3)-2)
	if err != nil {
		return nil, err
	}
	v.Jailed = true
	v.JailedUntil = uint64(info.Height) + p.JailBlocks
	missed := v.Missed
	clearMissed(o, v)
	setValidator(o, &old, v)
	return []Event{{Type: "validator_jailed", Attrs: []Attr{
		{"validator", vote.Address.String()}, {"operator", v.Operator.String()}, {"reason", "downtime"},
		{"missed", strconv.FormatUint(missed, 10)}, {"window", strconv.FormatUint(p.DowntimeWindow, 10)},
		{"slashed", strconv.FormatUint(amt, 10)}, {"jailed_until", strconv.FormatUint(v.JailedUntil, 10)},
	}}}, nil
}

// clearMissed forgets v's missed blocks: a validator that leaves the set
// starts a clean window when it returns.
func clearMissed(o *Overlay, v *Validator) {
	p := append(slices.Clone(prefixValMissed), func() []byte { c := v.ConsAddress(); return c[:] }()...)
	var keys [][]byte
	o.Iterate(p, prefixEnd(p), func(k, _ []byte) bool {
		keys = append(keys, slices.Clone(k))
		return true
	})
	for _, k := range keys {
		o.Delete(k)
	}
	v.Missed = 0
}

// handleMisbehavior slashes and tombstones a double signer. Evidence more
// than params.evidence_max_age_blocks old, against an unknown key or an
// already tombstoned validator is ignored (an event says so).
func handleMisbehavior(o *Overlay, p Params, info BlockInfo, m Misbehavior) ([]Event, error) {
	ignored := func(why string) []Event {
		return []Event{{Type: "evidence_ignored", Attrs: []Attr{
			{"validator", m.Address.String()}, {"kind", m.Kind}, {"height", strconv.FormatInt(m.Height, 10)}, {"reason", why},
		}}}
	}
	if m.Height <= 0 || m.Height > info.Height || uint64(info.Height-m.Height) > p.EvidenceMaxAgeBlocks {
		return ignored(fmt.Sprintf("older than params.evidence_max_age_blocks %d", p.EvidenceMaxAgeBlocks)), nil
	}
	v, ok, err := GetValidator(o, m.Address)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return ignored("no such validator"), nil
	case v.Tombstoned:
		return ignored("already tombstoned"), nil
	}
	old := *v
	amt, err := slashValidator(o, v, p.DoubleSignSlashPPM, uint64(m.Height), uint64(m.Height))
	if err != nil {
		return nil, err
	}
	v.Tombstoned, v.Jailed = true, true
	clearMissed(o, v)
	setValidator(o, &old, v)
	return []Event{{Type: "validator_tombstoned", Attrs: []Attr{
		{"validator", m.Address.String()}, {"operator", v.Operator.String()}, {"kind", m.Kind},
		{"height", strconv.FormatInt(m.Height, 10)}, {"slashed", strconv.FormatUint(amt, 10)},
	}}}, nil
}

// slashValidator takes ppm of v's bond and, when since > 0, of its
// unbonding entries that started at or after height since (the stake that
// was bonded at the offence: "follow the stake"), and pays it to the
// treasury; and slashes its delegators for an infraction at height
// delSince (delegation_slash.go). It updates v (the caller writes it) and
// returns the amount taken from the operator's stake.
func slashValidator(o *Overlay, v *Validator, rate uint64, since, delSince uint64) (uint64, error) {
	fromBond := mulDiv(v.Bond, rate, ppm)
	v.Bond -= fromBond
	setUint(o, keyValBonded, ValidatorBonded(o)-fromBond)
	total := fromBond
	if since > 0 {
		c := v.ConsAddress()
		for _, u := range validatorUnbondings(o) {
			if u.Address != c || u.StartHeight < since {
				continue
			}
			take := mulDiv(u.Amount, rate, ppm)
			u.Amount -= take
			setValUnbond(o, u)
			setUint(o, keyValUnbonding, ValidatorUnbonding(o)-take)
			total += take
		}
	}
	v.Slashed += total
	tokens, fromDelegations, err := slashPool(o, Target{TargetValidator, v.Operator}, rate, delSince)
	if err != nil {
		return 0, err
	}
	v.Delegated = tokens
	setUint(o, keyTreasury, Treasury(o)+total+fromDelegations)
	return total, nil
}

// releaseValidatorUnbonded returns to their operators' balances the
// unbonding entries that complete at or before height.
func releaseValidatorUnbonded(o *Overlay, height uint64) ([]Event, error) {
	end := u64(slices.Clone(prefixValUnbond), height+1)
	var done []ValidatorUnbondingEntry
	o.Iterate(prefixValUnbond, end, func(k, v []byte) bool {
		u := ValidatorUnbondingEntry{CompletionHeight: binary.BigEndian.Uint64(k[len(prefixValUnbond):])}
		copy(u.Address[:], k[len(prefixValUnbond)+8:])
		u.Amount, u.StartHeight = binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])
		done = append(done, u)
		return true
	})
	var evs []Event
	for _, u := range done {
		v, ok, err := GetValidator(o, u.Address)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("unbonding entry of validator %s, which has no record: %w", u.Address, ErrInternal)
		}
		acct, err := GetAccount(o, v.Operator)
		if err != nil {
			return nil, err
		}
		amt := u.Amount
		acct.Balance += amt
		setAccount(o, &acct)
		setUint(o, keyValUnbonding, ValidatorUnbonding(o)-amt)
		u.Amount = 0
		setValUnbond(o, u)
		evs = append(evs, Event{Type: "validator_unbonded", Attrs: []Attr{{"validator", u.Address.String()}, {"operator", v.Operator.String()}, {"amount", strconv.FormatUint(amt, 10)}}})
	}
	return evs, nil
}

// collectFee adds a tx fee or a protocol fee to the treasury and to the
// block's fees, of which the validators get their share at the block's
// end.
func collectFee(o *Overlay, fee uint64) {
	if fee == 0 {
		return
	}
	// Every tx pays a fee: the two keys are staged as strings made once.
	o.stage(keyTreasuryString, binary.BigEndian.AppendUint64(nil, Treasury(o)+fee))
	o.stage(keyBlockFeesString, binary.BigEndian.AppendUint64(nil, getUint(o, keyBlockFees)+fee))
}

// endValidators runs at the end of every block: it pays the fee share and
// returns the changes to the validator set.
func endValidators(o *Overlay, p Params, info BlockInfo) ([]ValidatorUpdate, []Event, error) {
	fees := getUint(o, keyBlockFees)
	if o.Get(keyBlockFees) != nil {
		o.Delete(keyBlockFees)
	}
	if !ManagesValidators(o) {
		return nil, nil, nil
	}
	evs, err := payFeeShare(o, p, fees)
	if err != nil {
		return nil, nil, err
	}
	ups, err := updateValidatorSet(o, p)
	if err != nil {
		return nil, nil, err
	}
	if len(ups) > 0 {
		evs = append(evs, Event{Type: "validator_set", Attrs: []Attr{{"changes", strconv.Itoa(len(ups))}, {"height", strconv.FormatInt(info.Height, 10)}}})
	}
	return ups, evs, nil
}

// payFeeShare pays params.validator_fee_share_ppm of the block's fees from
// the treasury to the operators of the set's validators that are not
// jailed, each in proportion to its power: share × power / total power,
// rounded down. What rounding leaves stays in the treasury.
func payFeeShare(o *Overlay, p Params, fees uint64) ([]Event, error) {
	share := min(mulDiv(fees, p.ValidatorFeeSharePPM, ppm), Treasury(o))
	if share == 0 {
		return nil, nil
	}
	type payee struct {
		v     *Validator
		power uint64
	}
	var payees []payee
	var total uint64
	for _, vp := range activeSet(o) {
		v, ok, err := GetValidator(o, vp.Address)
		if err != nil {
			return nil, err
		}
		if ok && v.eligible() {
			payees = append(payees, payee{v, vp.Power})
			total += vp.Power
		}
	}
	if total == 0 {
		return nil, nil
	}
	var paid uint64
	for _, pe := range payees {
		amt := mulDiv(share, pe.power, total)
		if amt == 0 {
			continue
		}
		own, err := distributeToTarget(o, Target{TargetValidator, pe.v.Operator}, pe.v.Bond, amt)
		if err != nil {
			return nil, err
		}
		acct, err := GetAccount(o, pe.v.Operator)
		if err != nil {
			return nil, err
		}
		acct.Balance += own
		setAccount(o, &acct)
		paid += amt
	}
	setUint(o, keyTreasury, Treasury(o)-paid)
	return []Event{{Type: "validator_fees", Attrs: []Attr{{"fees", strconv.FormatUint(fees, 10)}, {"paid", strconv.FormatUint(paid, 10)}}}}, nil
}

// desiredSet returns the set the bonds call for: the first
// params.max_validators eligible validators by stake, bond plus
// delegations (largest first, then by consensus address), whose own bond
// is at least params.min_validator_stake, with power stake /
// params.power_unit.
func desiredSet(kv KV, p Params) []ValidatorPower {
	var out []ValidatorPower
	kv.Iterate(prefixValPower, prefixEnd(prefixValPower), func(k, v []byte) bool {
		total := ^binary.BigEndian.Uint64(k[len(prefixValPower):])
		if total < p.MinValidatorStake || uint64(len(out)) >= p.MaxValidators {
			return false
		}
		if len(v) == 8 && binary.BigEndian.Uint64(v) < p.MinValidatorStake {
			return true // delegations do not make up for the operator's own bond
		}
		var vp ValidatorPower
		copy(vp.Address[:], k[len(prefixValPower)+8:])
		vp.Power = total / p.PowerUnit
		out = append(out, vp)
		return true
	})
	slices.SortFunc(out, func(a, b ValidatorPower) int { return bytes.Compare(a.Address[:], b.Address[:]) })
	return out
}

// updateValidatorSet makes the stored set the desired one and returns the
// differences, in consensus address order. The set never becomes empty
// (CometBFT would halt on it): when no validator qualifies, it stays as it
// is.
func updateValidatorSet(o *Overlay, p Params) ([]ValidatorUpdate, error) {
	want := desiredSet(o, p)
	if len(want) == 0 {
		return nil, nil
	}
	have := activeSet(o)
	var ups []ValidatorUpdate
	change := func(c ConsAddress, power uint64) error {
		v, ok, err := GetValidator(o, c)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("validator %s in the set has no record: %w", c, ErrInternal)
		}
		ups = append(ups, ValidatorUpdate{PubKey: v.PubKey, Power: power})
		if power == 0 {
			o.Delete(valSetKey(c))
			if v.Missed > 0 {
				old := *v
				clearMissed(o, v)
				setValidator(o, &old, v)
			}
		} else {
			setUint(o, valSetKey(c), power)
		}
		return nil
	}
	i, j := 0, 0
	for i < len(have) || j < len(want) {
		var cmp int
		switch {
		case i == len(have):
			cmp = 1
		case j == len(want):
			cmp = -1
		default:
			cmp = bytes.Compare(have[i].Address[:], want[j].Address[:])
		}
		var err error
		switch {
		case cmp < 0: // leaves the set
			err = change(have[i].Address, 0)
			i++
		case cmp > 0: // joins it
			err = change(want[j].Address, want[j].Power)
			j++
		default:
			if have[i].Power != want[j].Power {
				err = change(want[j].Address, want[j].Power)
			}
			i++
			j++
		}
		if err != nil {
			return nil, err
		}
	}
	return ups, nil
}
