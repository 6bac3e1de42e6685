package ledger

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/gpunet/gpunet/internal/address"
)

// Validators: the records of the accounts that bond stake for a consensus
// key, and the indexes the validator set is computed from. What happens to
// them each block (votes, evidence, the set CometBFT gets, the fee share)
// is in validatorset.go; their messages are in msg_validator.go.
//
// A chain whose genesis lists validators manages its validator set
// (chain/valmanaged): voting power follows bonded stake. A chain whose
// genesis lists none keeps CometBFT's genesis set fixed, as before
// validators were in the ledger, and refuses create_validator.

// ConsAddress is a validator's consensus address as CometBFT computes it:
// the first 20 bytes of SHA-256 of its ed25519 public key. In text it is
// upper-case hex, as CometBFT prints it.
type ConsAddress [20]byte

// ConsAddressOf returns the consensus address of an ed25519 public key.
func ConsAddressOf(pub []byte) ConsAddress {
	sum := sha256.Sum256(pub)
	var a ConsAddress
	copy(a[:], sum[:20])
	return a
}

func (a ConsAddress) String() string { return strings.ToUpper(hex.EncodeToString(a[:])) }

// MarshalText implements encoding.TextMarshaler.
func (a ConsAddress) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (a *ConsAddress) UnmarshalText(b []byte) error {
	var c ConsAddress
	if n, err := hex.Decode(c[:], b); err != nil || n != len(c) || len(b) != 2*len(c) {
		return fmt.Errorf("consensus address %q is not 40 hex digits: %w", b, ErrInvalidAddress)
	}
	*a = c
	return nil
}

// Validator statuses, as queries report them.
const (
	// StatusBonded: in the set CometBFT has, with power.
	StatusBonded = "bonded"
	// StatusUnbonded: not jailed, but not in the set (bond below the
	// minimum, or outbid by MaxValidators larger bonds).
	StatusUnbonded = "unbonded"
	// StatusJailed: out of the set for downtime until it unjails.
	StatusJailed = "jailed"
	// StatusTombstoned: out for good for double signing.
	StatusTombstoned = "tombstoned"
)

// Validator is the record of one validator, stored at val/<consensus
// address>.
type Validator struct {
	Operator address.Address `json:"operator"`
	PubKey   []byte          `json:"pub_key"` // ed25519, 32 bytes
	Moniker  string          `json:"moniker"`
	// Bond is the bonded stake, in usync.
	Bond       uint64 `json:"bond"`
	Jailed     bool   `json:"jailed"`
	Tombstoned bool   `json:"tombstoned"`
	// JailedUntil is the first height at which a jailed validator may
	// unjail.
	JailedUntil uint64 `json:"jailed_until"`
	// Missed is how many of the last params.downtime_window blocks it
	// missed while in the set.
	Missed uint64 `json:"missed"`
	// Slashed is what it lost to slashes in all, in usync.
	Slashed       uint64 `json:"slashed"`
	CreatedHeight uint64 `json:"created_height"`
	// Delegated is the stake delegators bonded to it (its delegation
	// pool's tokens, delegation.go). Its power is Bond + Delegated.
	Delegated uint64 `json:"delegated"`
}

// Total is the stake behind v's power: its bond and its delegations.
func (v *Validator) Total() uint64 { return v.Bond + v.Delegated }

// ConsAddress returns v's consensus address.
func (v *Validator) ConsAddress() ConsAddress { return ConsAddressOf(v.PubKey) }

// eligible reports whether v may be in the set (bond aside).
func (v *Validator) eligible() bool { return !v.Jailed && !v.Tombstoned }

const maxMonikerLen = 64

// The record's encoding: a version byte (1), then the fields in order;
// version 2 adds Delegated, and is written only for a validator with
// delegations, so that a record without keeps its bytes (and the app
// hash its state had before delegation).
const (
	validatorRecordVersion          = 1
	validatorRecordVersionDelegated = 2
)

