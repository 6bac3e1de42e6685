package ledger

import (
	"fmt"
	"slices"

	"github.com/gpunet/gpunet/internal/address"
)

// The delegation messages (delegation.go): delegate to, undelegate from
// and redelegate between validators and providers, and set a target's
// commission.

// MsgDelegate bonds Amount of the sender's balance to a target: the
// validator operated by Target (Kind "validator") or the provider Target
// (Kind "provider").
type MsgDelegate struct {
	Kind   TargetKind      `json:"kind"`
	Target address.Address `json:"target"`
	Amount Amount          `json:"amount"`
}

// MsgUndelegate starts unbonding Amount of the sender's delegation to a
// target: back in its balance after the target's unbonding period.
type MsgUndelegate struct {
	Kind   TargetKind      `json:"kind"`
	Target address.Address `json:"target"`
	Amount Amount          `json:"amount"`
}

// MsgRedelegate moves Amount of the sender's delegation from one target to
// another at once.
type MsgRedelegate struct {
	FromKind TargetKind      `json:"from_kind"`
	From     address.Address `json:"from"`
	ToKind   TargetKind      `json:"to_kind"`
	To       address.Address `json:"to"`
	Amount   Amount          `json:"amount"`
}

// MsgSetCommission sets the commission the sender takes, as the operator
// of a validator (Kind "validator") or as a provider, of its delegators'
// rewards.
type MsgSetCommission struct {
	Kind TargetKind `json:"kind"`
	PPM  uint64     `json:"rate_ppm"`
}

// Type implements Msg.
func (*MsgDelegate) Type() MsgType { return MsgTypeDelegate }

// Type implements Msg.
func (*MsgUndelegate) Type() MsgType { return MsgTypeUndelegate }

// Type implements Msg.
func (*MsgRedelegate) Type() MsgType { return MsgTypeRedelegate }

// Type implements Msg.
func (*MsgSetCommission) Type() MsgType { return MsgTypeSetCommission }

func checkTargetFields(what string, k TargetKind, a address.Address) error {
	if k != TargetValidator && k != TargetProvider {
		return invalid("%skind is missing or unknown: want \"validator\" or \"provider\"", what)
	}
	if a.IsZero() {
		return fmt.Errorf("%starget is missing (the zero address): %w", what, ErrInvalidAddress)
	}
	return nil
}

// ValidateBasic implements Msg.
func (m *MsgDelegate) ValidateBasic() error {
	if err := checkTargetFields("", m.Kind, m.Target); err != nil {
		return err
	}
	return positive(m.Amount)
}

// ValidateBasic implements Msg.
func (m *MsgUndelegate) ValidateBasic() error {
	if err := checkTargetFields("", m.Kind, m.Target); err != nil {
		return err
	}
	return positive(m.Amount)
}

// ValidateBasic implements Msg.
func (m *MsgRedelegate) ValidateBasic() error {
	if err := checkTargetFields("from_", m.FromKind, m.From); err != nil {
		return err
	}
	if err := checkTargetFields("to_", m.ToKind, m.To); err != nil {
		return err
	}
	if m.FromKind == m.ToKind && m.From == m.To {
		return invalid("redelegation from %s %s to itself", m.FromKind, m.From)
	}
	return positive(m.Amount)
}

// ValidateBasic implements Msg.
func (m *MsgSetCommission) ValidateBasic() error {
	if m.Kind != TargetValidator && m.Kind != TargetProvider {
		return invalid("kind is missing or unknown: want \"validator\" or \"provider\"")
	}
	if m.PPM > ppm {
		return invalid("rate_ppm %d is above 1000000 (100%%)", m.PPM)
	}
	return nil
}

func execDelegate(o *Overlay, from address.Address, m *MsgDelegate, p Params) ([]Event, error) {
	t := Target{m.Kind, m.Target}
	if err := checkTarget(o, t); err != nil {
		return nil, err
	}
	amt := uint64(m.Amount)
	if amt < p.DelegationMin {
		return nil, fmt.Errorf("delegation of %dusync is below params.delegation_min %dusync: %w", amt, p.DelegationMin, ErrInvalidAmount)
	}
	if err := takeBalance(o, from, amt, "delegate"); err != nil {
		return nil, err
	}
	shares, err := bond(o, from, t, amt)
	if err != nil {
		return nil, err
	}
	return []Event{{Type: "delegate", Attrs: []Attr{{"delegator", from.String()}, {"kind", t.Kind.String()}, {"target", t.Address.String()},
		{"amount", fmtU(amt)}, {"shares", fmtU(shares)}}}}, nil
}

