package ledger

import (
	"crypto/ed25519"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
)

// The validator messages: create a validator for a consensus key, add to
// and withdraw from its bond, unjail it. The sender is the operator; an
// operator has at most one validator.

// MsgCreateValidator bonds Stake of the sender's balance for the consensus
// key PubKey (ed25519, 32 bytes). PoP proves that the key's holder lets the
// sender do so: the key's signature over ValidatorPoPBytes(chain id,
// sender) (validator_pop.go).
type MsgCreateValidator struct {
	PubKey  []byte `json:"pub_key"`
	Stake   Amount `json:"stake"`
	Moniker string `json:"moniker,omitempty"`
	// PoP is 64 bytes. Added after the other fields, and omitted when
	// empty, so the body of a create_validator from before it decodes
	// as it did and is refused for lacking it.
	PoP []byte `json:"pop,omitempty"`
}

// MsgUnjail brings the sender's jailed validator back once its jail time
// (params.jail_blocks) is over. A tombstoned validator cannot unjail.
type MsgUnjail struct{}

// MsgValidatorBond adds Amount of the sender's balance to its validator's
// bond.
type MsgValidatorBond struct {
	Amount Amount `json:"amount"`
}

// MsgValidatorUnbond withdraws Amount of the sender's validator bond: it
// returns to the balance after params.validator_unbonding_blocks, slashable
// until then for evidence of what the validator did while it was bonded.
type MsgValidatorUnbond struct {
	Amount Amount `json:"amount"`
}

// Type implements Msg.
func (*MsgCreateValidator) Type() MsgType { return MsgTypeCreateValidator }

// Type implements Msg.
func (*MsgUnjail) Type() MsgType { return MsgTypeUnjail }

// Type implements Msg.
func (*MsgValidatorBond) Type() MsgType { return MsgTypeValidatorBond }

// Type implements Msg.
func (*MsgValidatorUnbond) Type() MsgType { return MsgTypeValidatorUnbond }

// ValidateBasic implements Msg.
func (m *MsgCreateValidator) ValidateBasic() error {
	if err := positive(m.Stake); err != nil {
		return err
	}
	if err := checkKeyAndMoniker(m.PubKey, m.Moniker); err != nil {
		return err
	}
	return checkPoPLen(m.PoP)
}

// checkPoPLen checks that a proof of possession is there and has the
// length of a signature; whether it verifies needs the chain id.
func checkPoPLen(pop []byte) error {
	switch {
	case len(pop) == 0:
		return invalid("pop is missing: a validator needs its consensus key's proof of possession, a signature over the chain id and the operator (`gpunet validator create` makes it from the node's priv_validator_key.json; with --pubkey, `gpunet validator pop` makes it where the key is)")
	case len(pop) != ed25519.SignatureSize:
		return invalid("pop has %d bytes, want %d (an ed25519 signature by the consensus key)", len(pop), ed25519.SignatureSize)
	}
	return nil
}

// checkPoP checks that pop proves operator may bond for pub on chainID.
func checkPoP(pub, pop []byte, chainID string, operator address.Address) error {
	if err := checkPoPLen(pop); err != nil {
		return err
	}
	if !VerifyValidatorPoP(pub, pop, chainID, operator) {
		return fmt.Errorf("pop does not verify: it is not a signature by consensus key %X over chain %q and operator %s (a pop made for another chain or operator, or by another key, is refused): %w", pub, chainID, operator, ErrBadSignature)
	}
	return nil
}

// ValidateBasic implements Msg.
func (*MsgUnjail) ValidateBasic() error { return nil }

// ValidateBasic implements Msg.
func (m *MsgValidatorBond) ValidateBasic() error { return positive(m.Amount) }

// ValidateBasic implements Msg.
func (m *MsgValidatorUnbond) ValidateBasic() error { return positive(m.Amount) }

var errStaticValidators = fmt.Errorf("this chain's validator set is fixed at genesis (its genesis lists no ledger validators): %w", ErrInvalidMsg)

func execCreateValidator(o *Overlay, from address.Address, m *MsgCreateValidator, p Params, info BlockInfo) ([]Event, error) {
	if !ManagesValidators(o) {
		return nil, errStaticValidators
	}
	// The proof first: a message for a key its sender does not hold is
	// refused as such, whatever else is wrong with it.
	if err := checkPoP(m.PubKey, m.PoP, ChainID(o), from); err != nil {
		return nil, err
	}
	v := &Validator{Operator: from, PubKey: m.PubKey, Moniker: m.Moniker, Bond: uint64(m.Stake), CreatedHeight: uint64(info.Height)}
	if err := checkNewValidator(o, v, p); err != nil {
		return nil, err
	}
	if err := takeBalance(o, from, v.Bond, "bond"); err != nil {
		return nil, err
	}
	c := v.ConsAddress()
	setValidator(o, nil, v)
	o.Set(valOperatorKey(from), c[:])
	setUint(o, keyValBonded, ValidatorBonded(o)+v.Bond)
	return []Event{{Type: "create_validator", Attrs: []Attr{
		{"validator", c.String()}, {"operator", from.String()}, {"stake", strconv.FormatUint(v.Bond, 10)}, {"moniker", v.Moniker},
	}}}, nil
}