func (v *Validator) encode() []byte {
	e := encoder{buf: make([]byte, 0, 96+len(v.Moniker))}
	ver := byte(validatorRecordVersion)
	if v.Delegated > 0 {
		ver = validatorRecordVersionDelegated
	}
	e.raw([]byte{ver})
	e.raw(v.Operator[:])
	e.bytes(v.PubKey)
	e.string(v.Moniker)
	e.uvarint(v.Bond)
	e.bool(v.Jailed)
	e.bool(v.Tombstoned)
	e.uvarint(v.JailedUntil)
	e.uvarint(v.Missed)
	e.uvarint(v.Slashed)
	e.uvarint(v.CreatedHeight)
	if ver == validatorRecordVersionDelegated {
		e.uvarint(v.Delegated)
	}
	return e.buf
}

func decodeValidator(b []byte) (*Validator, error) {
	if len(b) == 0 || (b[0] != validatorRecordVersion && b[0] != validatorRecordVersionDelegated) {
		return nil, fmt.Errorf("validator record version is not %d or %d: %w", validatorRecordVersion, validatorRecordVersionDelegated, ErrInternal)
	}
	d := decoder{buf: b, off: 1}
	v := &Validator{}
	copy(v.Operator[:], d.raw("operator", address.Len))
	v.PubKey = slices.Clone(d.bytes("pub_key", 32))
	v.Moniker = string(d.bytes("moniker", maxMonikerLen))
	v.Bond = d.uvarint("bond")
	v.Jailed = d.bool("jailed")
	v.Tombstoned = d.bool("tombstoned")
	v.JailedUntil = d.uvarint("jailed_until")
	v.Missed = d.uvarint("missed")
	v.Slashed = d.uvarint("slashed")
	v.CreatedHeight = d.uvarint("created_height")
	if b[0] == validatorRecordVersionDelegated {
		if v.Delegated = d.uvarint("delegated"); v.Delegated == 0 && d.err == nil {
			return nil, fmt.Errorf("validator record: version %d without delegations is not canonical: %w", b[0], ErrInternal)
		}
	}
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("validator record: %w: %w", err, ErrInternal)
	}
	if len(v.PubKey) != 32 {
		return nil, fmt.Errorf("validator record: public key of %d bytes: %w", len(v.PubKey), ErrInternal)
	}
	return v, nil
}

func validatorKey(c ConsAddress) []byte { return append(slices.Clone(prefixValidator), c[:]...) }

func valOperatorKey(a address.Address) []byte {
	return append(slices.Clone(prefixValOperator), a[:]...)
}

// valPowerKey orders eligible validators by their stake (bond and
// delegations), largest first, then by consensus address.
func valPowerKey(total uint64, c ConsAddress) []byte {
	return append(u64(slices.Clone(prefixValPower), ^total), c[:]...)
}

// valPowerValue is a power index entry's value: the marker 1 when the key's
// stake is the bond alone, else the bond (8 bytes), which the set's
// minimum is checked against (delegations do not make up for a bond
// below params.min_validator_stake).
func valPowerValue(v *Validator) []byte {
	if v.Delegated == 0 {
		return []byte{1}
	}
	return u64(nil, v.Bond)
}

func valSetKey(c ConsAddress) []byte { return append(slices.Clone(prefixValSet), c[:]...) }

func valMissedKey(c ConsAddress, slot uint64) []byte {
	return u64(append(slices.Clone(prefixValMissed), c[:]...), slot)
}

func valUnbondKey(done uint64, c ConsAddress) []byte {
	return append(u64(slices.Clone(prefixValUnbond), done), c[:]...)
}

// ManagesValidators reports whether the chain's validator set follows
// bonded stake (its genesis listed validators).
func ManagesValidators(kv KV) bool { return kv.Get(keyValManaged) != nil }

// ValidatorBonded returns the total bonded validator stake.
func ValidatorBonded(kv KV) uint64 { return getUint(kv, keyValBonded) }