// bond adds amt tokens to t's pool as d's delegation (settling its
// rewards first) and returns the shares they bought.
func bond(o *Overlay, d address.Address, t Target, amt uint64) (uint64, error) {
	pool, err := GetDelegationPool(o, t)
	if err != nil {
		return 0, err
	}
	x, _, err := GetDelegation(o, d, t)
	if err != nil {
		return 0, err
	}
	shares, err := pool.sharesFor(amt)
	if err != nil {
		return 0, fmt.Errorf("delegation to %s: %w", t, err)
	}
	if err := settleDelegation(o, d, pool, x); err != nil {
		return 0, err
	}
	oldShares := x.Shares
	pool.Tokens += amt
	pool.Shares += shares
	x.Shares += shares
	if err := setPool(o, t, pool); err != nil {
		return 0, err
	}
	setDelegation(o, d, t, x)
	delegationSharesChanged(o, d, t, oldShares, x.Shares)
	return shares, syncTarget(o, t, pool.Tokens)
}

// unbond takes amt tokens' worth of d's delegation to t out of t's pool
// (settling its rewards first), and returns the tokens taken out: amt,
// or what the shares amt needs are worth. What stays must be none or at
// least params.delegation_min.
func unbond(o *Overlay, d address.Address, t Target, amt uint64, p Params) (uint64, error) {
	pool, err := GetDelegationPool(o, t)
	if err != nil {
		return 0, err
	}
	x, ok, err := GetDelegation(o, d, t)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("%s has no delegation to %s: %w", d, t, ErrInsufficientStake)
	}
	worth := pool.tokensFor(x.Shares)
	if amt > worth {
		return 0, fmt.Errorf("%s's delegation to %s is worth %dusync, cannot take %dusync out: %w", d, t, worth, amt, ErrInsufficientStake)
	}
	shares := x.Shares
	if amt < worth {
		if rest := worth - amt; rest < p.DelegationMin {
			return 0, fmt.Errorf("%dusync would stay delegated to %s, below params.delegation_min %dusync: take out all %dusync or less: %w", rest, t, p.DelegationMin, worth, ErrInvalidAmount)
		}
		shares = pool.sharesForCeil(amt)
	}
	tokens := pool.tokensFor(shares)
	if tokens == 0 {
		return 0, fmt.Errorf("%dusync of %s's delegation to %s is worth no whole usync: %w", amt, d, t, ErrInvalidAmount)
	}
	if err := settleDelegation(o, d, pool, x); err != nil {
		return 0, err
	}
	oldShares := x.Shares
	pool.Tokens -= tokens
	pool.Shares -= shares
	x.Shares -= shares
	if err := setPool(o, t, pool); err != nil {
		return 0, err
	}
	setDelegation(o, d, t, x)
	delegationSharesChanged(o, d, t, oldShares, x.Shares)
	return tokens, syncTarget(o, t, pool.Tokens)
}

func execUndelegate(o *Overlay, from address.Address, m *MsgUndelegate, p Params, info BlockInfo) ([]Event, error) {
	t := Target{m.Kind, m.Target}
	h := uint64(info.Height)
	u, err := getUnbondingDelegation(o, from, t)
	if err != nil {
		return nil, err
	}
	n := len(u.Entries)
	if n > 0 && u.Entries[n-1].CreationHeight == h {
		n-- // merged with this block's entry
	}
	if uint64(n) >= p.DelegationMaxEntries {
		return nil, fmt.Errorf("%s has %d unbonding entries with %s, params.delegation_max_entries is %d: wait for the first to complete at height %d: %w",
			from, len(u.Entries), t, p.DelegationMaxEntries, u.Entries[0].CompletionHeight, ErrInvalidMsg)
	}
	tokens, err := unbond(o, from, t, uint64(m.Amount), p)
	if err != nil {
		return nil, err
	}
	done := h + unbondingBlocks(t, p)
	if last := len(u.Entries) - 1; last >= 0 && u.Entries[last].CreationHeight == h && u.Entries[last].CompletionHeight == done {
		u.Entries[last].Initial += tokens
		u.Entries[last].Balance += tokens
	} else {
		u.Entries = append(u.Entries, UnbondingDelegationEntry{CreationHeight: h, CompletionHeight: done, Initial: tokens, Balance: tokens})
	}
	setUnbondingDelegation(o, from, t, u)
	o.Set(delUnbondQKey(done, from, t), []byte{1})
	setUint(o, keyDelUnbonding, DelegationUnbonding(o)+tokens)
	return []Event{{Type: "undelegate", Attrs: []Attr{{"delegator", from.String()}, {"kind", t.Kind.String()}, {"target", t.Address.String()},
		{"amount", fmtU(tokens)}, {"completion_height", fmtU(done)}}}}, nil
}