// mustValidatorOf returns the validator operated by from.
func mustValidatorOf(kv KV, from address.Address) (*Validator, error) {
	c, ok := ValidatorOf(kv, from)
	if !ok {
		return nil, invalid("%s operates no validator (create one with create_validator)", from)
	}
	v, ok, err := GetValidator(kv, c)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("validator %s of %s has no record: %w", c, from, ErrInternal)
	}
	return v, nil
}

func execUnjail(o *Overlay, from address.Address, p Params, info BlockInfo) ([]Event, error) {
	v, err := mustValidatorOf(o, from)
	if err != nil {
		return nil, err
	}
	c := v.ConsAddress()
	switch {
	case v.Tombstoned:
		return nil, invalid("validator %s was tombstoned for double signing and can never unjail", c)
	case !v.Jailed:
		return nil, invalid("validator %s is not jailed", c)
	case uint64(info.Height) < v.JailedUntil:
		return nil, invalid("validator %s is jailed until height %d (this is %d)", c, v.JailedUntil, info.Height)
	case v.Bond < p.MinValidatorStake:
		return nil, fmt.Errorf("validator %s has a bond of %dusync, below params.min_validator_stake %dusync: bond more first: %w", c, v.Bond, p.MinValidatorStake, ErrInsufficientStake)
	}
	old := *v
	v.Jailed, v.JailedUntil = false, 0
	setValidator(o, &old, v)
	return []Event{{Type: "unjail", Attrs: []Attr{{"validator", c.String()}, {"operator", from.String()}}}}, nil
}

func execValidatorBond(o *Overlay, from address.Address, m *MsgValidatorBond) ([]Event, error) {
	v, err := mustValidatorOf(o, from)
	if err != nil {
		return nil, err
	}
	c := v.ConsAddress()
	if v.Tombstoned {
		return nil, invalid("validator %s is tombstoned: it can only withdraw its bond", c)
	}
	amt := uint64(m.Amount)
	if v.Bond+amt < v.Bond {
		return nil, fmt.Errorf("bond of %s would overflow: %w", c, ErrInvalidAmount)
	}
	if err := takeBalance(o, from, amt, "bond"); err != nil {
		return nil, err
	}
	old := *v
	v.Bond += amt
	setValidator(o, &old, v)
	setUint(o, keyValBonded, ValidatorBonded(o)+amt)
	return []Event{{Type: "validator_bond", Attrs: []Attr{{"validator", c.String()}, {"amount", strconv.FormatUint(amt, 10)}, {"bond", strconv.FormatUint(v.Bond, 10)}}}}, nil
}

func execValidatorUnbond(o *Overlay, from address.Address, m *MsgValidatorUnbond, p Params, info BlockInfo) ([]Event, error) {
	v, err := mustValidatorOf(o, from)
	if err != nil {
		return nil, err
	}
	c := v.ConsAddress()
	amt := uint64(m.Amount)
	if amt > v.Bond {
		return nil, fmt.Errorf("validator %s has a bond of %dusync, cannot withdraw %dusync: %w", c, v.Bond, amt, ErrInsufficientStake)
	}
	old := *v
	v.Bond -= amt
	setValidator(o, &old, v)
	setUint(o, keyValBonded, ValidatorBonded(o)-amt)
	u := ValidatorUnbondingEntry{Address: c, StartHeight: uint64(info.Height), CompletionHeight: uint64(info.Height) + p.ValidatorUnbondingBlocks}
	if b := o.Get(valUnbondKey(u.CompletionHeight, c)); len(b) == 16 {
		u.Amount = binary.BigEndian.Uint64(b) // a second withdrawal in the same block
	}
	u.Amount += amt
	setValUnbond(o, u)
	setUint(o, keyValUnbonding, ValidatorUnbonding(o)+amt)
	return []Event{{Type: "validator_unbond", Attrs: []Attr{
		{"validator", c.String()}, {"amount", strconv.FormatUint(amt, 10)}, {"completion_height", strconv.FormatUint(u.CompletionHeight, 10)},
	}}}, nil
}

// takeBalance moves amt out of addr's balance (for what).
func takeBalance(o *Overlay, addr address.Address, amt uint64, what string) error {
	acct, err := GetAccount(o, addr)
	if err != nil {
		return err
	}
	if acct.Balance < amt {
		return fmt.Errorf("%s has %dusync, cannot %s %dusync: %w", addr, acct.Balance, what, amt, ErrInsufficientFunds)
	}
	acct.Balance -= amt
	setAccount(o, &acct)
	return nil
}