// ValidatorUnbonding returns the total validator stake unbonding.
func ValidatorUnbonding(kv KV) uint64 { return getUint(kv, keyValUnbonding) }

// GetValidator reads the validator with consensus address c.
func GetValidator(kv KV, c ConsAddress) (*Validator, bool, error) {
	b := kv.Get(validatorKey(c))
	if b == nil {
		return nil, false, nil
	}
	v, err := decodeValidator(b)
	if err != nil {
		return nil, false, fmt.Errorf("validator %s: %w", c, err)
	}
	return v, true, nil
}

// ValidatorOf returns the consensus address of operator's validator.
func ValidatorOf(kv KV, operator address.Address) (ConsAddress, bool) {
	var c ConsAddress
	b := kv.Get(valOperatorKey(operator))
	if len(b) != len(c) {
		return c, false
	}
	copy(c[:], b)
	return c, true
}

// setValidator writes v and keeps its power index entry in step with it:
// old is the record as it was (nil for a new validator).
func setValidator(o *Overlay, old, v *Validator) {
	c := v.ConsAddress()
	if old != nil && old.eligible() {
		o.Delete(valPowerKey(old.Total(), c))
	}
	if v.eligible() {
		o.Set(valPowerKey(v.Total(), c), valPowerValue(v))
	}
	o.Set(validatorKey(c), v.encode())
	if old == nil || old.Bond != v.Bond || old.Tombstoned != v.Tombstoned {
		validatorWeightChanged(o, v) // gov_weight.go
	}
}

// activeSet returns the set CometBFT has, in consensus address order.
func activeSet(kv KV) []ValidatorPower {
	var out []ValidatorPower
	kv.Iterate(prefixValSet, prefixEnd(prefixValSet), func(k, v []byte) bool {
		var vp ValidatorPower
		copy(vp.Address[:], k[len(prefixValSet):])
		vp.Power = binary.BigEndian.Uint64(v)
		out = append(out, vp)
		return true
	})
	return out
}

// ValidatorPower is one member of the validator set.
type ValidatorPower struct {
	Address ConsAddress
	Power   uint64
}

// ValidatorUpdate is a change to the validator set CometBFT runs: Power 0
// removes the validator.
type ValidatorUpdate struct {
	PubKey []byte // ed25519, 32 bytes
	Power  uint64
}

// ActiveValidators returns the validator set as the ledger last gave it to
// CometBFT (at genesis, the initial set), in consensus address order.
func ActiveValidators(kv KV) ([]ValidatorUpdate, error) {
	var out []ValidatorUpdate
	for _, vp := range activeSet(kv) {
		v, ok, err := GetValidator(kv, vp.Address)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("validator %s is in the set but has no record: %w", vp.Address, ErrInternal)
		}
		out = append(out, ValidatorUpdate{PubKey: v.PubKey, Power: vp.Power})
	}
	return out, nil
}

// ValidatorInfo is a validator as queries show it.
type ValidatorInfo struct {
	Validator
	Address ConsAddress `json:"address"`
	Status  string      `json:"status"`
	Power   uint64      `json:"power"`
	// Unbonding is its stake on the way back to the operator's balance.
	Unbonding uint64 `json:"unbonding"`
}