func execRedelegate(o *Overlay, from address.Address, m *MsgRedelegate, p Params, info BlockInfo) ([]Event, error) {
	src, dst := Target{m.FromKind, m.From}, Target{m.ToKind, m.To}
	h := uint64(info.Height)
	if err := checkTarget(o, dst); err != nil {
		return nil, err
	}
	if uint64(m.Amount) < p.DelegationMin {
		return nil, fmt.Errorf("redelegation of %dusync is below params.delegation_min %dusync: %w", m.Amount, p.DelegationMin, ErrInvalidAmount)
	}
	// No hopping: stake redelegated to src stays there until that
	// redelegation completes, or it could run ahead of a slash of the
	// target it came from (the Cosmos SDK's rule).
	if into, ok, err := redelegatedInto(o, from, src); err != nil {
		return nil, err
	} else if ok {
		return nil, invalid("%s's stake redelegated to %s from %s is still slashable for %s until height %d: it cannot be redelegated again before", from, src, into.src, into.src, into.done)
	}
	r, err := getRedelegation(o, from, src, dst)
	if err != nil {
		return nil, err
	}
	n := len(r.Entries)
	if n > 0 && r.Entries[n-1].CreationHeight == h {
		n--
	}
	if uint64(n) >= p.DelegationMaxEntries {
		return nil, fmt.Errorf("%s has %d redelegation entries from %s to %s, params.delegation_max_entries is %d: wait for the first to complete at height %d: %w",
			from, len(r.Entries), src, dst, p.DelegationMaxEntries, r.Entries[0].CompletionHeight, ErrInvalidMsg)
	}
	tokens, err := unbond(o, from, src, uint64(m.Amount), p)
	if err != nil {
		return nil, err
	}
	shares, err := bond(o, from, dst, tokens)
	if err != nil {
		return nil, err
	}
	done := h + unbondingBlocks(src, p)
	if last := len(r.Entries) - 1; last >= 0 && r.Entries[last].CreationHeight == h && r.Entries[last].CompletionHeight == done {
		r.Entries[last].Initial += tokens
		r.Entries[last].Shares += shares
	} else {
		r.Entries = append(r.Entries, RedelegationEntry{CreationHeight: h, CompletionHeight: done, Initial: tokens, Shares: shares})
	}
	setRedelegation(o, from, src, dst, r)
	o.Set(redelQueueKey(done, from, src, dst), []byte{1})
	return []Event{{Type: "redelegate", Attrs: []Attr{{"delegator", from.String()}, {"from_kind", src.Kind.String()}, {"from", src.Address.String()},
		{"to_kind", dst.Kind.String()}, {"to", dst.Address.String()}, {"amount", fmtU(tokens)}, {"completion_height", fmtU(done)}}}}, nil
}

type redelegationInto struct {
	src  Target
	done uint64
}

// redelegatedInto finds a redelegation of d's into t that is still
// slashable for its source (d's redelegations are few: at most
// params.delegation_max_entries per pair).
func redelegatedInto(kv KV, d address.Address, t Target) (redelegationInto, bool, error) {
	pre := append(slices.Clone(prefixRedelegation), d[:]...)
	var out redelegationInto
	var found bool
	var err error
	kv.Iterate(pre, prefixEnd(pre), func(k, b []byte) bool {
		rest := k[len(pre):]
		if targetFrom(rest[targetLen:]) != t {
			return true
		}
		r := &Redelegation{}
		if err = decodeRecord(b, r); err != nil {
			return false
		}
		if len(r.Entries) > 0 {
			out = redelegationInto{src: targetFrom(rest), done: r.Entries[len(r.Entries)-1].CompletionHeight}
			found = true
			return false
		}
		return true
	})
	return out, found, err
}

func execSetCommission(o *Overlay, from address.Address, m *MsgSetCommission, p Params, info BlockInfo) ([]Event, error) {
	t := Target{m.Kind, from}
	if err := checkTarget(o, t); err != nil {
		return nil, err
	}
	if m.PPM > p.CommissionMaxPPM {
		return nil, invalid("commission %d ppm is above params.commission_max_ppm %d", m.PPM, p.CommissionMaxPPM)
	}
	pool, err := GetDelegationPool(o, t)
	if err != nil {
		return nil, err
	}
	now := max(info.Time.Unix(), 1)
	if pool.CommissionSetAt != 0 {
		step := max(m.PPM, pool.CommissionPPM) - min(m.PPM, pool.CommissionPPM)
		if step > p.CommissionMaxChangePPM {
			return nil, invalid("commission moves from %d to %d ppm, more than params.commission_max_change_ppm %d in one change", pool.CommissionPPM, m.PPM, p.CommissionMaxChangePPM)
		}
		if next := pool.CommissionSetAt + commissionChangeSeconds; now < next {
			return nil, invalid("commission of %s was changed at %d; the next change may come at %d (a day later), this block's time is %d", t, pool.CommissionSetAt, next, now)
		}
	}
	old := pool.CommissionPPM
	pool.CommissionPPM, pool.CommissionSetAt = m.PPM, now
	if err := setPool(o, t, pool); err != nil {
		return nil, err
	}
	return []Event{{Type: "commission", Attrs: []Attr{{"kind", t.Kind.String()}, {"target", t.Address.String()}, {"old_ppm", fmtU(old)}, {"rate_ppm", fmtU(m.PPM)}}}}, nil
}

// commissionChangeSeconds is how often a commission may change: a day.
const commissionChangeSeconds = 86_400
