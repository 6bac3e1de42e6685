package ledger

import (
	"fmt"
	"math/big"
	"slices"
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
)

// Delegation: a token holder bonds stake to a validator (by its operator)
// or to a provider, after the Cosmos SDK's x/staking and x/distribution.
// One mechanism serves both kinds of target: a target's delegation pool
// holds the delegated tokens and the delegators' shares of them, so a
// slash takes its share of the pool's tokens in one write (every share
// is then worth less) instead of one write per delegation. A validator's
// power is its bond plus its pool's tokens (Validator.Delegated); a
// provider's pool backs the stake it needs to be schedulable
// (Provider.Delegated).
//
// Undelegated tokens wait out the target's unbonding period in unbonding
// entries, slashable until then; a redelegation moves tokens from one
// target to another at once, and its entry keeps them slashable for what
// the source did. Both kinds of entries complete through queues ordered by
// completion height, so a block's work is the entries that complete in
// it. The messages are in msg_delegation.go, slashing in
// delegation_slash.go, rewards in delegation_rewards.go.

// TargetKind says what a delegation backs.
type TargetKind byte

// The target kinds.
const (
	TargetValidator TargetKind = 1 // a validator, named by its operator
	TargetProvider  TargetKind = 2 // a provider
)

func (k TargetKind) String() string {
	switch k {
	case TargetValidator:
		return "validator"
	case TargetProvider:
		return "provider"
	}
	return fmt.Sprintf("kind %d", byte(k))
}