// Validators returns every validator, in the set's order: power first,
// then bond, largest first, then consensus address.
func Validators(kv KV) ([]ValidatorInfo, error) {
	power := map[ConsAddress]uint64{}
	for _, vp := range activeSet(kv) {
		power[vp.Address] = vp.Power
	}
	unbonding := map[ConsAddress]uint64{}
	kv.Iterate(prefixValUnbond, prefixEnd(prefixValUnbond), func(k, v []byte) bool {
		var c ConsAddress
		copy(c[:], k[len(prefixValUnbond)+8:])
		unbonding[c] += binary.BigEndian.Uint64(v)
		return true
	})
	var out []ValidatorInfo
	var err error
	kv.Iterate(prefixValidator, prefixEnd(prefixValidator), func(k, b []byte) bool {
		v, e := decodeValidator(b)
		if e != nil {
			err = fmt.Errorf("validator record %x: %w", k, e)
			return false
		}
		vi := ValidatorInfo{Validator: *v, Address: v.ConsAddress(), Power: power[v.ConsAddress()], Unbonding: unbonding[v.ConsAddress()]}
		switch {
		case v.Tombstoned:
			vi.Status = StatusTombstoned
		case v.Jailed:
			vi.Status = StatusJailed
		case vi.Power > 0:
			vi.Status = StatusBonded
		default:
			vi.Status = StatusUnbonded
		}
		out = append(out, vi)
		return true
	})
	slices.SortStableFunc(out, func(a, b ValidatorInfo) int {
		switch {
		case a.Power != b.Power:
			return cmpDesc(a.Power, b.Power)
		case a.Total() != b.Total():
			return cmpDesc(a.Total(), b.Total())
		}
		return bytes.Compare(a.Address[:], b.Address[:])
	})
	return out, err
}

func cmpDesc(a, b uint64) int {
	if a > b {
		return -1
	}
	return 1
}

// ValidatorUnbondingEntry is validator stake on its way back to the
// operator's balance.
type ValidatorUnbondingEntry struct {
	Address          ConsAddress
	Amount           uint64
	StartHeight      uint64
	CompletionHeight uint64
}

func validatorUnbondings(kv KV) []ValidatorUnbondingEntry {
	var out []ValidatorUnbondingEntry
	kv.Iterate(prefixValUnbond, prefixEnd(prefixValUnbond), func(k, v []byte) bool {
		u := ValidatorUnbondingEntry{CompletionHeight: binary.BigEndian.Uint64(k[len(prefixValUnbond):])}
		copy(u.Address[:], k[len(prefixValUnbond)+8:])
		u.Amount = binary.BigEndian.Uint64(v)
		u.StartHeight = binary.BigEndian.Uint64(v[8:])
		out = append(out, u)
		return true
	})
	return out
}

func setValUnbond(o *Overlay, u ValidatorUnbondingEntry) {
	k := valUnbondKey(u.CompletionHeight, u.Address)
	if u.Amount == 0 {
		o.Delete(k)
		return
	}
	o.Set(k, u64(u64(nil, u.Amount), u.StartHeight))
}

// GenesisValidator is a validator bonded at genesis.
type GenesisValidator struct {
	Operator address.Address `json:"operator"`
	PubKey   []byte          `json:"pub_key"` // ed25519, 32 bytes (base64 in JSON)
	Stake    uint64          `json:"stake"`
	Moniker  string          `json:"moniker,omitempty"`
	// PoP is the consensus key's proof of possession for Operator on the
	// chain's id, as create_validator carries it (64 bytes, base64 in
	// JSON). Required here too: a joiner pins the genesis by hash, which
	// says who wrote it, not that each listed key's holder agreed.
	PoP []byte `json:"pop"`
}

// GenesisValidatorSet returns the validator set that genesis g starts
// with, as InitChain gives it to CometBFT: the one genesis.json must list.
func GenesisValidatorSet(chainID string, g Genesis) ([]ValidatorUpdate, error) {
	var l Ledger
	kv := NewMemKV()
	changes, _, err := l.InitGenesis(kv, chainID, g)
	if err != nil {
		return nil, err
	}
	kv.Apply(changes)
	return ActiveValidators(kv)
}

