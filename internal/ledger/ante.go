package ledger

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
)

// The ante step: what every tx must pass before its message runs (size,
// encoding, chain id, stateless checks, signature, sequence, fee), and the
// fee and sequence it is charged even when its message then fails.

// ante checks a tx's envelope and charges its sequence and fee.
func (l *Ledger) ante(o *Overlay, chainID string, p Params, raw []byte) (*Tx, error) {
	if uint64(len(raw)) > p.MaxTxBytes {
		return nil, fmt.Errorf("tx is %d bytes, the limit is %d: %w", len(raw), p.MaxTxBytes, ErrTxTooLarge)
	}
	tx, err := DecodeTx(raw)
	if err != nil {
		return nil, err
	}
	if tx.ChainID != chainID {
		return nil, fmt.Errorf("tx is for chain %q, this is %q: %w", tx.ChainID, chainID, ErrWrongChainID)
	}
	if err := tx.Msg.ValidateBasic(); err != nil {
		return nil, err
	}
	signed := raw[:len(raw)-ed25519.SignatureSize]
	msg := make([]byte, 0, len(signDomain)+len(signed))
	msg = append(append(msg, signDomain...), signed...)
	if !l.verify(tx.PubKey, msg, tx.Signature) {
		return nil, fmt.Errorf("signature does not verify for sender %s: %w", tx.Sender(), ErrBadSignature)
	}
	acct, err := GetAccount(o, tx.Sender())
	if err != nil {
		return nil, err
	}
	switch {
	case tx.Sequence < acct.Sequence:
		return nil, fmt.Errorf("sequence %d of %s was already used, the next is %d (replayed tx?): %w", tx.Sequence, acct.Address, acct.Sequence, ErrBadSequence)
	case tx.Sequence > acct.Sequence:
		return nil, fmt.Errorf("sequence %d of %s is ahead of the next, %d (an earlier tx is missing): %w", tx.Sequence, acct.Address, acct.Sequence, ErrBadSequence)
	}
	if tx.Fee < p.MinFee {
		return nil, fmt.Errorf("fee %dusync is below the minimum %dusync: %w", tx.Fee, p.MinFee, ErrInsufficientFee)
	}
	if acct.Balance < tx.Fee {
		return nil, fmt.Errorf("%s has %dusync, cannot pay the fee of %dusync: %w", acct.Address, acct.Balance, tx.Fee, ErrInsufficientFunds)
	}
	if acct.PubKey != nil && !bytes.Equal(acct.PubKey, tx.PubKey) {
		return nil, fmt.Errorf("public key does not match the one on record for %s: %w", acct.Address, ErrBadSignature)
	}
	acct.Balance -= tx.Fee
	acct.Sequence++
	acct.PubKey = tx.PubKey
	setAccount(o, &acct)
	collectFee(o, tx.Fee)
	return tx, nil
}