// MarshalText implements encoding.TextMarshaler.
func (k TargetKind) MarshalText() ([]byte, error) {
	if k != TargetValidator && k != TargetProvider {
		return nil, fmt.Errorf("target kind %d is neither validator nor provider", byte(k))
	}
	return []byte(k.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (k *TargetKind) UnmarshalText(b []byte) error {
	switch string(b) {
	case "validator":
		*k = TargetValidator
	case "provider":
		*k = TargetProvider
	default:
		return fmt.Errorf("target kind %q: want validator or provider: %w", b, ErrInvalidMsg)
	}
	return nil
}

// Target is what a delegation backs: a validator's operator or a
// provider.
type Target struct {
	Kind    TargetKind      `json:"kind"`
	Address address.Address `json:"address"`
}

func (t Target) String() string { return t.Kind.String() + " " + t.Address.String() }

const targetLen = 1 + address.Len

func (t Target) bytes() []byte { return append([]byte{byte(t.Kind)}, t.Address[:]...) }

func targetFrom(b []byte) Target {
	var t Target
	t.Kind = TargetKind(b[0])
	copy(t.Address[:], b[1:targetLen])
	return t
}

// DelegationPool is a target's delegated stake, stored at
// dpool/<target>.
type DelegationPool struct {
	// Tokens is the bonded stake delegators hold in the pool, after
	// slashes; Shares the delegators' shares of it. A delegation of s
	// shares is worth s × Tokens / Shares.
	Tokens uint64 `json:"tokens"`
	Shares uint64 `json:"shares"`
	// CommissionPPM is what the target takes of its delegators' rewards;
	// CommissionSetAt the block time (Unix seconds) it last set it (0:
	// never, so the first setting is bounded by params.commission_max_ppm
	// alone).
	CommissionPPM   uint64 `json:"commission_ppm"`
	CommissionSetAt int64  `json:"commission_set_at"`
	// RewardPerShare is the rewards one share earned since the pool
	// began, × rewardScale (a big-endian integer, minimal: a share's
	// rewards never shrink, slashes take tokens, not shares). Rewards
	// is what the pool holds for its delegators, paid as they settle.
	RewardPerShare []byte `json:"reward_per_share"`
	Rewards        uint64 `json:"rewards"`
	// Slashed is what its delegators lost to slashes in all.
	Slashed uint64 `json:"slashed"`
}

// Delegation is a delegator's shares of a target's pool, stored at
// dlg/<delegator><target>, and the pool's reward per share when its
// rewards were last settled.
type Delegation struct {
	Shares      uint64 `json:"shares"`
	RewardStart []byte `json:"reward_start"`
}

// UnbondingDelegationEntry is undelegated stake waiting out the target's
// unbonding period: Balance returns to the delegator at the start of
// block CompletionHeight. Initial is what it started with: a slash takes
// its rate of Initial (from what is left).
type UnbondingDelegationEntry struct {
	CreationHeight   uint64 `json:"creation_height"`
	CompletionHeight uint64 `json:"completion_height"`
	Initial          uint64 `json:"initial"`
	Balance          uint64 `json:"balance"`
}

// UnbondingDelegation is a delegator's unbonding entries with one target,
// stored at dub/<delegator><target>.
type UnbondingDelegation struct {
	Entries []UnbondingDelegationEntry `json:"entries"`
}

// RedelegationEntry is stake moved from one target to another: until
// CompletionHeight (the source's unbonding period) a slash of the source
// for what it did before CreationHeight takes its rate of Initial from the
// destination, out of the Shares it bought there.
type RedelegationEntry struct {
	CreationHeight   uint64 `json:"creation_height"`
	CompletionHeight uint64 `json:"completion_height"`
	Initial          uint64 `json:"initial"`
	Shares           uint64 `json:"shares"`
}

// Redelegation is a delegator's redelegation entries from one target to
// another, stored at drd/<delegator><source><destination>.
type Redelegation struct {
	Entries []RedelegationEntry `json:"entries"`
}

// Keys.

func delPoolKey(t Target) []byte { return append(slices.Clone(prefixDelPool), t.bytes()...) }

func delegationKey(d address.Address, t Target) []byte {
	return append(append(slices.Clone(prefixDelegation), d[:]...), t.bytes()...)
}

func delByTargetKey(t Target, d address.Address) []byte {
	return append(append(slices.Clone(prefixDelByTarget), t.bytes()...), d[:]...)
}

func delUnbondKey(d address.Address, t Target) []byte {
	return append(append(slices.Clone(prefixDelUnbond), d[:]...), t.bytes()...)
}

func delUnbondTKey(t Target, d address.Address) []byte {
	return append(append(slices.Clone(prefixDelUnbondT), t.bytes()...), d[:]...)
}

func delUnbondQKey(done uint64, d address.Address, t Target) []byte {
	return append(append(u64(slices.Clone(prefixDelUnbondQ), done), d[:]...), t.bytes()...)
}

func redelKey(d address.Address, src, dst Target) []byte {
	return append(append(append(slices.Clone(prefixRedelegation), d[:]...), src.bytes()...), dst.bytes()...)
}

func redelSourceKey(src Target, d address.Address, dst Target) []byte {
	return append(append(append(slices.Clone(prefixRedelBySource), src.bytes()...), d[:]...), dst.bytes()...)
}

func redelQueueKey(done uint64, d address.Address, src, dst Target) []byte {
	return append(append(append(u64(slices.Clone(prefixRedelQueue), done), d[:]...), src.bytes()...), dst.bytes()...)
}

// Records.

func getRecord(kv KV, key []byte, r record, what string) (bool, error) {
	b := kv.Get(key)
	if b == nil {
		return false, nil
	}
	if err := decodeRecord(b, r); err != nil {
		return false, fmt.Errorf("%s %x: corrupt record: %w: %w", what, key, err, ErrInternal)
	}
	return true, nil
}

// GetDelegationPool reads t's pool (zero when it has none).
func GetDelegationPool(kv KV, t Target) (*DelegationPool, error) {
	p := &DelegationPool{}
	_, err := getRecord(kv, delPoolKey(t), p, "delegation pool")
	return p, err
}

// setPool writes t's pool and moves the totals of delegated tokens and of
// the rewards held by the difference from the stored pool. It does not
// touch the target's own record (its Delegated): see syncTarget.
func setPool(o *Overlay, t Target, p *DelegationPool) error {
	old, err := GetDelegationPool(o, t)
	if err != nil {
		return err
	}
	setUint(o, keyDelBonded, getUint(o, keyDelBonded)-old.Tokens+p.Tokens)
	setUint(o, keyDelRewards, getUint(o, keyDelRewards)-old.Rewards+p.Rewards)
	o.Set(delPoolKey(t), encodeRecord(p))
	return nil
}

// syncTarget sets the target's record's Delegated to its pool's tokens,
// which moves a validator's power or a provider's backing.
func syncTarget(o *Overlay, t Target, tokens uint64) error {
	switch t.Kind {
	case TargetValidator:
		v, err := mustValidatorOf(o, t.Address)
		if err != nil {
			return err
		}
		if v.Delegated != tokens {
			old := *v
			v.Delegated = tokens
			setValidator(o, &old, v)
		}
	case TargetProvider:
		p, err := mustProvider(o, t.Address)
		if err != nil {
			return err
		}
		if p.Delegated != tokens {
			p.Delegated = tokens
			setProvider(o, p)
		}
	}
	return nil
}

// GetDelegation reads delegator d's delegation to t.
func GetDelegation(kv KV, d address.Address, t Target) (*Delegation, bool, error) {
	x := &Delegation{}
	ok, err := getRecord(kv, delegationKey(d, t), x, "delegation")
	return x, ok, err
}

func setDelegation(o *Overlay, d address.Address, t Target, x *Delegation) {
	if x.Shares == 0 {
		o.Delete(delegationKey(d, t))
		o.Delete(delByTargetKey(t, d))
		return
	}
	o.Set(delegationKey(d, t), encodeRecord(x))
	o.Set(delByTargetKey(t, d), []byte{1})
}

func getUnbondingDelegation(kv KV, d address.Address, t Target) (*UnbondingDelegation, error) {
	u := &UnbondingDelegation{}
	_, err := getRecord(kv, delUnbondKey(d, t), u, "unbonding delegation")
	return u, err
}

func setUnbondingDelegation(o *Overlay, d address.Address, t Target, u *UnbondingDelegation) {
	if len(u.Entries) == 0 {
		o.Delete(delUnbondKey(d, t))
		o.Delete(delUnbondTKey(t, d))
		return
	}
	o.Set(delUnbondKey(d, t), encodeRecord(u))
	o.Set(delUnbondTKey(t, d), []byte{1})
}

func getRedelegation(kv KV, d address.Address, src, dst Target) (*Redelegation, error) {
	r := &Redelegation{}
	_, err := getRecord(kv, redelKey(d, src, dst), r, "redelegation")
	return r, err
}

func setRedelegation(o *Overlay, d address.Address, src, dst Target, r *Redelegation) {
	if len(r.Entries) == 0 {
		o.Delete(redelKey(d, src, dst))
		o.Delete(redelSourceKey(src, d, dst))
		return
	}
	o.Set(redelKey(d, src, dst), encodeRecord(r))
	o.Set(redelSourceKey(src, d, dst), []byte{1})
}

// DelegatedTotal is the stake bonded to all pools.
func DelegatedTotal(kv KV) uint64 { return getUint(kv, keyDelBonded) }

// DelegationUnbonding is the delegated stake unbonding.
func DelegationUnbonding(kv KV) uint64 { return getUint(kv, keyDelUnbonding) }

// DelegationRewards is what the pools hold for their delegators.
func DelegationRewards(kv KV) uint64 { return getUint(kv, keyDelRewards) }

// Shares and tokens.

// sharesFor returns the shares amt tokens buy in p.
func (p *DelegationPool) sharesFor(amt uint64) (uint64, error) {
	switch {
	case p.Shares == 0:
		return amt, nil
	case p.Tokens == 0:
		return 0, fmt.Errorf("the pool's tokens were all slashed away, its shares are worth nothing: %w", ErrInvalidMsg)
	}
	s := mulDiv(amt, p.Shares, p.Tokens)
	if s == 0 || p.Shares+s < p.Shares {
		return 0, fmt.Errorf("%dusync buys %d shares of a pool of %d shares for %dusync: %w", amt, s, p.Shares, p.Tokens, ErrInvalidAmount)
	}
	return s, nil
}

// tokensFor returns what s of p's shares are worth; all of them are worth
// all of its tokens (no rounding left behind).
func (p *DelegationPool) tokensFor(s uint64) uint64 {
	if s >= p.Shares {
		return p.Tokens
	}
	return mulDiv(s, p.Tokens, p.Shares)
}

// sharesForCeil returns the shares worth at least amt tokens (at most all).
func (p *DelegationPool) sharesForCeil(amt uint64) uint64 {
	if p.Tokens == 0 || amt >= p.Tokens {
		return p.Shares
	}
	s := mulDiv(amt, p.Shares, p.Tokens)
	if mulDiv(s, p.Tokens, p.Shares) < amt {
		s++
	}
	return min(s, p.Shares)
}

// rewardScale is the fixed point of a pool's reward per share.
var rewardScale = new(big.Int).Exp(big.NewInt(10), big.NewInt(18), nil)

func bigOf(b []byte) *big.Int { return new(big.Int).SetBytes(b) }

// pendingReward is what x's shares earned in p since they were settled.
func (p *DelegationPool) pendingReward(x *Delegation) uint64 {
	d := new(big.Int).Sub(bigOf(p.RewardPerShare), bigOf(x.RewardStart))
	if d.Sign() <= 0 {
		return 0
	}
	d.Mul(d, new(big.Int).SetUint64(x.Shares))
	d.Quo(d, rewardScale)
	if !d.IsUint64() {
		return p.Rewards
	}
	return min(d.Uint64(), p.Rewards)
}

// checkTarget checks that t can take delegations: a validator that is not
// tombstoned, or a registered provider.
func checkTarget(kv KV, t Target) error {
	switch t.Kind {
	case TargetValidator:
		v, err := mustValidatorOf(kv, t.Address)
		if err != nil {
			return err
		}
		if v.Tombstoned {
			return invalid("validator %s of %s was tombstoned for double signing: it takes no delegations", v.ConsAddress(), t.Address)
		}
	case TargetProvider:
		if _, err := mustProvider(kv, t.Address); err != nil {
			return err
		}
	default:
		return invalid("target kind %d is neither validator (1) nor provider (2)", byte(t.Kind))
	}
	return nil
}

// unbondingBlocks is how long stake undelegated from t stays slashable:
// the validators' period for a validator (longer than the evidence age),
// the providers' for a provider.
func unbondingBlocks(t Target, p Params) uint64 {
	if t.Kind == TargetValidator {
		return p.ValidatorUnbondingBlocks
	}
	return p.UnbondingBlocks
}

// matureDelegations completes, at the start of block height, the unbonding
// entries (paid back to their delegators) and redelegation entries (no
// longer slashable for their source) that complete at or before it. Its
// work is the queue entries that complete: the queues are ordered by
// completion height.
func matureDelegations(o *Overlay, height uint64) ([]Event, error) {
	end := u64(slices.Clone(prefixDelUnbondQ), height+1)
	var keys [][]byte
	o.Iterate(prefixDelUnbondQ, end, func(k, _ []byte) bool {
		keys = append(keys, slices.Clone(k))
		return true
	})
	var evs []Event
	for _, k := range keys {
		o.Delete(k)
		rest := k[len(prefixDelUnbondQ)+8:]
		var d address.Address
		copy(d[:], rest)
		t := targetFrom(rest[address.Len:])
		u, err := getUnbondingDelegation(o, d, t)
		if err != nil {
			return nil, err
		}
		var paid uint64
		kept := u.Entries[:0]
		for _, e := range u.Entries {
			if e.CompletionHeight > height {
				kept = append(kept, e)
				continue
			}
			paid += e.Balance
		}
		u.Entries = kept
		setUnbondingDelegation(o, d, t, u)
		if paid > 0 {
			acct, err := GetAccount(o, d)
			if err != nil {
				return nil, err
			}
			acct.Balance += paid
			setAccount(o, &acct)
			setUint(o, keyDelUnbonding, DelegationUnbonding(o)-paid)
		}
		evs = append(evs, Event{Type: "undelegated", Attrs: []Attr{{"delegator", d.String()}, {"kind", t.Kind.String()}, {"target", t.Address.String()}, {"amount", fmtU(paid)}}})
	}
	end = u64(slices.Clone(prefixRedelQueue), height+1)
	keys = keys[:0]
	o.Iterate(prefixRedelQueue, end, func(k, _ []byte) bool {
		keys = append(keys, slices.Clone(k))
		return true
	})
	for _, k := range keys {
		o.Delete(k)
		rest := k[len(prefixRedelQueue)+8:]
		var d address.Address
		copy(d[:], rest)
		src, dst := targetFrom(rest[address.Len:]), targetFrom(rest[address.Len+targetLen:])
		r, err := getRedelegation(o, d, src, dst)
		if err != nil {
			return nil, err
		}
		r.Entries = slices.DeleteFunc(r.Entries, func(e RedelegationEntry) bool { return e.CompletionHeight <= height })
		setRedelegation(o, d, src, dst, r)
	}
	return evs, nil
}

// Queries.

// DelegationInfo is one delegation as queries show it.
type DelegationInfo struct {
	Delegator address.Address `json:"delegator"`
	Target    Target          `json:"target"`
	Shares    uint64          `json:"shares"`
	// Amount is what the shares are worth now.
	Amount uint64 `json:"amount"`
	// PendingRewards is what claim_rewards would pay for it now.
	PendingRewards uint64 `json:"pending_rewards"`
}

// UnbondingDelegationInfo is a delegator's unbonding entries with a
// target.
type UnbondingDelegationInfo struct {
	Delegator address.Address            `json:"delegator"`
	Target    Target                     `json:"target"`
	Entries   []UnbondingDelegationEntry `json:"entries"`
}

// RedelegationInfo is a delegator's redelegation entries from a source
// to a destination.
type RedelegationInfo struct {
	Delegator   address.Address     `json:"delegator"`
	Source      Target              `json:"source"`
	Destination Target              `json:"destination"`
	Entries     []RedelegationEntry `json:"entries"`
}

// DelegatorState is everything an account has delegated.
type DelegatorState struct {
	Delegations   []DelegationInfo          `json:"delegations"`
	Unbonding     []UnbondingDelegationInfo `json:"unbonding"`
	Redelegations []RedelegationInfo        `json:"redelegations"`
}

func delegationInfo(kv KV, d address.Address, t Target, x *Delegation) (DelegationInfo, error) {
	p, err := GetDelegationPool(kv, t)
	if err != nil {
		return DelegationInfo{}, err
	}
	return DelegationInfo{Delegator: d, Target: t, Shares: x.Shares, Amount: p.tokensFor(x.Shares), PendingRewards: p.pendingReward(x)}, nil
}

// DelegatorTotals is what a delegator holds over all its delegations.
type DelegatorTotals struct {
	Delegated      uint64 `json:"delegated"`
	UnbondingTotal uint64 `json:"unbonding_total"`
	PendingRewards uint64 `json:"pending_rewards"`
}

// delegatorLists are a delegator's three lists in the order a page walks
// them: delegations, unbonding entries, redelegations.
func delegatorLists(d address.Address) [3][]byte {
	return [3][]byte{
		append(slices.Clone(prefixDelegation), d[:]...),
		append(slices.Clone(prefixDelUnbond), d[:]...),
		append(slices.Clone(prefixRedelegation), d[:]...),
	}
}

// DelegationsOf returns a page of what delegator d has delegated, is
// unbonding and has redelegated: at most limit items (a delegation, a
// target's unbonding entries, a source and destination's redelegation
// entries) of the three lists walked in that order, each in target order,
// from after the position after (nil: from the start). next is the
// position to pass back for the next page, nil on the last. It reads the
// items of the page and one more, whatever d holds; a position that is
// not one of d's (another delegator's, or garbage) is ErrInvalidMsg.
func DelegationsOf(kv KV, d address.Address, after []byte, limit int) (out *DelegatorState, next []byte, err error) {
	if limit < 1 {
		return nil, nil, invalid("page limit %d: want at least 1", limit)
	}
	lists := delegatorLists(d)
	first := 0
	if after != nil {
		first = -1
		for i, pre := range lists {
			if len(after) > len(pre) && string(after[:len(pre)]) == string(pre) {
				first = i
			}
		}
		if first < 0 {
			return nil, nil, invalid("page position %x is not one of %s's delegations", after, d)
		}
	}
	out = &DelegatorState{}
	n := 0
	var last []byte
	for i := first; i < len(lists) && next == nil && err == nil; i++ {
		pre := lists[i]
		start := pre
		if i == first && after != nil {
			start = append(slices.Clone(after), 0) // the next key after it
		}
		kv.Iterate(start, prefixEnd(pre), func(k, b []byte) bool {
			if n == limit {
				next = last
				return false
			}
			rest := k[len(pre):]
			switch i {
			case 0:
				x := &Delegation{}
				if err = decodeRecord(b, x); err != nil {
					return false
				}
				var di DelegationInfo
				di, err = delegationInfo(kv, d, targetFrom(rest), x)
				out.Delegations = append(out.Delegations, di)
			case 1:
				u := &UnbondingDelegation{}
				if err = decodeRecord(b, u); err != nil {
					return false
				}
				out.Unbonding = append(out.Unbonding, UnbondingDelegationInfo{Delegator: d, Target: targetFrom(rest), Entries: u.Entries})
			case 2:
				r := &Redelegation{}
				if err = decodeRecord(b, r); err != nil {
					return false
				}
				out.Redelegations = append(out.Redelegations, RedelegationInfo{Delegator: d, Source: targetFrom(rest), Destination: targetFrom(rest[targetLen:]), Entries: r.Entries})
			}
			n++
			last = slices.Clone(k)
			return err == nil
		})
	}
	if err != nil {
		return nil, nil, fmt.Errorf("delegations of %s: %w: %w", d, err, ErrInternal)
	}
	return out, next, nil
}

// DelegationTotalsOf sums what d has delegated, is unbonding and has
// pending over all its delegations and unbonding entries. It walks them
// one at a time, holding none: d has one of each per target at most.
func DelegationTotalsOf(kv KV, d address.Address) (DelegatorTotals, error) {
	var t DelegatorTotals
	var err error
	lists := delegatorLists(d)
	kv.Iterate(lists[0], prefixEnd(lists[0]), func(k, b []byte) bool {
		x := &Delegation{}
		if err = decodeRecord(b, x); err != nil {
			return false
		}
		var p *DelegationPool
		if p, err = GetDelegationPool(kv, targetFrom(k[len(lists[0]):])); err != nil {
			return false
		}
		t.Delegated += p.tokensFor(x.Shares)
		t.PendingRewards += p.pendingReward(x)
		return true
	})
	if err != nil {
		return t, err
	}
	kv.Iterate(lists[1], prefixEnd(lists[1]), func(_, b []byte) bool {
		u := &UnbondingDelegation{}
		if err = decodeRecord(b, u); err != nil {
			return false
		}
		for _, e := range u.Entries {
			t.UnbondingTotal += e.Balance
		}
		return true
	})
	return t, err
}

// TargetDelegations is a target's pool and a page of its delegations, for
// queries.
type TargetDelegations struct {
	Target      Target           `json:"target"`
	Pool        DelegationPool   `json:"pool"`
	Delegations []DelegationInfo `json:"delegations"`
}

// DelegationsTo returns t's pool and at most limit of its delegations, in
// delegator order, by the delegators after after (nil: from the first);
// next is the delegator to pass back as after for the next page, nil on
// the last. It reads the page and one more index key, however many
// delegate to t.
func DelegationsTo(kv KV, t Target, after *address.Address, limit int) (out *TargetDelegations, next *address.Address, err error) {
	if limit < 1 {
		return nil, nil, invalid("page limit %d: want at least 1", limit)
	}
	p, err := GetDelegationPool(kv, t)
	if err != nil {
		return nil, nil, err
	}
	out = &TargetDelegations{Target: t, Pool: *p}
	pre := append(slices.Clone(prefixDelByTarget), t.bytes()...)
	start := pre
	if after != nil {
		start = append(delByTargetKey(t, *after), 0)
	}
	var ds []address.Address
	more := false
	kv.Iterate(start, prefixEnd(pre), func(k, _ []byte) bool {
		if len(ds) == limit {
			more = true
			return false
		}
		var d address.Address
		copy(d[:], k[len(pre):])
		ds = append(ds, d)
		return true
	})
	for _, d := range ds {
		x, ok, err := GetDelegation(kv, d, t)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			return nil, nil, fmt.Errorf("delegation of %s to %s is indexed but has no record: %w", d, t, ErrInternal)
		}
		out.Delegations = append(out.Delegations, DelegationInfo{Delegator: d, Target: t, Shares: x.Shares, Amount: p.tokensFor(x.Shares), PendingRewards: p.pendingReward(x)})
	}
	if more {
		next = &ds[len(ds)-1]
	}
	return out, next, nil
}

func fmtU(v uint64) string { return strconv.FormatUint(v, 10) }