// initValidators bonds the genesis validators. Their stake is added to the
// supply (it is not taken from the operators' genesis balances), and the
// initial set is computed as every block's end computes it.
func initValidators(o *Overlay, g Genesis) (uint64, error) {
	if len(g.Validators) == 0 {
		return 0, nil
	}
	o.Set(keyValManaged, []byte{1})
	var total uint64
	for i, gv := range g.Validators {
		v := &Validator{Operator: gv.Operator, PubKey: gv.PubKey, Moniker: gv.Moniker, Bond: gv.Stake}
		if err := checkValidatorFields(v.Operator, v.PubKey, v.Moniker); err != nil {
			return 0, fmt.Errorf("validators[%d]: %w", i, err)
		}
		if err := checkPoP(gv.PubKey, gv.PoP, ChainID(o), gv.Operator); err != nil {
			return 0, fmt.Errorf("validators[%d]: %w", i, err)
		}
		if err := checkNewValidator(o, v, g.Params); err != nil {
			return 0, fmt.Errorf("validators[%d]: %w", i, err)
		}
		if total+gv.Stake < total {
			return 0, fmt.Errorf("validators[%d]: total stake overflows: %w", i, ErrInvalidGenesis)
		}
		total += gv.Stake
		setValidator(o, nil, v)
		o.Set(valOperatorKey(v.Operator), func() []byte { c := v.ConsAddress(); return c[:] }())
	}
	setUint(o, keyValBonded, total)
	setUint(o, keyValUnbonding, 0)
	if _, err := updateValidatorSet(o, g.Params); err != nil {
		return 0, err
	}
	if len(activeSet(o)) == 0 {
		return 0, fmt.Errorf("no genesis validator has the minimum stake %dusync: %w", g.Params.MinValidatorStake, ErrInvalidGenesis)
	}
	return total, nil
}

// checkNewValidator checks what creating v needs: a well-formed key and
// moniker, an operator with no validator yet, a key no validator uses, and
// at least the minimum stake.
//
// A consensus key is used once for good: its record (val/<consensus
// address>, the index by key) is never deleted, so a key stays refused
// when its validator has withdrawn its whole bond, is jailed, or is
// tombstoned. Its history (missed blocks, slashes, evidence up to
// params.evidence_max_age_blocks old, a tombstone) belongs to the key: a
// double signer must not come back as a new validator, and evidence of what
// the key did must not slash a later operator. Its operator can bond again;
// anyone else needs a new key.
func checkNewValidator(kv KV, v *Validator, p Params) error {
	if err := checkValidatorFields(v.Operator, v.PubKey, v.Moniker); err != nil {
		return err
	}
	if c, ok := ValidatorOf(kv, v.Operator); ok {
		return invalid("operator %s already has validator %s (one validator per operator)", v.Operator, c)
	}
	c := v.ConsAddress()
	if old, ok, err := GetValidator(kv, c); err != nil {
		return err
	} else if ok {
		return invalid("consensus key %X (address %s) is already used by another validator, operated by %s (a consensus key serves one validator for good, even once tombstoned or unbonded: make a new key)", v.PubKey, c, old.Operator)
	}
	if v.Bond < p.MinValidatorStake {
		return fmt.Errorf("stake %dusync is below params.min_validator_stake %dusync: %w", v.Bond, p.MinValidatorStake, ErrInsufficientStake)
	}
	return nil
}

func checkValidatorFields(operator address.Address, pub []byte, moniker string) error {
	if operator.IsZero() {
		return fmt.Errorf("operator is the zero address: %w", ErrInvalidAddress)
	}
	return checkKeyAndMoniker(pub, moniker)
}

func checkKeyAndMoniker(pub []byte, moniker string) error {
	if len(pub) != 32 {
		return invalid("consensus public key has %d bytes, want 32 (an ed25519 key, as in priv_validator_key.json)", len(pub))
	}
	if smallOrderKey(pub) {
		return invalid("consensus public key %X is a point of small order, for which anyone can sign: not a key anyone holds", pub)
	}
	if len(moniker) > maxMonikerLen {
		return invalid("moniker has %d bytes, at most %d", len(moniker), maxMonikerLen)
	}
	for _, r := range moniker {
		if r < 0x20 || r == 0x7f {
			return invalid("moniker %q has a control character", moniker)
		}
	}
	return nil
}
