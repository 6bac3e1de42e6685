package ledger

import (
	"bytes"
	"fmt"

	"github.com/gpunet/gpunet/internal/address"
)

// The ante step: what every tx must pass before its message runs (size,
// encoding, chain id, stateless checks, signature, sequence, fee), and the
// fee and sequence it is charged even when its message then fails.

// ante checks a tx's envelope and charges its sequence and fee. pre, when
// not nil, is what PrepareTx made of raw (decoded, ValidateBasic and the
// signature passed): only its chain id is checked again, as for a tx
// l.Txs holds.
func (l *Ledger) ante(o *Overlay, chainID string, p Params, raw []byte, pre *Tx) (*Tx, error) {
	if uint64(len(raw)) > p.MaxTxBytes {
		return nil, fmt.Errorf("tx is %d bytes, the limit is %d: %w", len(raw), p.MaxTxBytes, ErrTxTooLarge)
	}
	tx := pre
	if tx != nil {
		if tx.ChainID != chainID {
			return nil, wrongChain(tx.ChainID, chainID)
		}
	} else {
		var err error
		if tx, err = l.statelessTx(raw, &chainID); err != nil {
			return nil, err
		}
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

// statelessTx runs the ante step's checks that depend on raw alone (and the
// chain id, when chainID is not nil), in the ante step's order: decoding,
// the chain id, ValidateBasic and the signature. A tx l.Txs holds passed
// them all before, so only its chain id is checked again: the answer is
// the same either way.
func (l *Ledger) statelessTx(raw []byte, chainID *string) (*Tx, error) {
	var key [32]byte
	if l.Txs != nil {
		key = TxHash(raw)
		if tx := l.Txs.Get(key); tx != nil {
			if chainID != nil && tx.ChainID != *chainID {
				return nil, wrongChain(tx.ChainID, *chainID)
			}
			return tx, nil
		}
	}
	tx, err := DecodeTx(raw)
	if err != nil {
		return nil, err
	}
	if chainID != nil && tx.ChainID != *chainID {
		return nil, wrongChain(tx.ChainID, *chainID)
	}
	if err := tx.Msg.ValidateBasic(); err != nil {
		return nil, err
	}
	if !l.verify(tx.PubKey, signedMessage(raw), tx.Signature) {
		return nil, fmt.Errorf("signature does not verify for sender %s: %w", tx.Sender(), ErrBadSignature)
	}
	// The tx is not shared yet: the last time it may change.
	tx.sender, tx.senderKnown = address.FromPubKey(tx.PubKey), true
	if l.Txs != nil {
		// A decoded tx's key and signature are slices of raw, whose owner
		// may reuse it once the call returns; the one kept must not be.
		tx.PubKey, tx.Signature = bytes.Clone(tx.PubKey), bytes.Clone(tx.Signature)
		l.Txs.Put(key, raw, tx)
	}
	return tx, nil
}

func wrongChain(got, want string) error {
	return fmt.Errorf("tx is for chain %q, this is %q: %w", got, want, ErrWrongChainID)
}

// PrepareTx runs the checks of a tx that depend on its bytes alone
// (decoding, ValidateBasic, the signature; not the chain id, the size or
// anything in the state) and, when it passes, puts it in l.Txs, so that
// the ante step of CheckTx or DeliverTx then skips them. An adapter runs it
// ahead of its locks, or for a block's txs on several cores; what it
// returns is for its information only.
func (l *Ledger) PrepareTx(raw []byte) (*Tx, error) { return l.statelessTx(raw, nil) }

// PreparedTx is a tx's bytes with what Ledger.Prepare made of them, for
// TxChecker.CheckPrepared. Its fields are the ledger's own, so a caller
// cannot pair bytes with a tx they do not decode to.
type PreparedTx struct {
	raw []byte
	tx  *Tx // nil: raw failed a check that depends on its bytes alone
}

// Prepare is PrepareTx, keeping the decoded and verified tx for a check
// of the same bytes: CheckPrepared then neither decodes nor verifies it
// again, nor looks it up in l.Txs (a hash of its bytes and a lookup, under
// the caller's lock). raw must not change until that check returns.
func (l *Ledger) Prepare(raw []byte) PreparedTx {
	tx, _ := l.statelessTx(raw, nil)
	return PreparedTx{raw: raw, tx: tx}
}

// TxChecker admits txs to a mempool state one after another, as
// Ledger.CheckTx does, for a caller that checks many txs against one state:
// it keeps the chain's parameters for as long as their stored bytes do not
// change, rather than fetching a copy for every tx (GetParams keeps the
// last record it decoded too, but each call copies the whole Params), and
// the overlays a check stages in. Each answer is exactly Ledger.CheckTx's
// on the same state. Not safe for concurrent use.
type TxChecker struct {
	l         *Ledger
	state     *Overlay
	paramsRaw []byte // the stored bytes params was decoded from; nil: none yet
	params    Params
	chainID   string // ChainID(state) as last read: kept while the stored bytes match

	scratch scratchOverlays
}

// NewTxChecker returns a checker admitting txs to state.
func (l *Ledger) NewTxChecker(state *Overlay) *TxChecker {
	return &TxChecker{l: l, state: state}
}

// State returns the overlay c admits txs to.
func (c *TxChecker) State() *Overlay { return c.state }

// Check decides whether a tx may enter the mempool and, when it may,
// applies it to c's state: Ledger.CheckTx(c.State(), raw).
// The result carries no events: a check's are dropped (CometBFT neither
// indexes nor keeps CheckTx's events), so none are built.
func (c *TxChecker) Check(raw []byte) TxResult { return c.check(raw, nil, false) }

// CheckPrepared is Check(p's bytes), for a tx Ledger.Prepare decoded and
// verified: its answer is Check's, without those steps. A p whose tx
// failed them is checked as Check does, which says why.
func (c *TxChecker) CheckPrepared(p PreparedTx) TxResult { return c.check(p.raw, p.tx, false) }

// Recheck decides whether a tx already in the mempool stays there after a
// block, as a block would treat it: a tx whose envelope still passes (its
// signature, its sequence, its fee and the balance to pay it) stays, with
// its message applied to c's state if it still applies and only its
// sequence and fee if not. A block charges a failed message's sequence and
// fee and goes on; dropping it from the mempool instead (as Check would)
// left every later tx of its sender a sequence ahead of the next, so those
// were dropped too, and their senders waited out their block wait for txs
// that no block would hold: a provider's liveness proof that a block made
// late took its heartbeats and its job's start with it.
func (c *TxChecker) Recheck(raw []byte) TxResult { return c.check(raw, nil, true) }

func (c *TxChecker) check(raw []byte, pre *Tx, keepFailed bool) TxResult {
	if stored := c.state.Get(keyParams); c.paramsRaw == nil || !bytes.Equal(stored, c.paramsRaw) {
		p, err := GetParams(c.state)
		if err != nil {
			return TxResult{Err: err}
		}
		c.params, c.paramsRaw = p, bytes.Clone(stored)
	}
	state := c.state
	if stored := state.Get(keyChainID); string(stored) != c.chainID {
		c.chainID = string(stored)
	}
	anteState := c.scratch.on(0, state)
	msgState := c.scratch.on(1, anteState)
	defer c.scratch.release()
	tx, err := c.l.ante(anteState, c.chainID, c.params, raw, pre)
	if err != nil {
		return TxResult{Err: err}
	}
	_, err = executeChecked(c.l, msgState, tx, raw, c.params, BlockInfo{Height: int64(Height(state)) + 1}, noEvents)
	if err != nil {
		if !keepFailed {
			return TxResult{Err: err}
		}
		anteState.Flush(state)
		return TxResult{}
	}
	msgState.Flush(anteState)
	anteState.Flush(state)
	return TxResult{}
}

// scratchOverlays keeps the overlays a tx is staged in (its ante step,
// then its message) from one tx to the next, emptied, rather than making
// them anew for each: a check or a DeliverTx then allocates about a fifth
// less. Not safe for concurrent use.
//
// They keep no record of what they read from their base (noReads): that
// record serves the app hash, which folds only the block's overlay's
// reads, and each key a tx read cost a copy of the key and a map insertion
// that release then dropped; reading the base again instead is a lookup
// in its map (issue 36).
type scratchOverlays struct{ o [2]*Overlay }

// on returns scratch overlay i, empty, on base.
func (s *scratchOverlays) on(i int, base KV) *Overlay {
	if s.o[i] == nil || s.o[i].base != base {
		s.o[i] = NewOverlay(base)
		s.o[i].noReads = true
	}
	return s.o[i]
}

// maxScratchKeys bounds the writes and reads a scratch overlay may have
// held to be kept for the next tx: emptying a map costs its capacity, so
// one that a large tx grew is dropped rather than cleared for every later
// tx.
const maxScratchKeys = 64

// release empties the overlays after a tx, what each read from its base
// included: the tx may have changed the state under them.
func (s *scratchOverlays) release() {
	for i, o := range s.o {
		switch {
		case o == nil:
		case len(o.writes) > maxScratchKeys || len(o.read) > maxScratchKeys:
			s.o[i] = nil
		default:
			o.Discard()
			clear(o.read)
		}
	}
}

// checkMsgsUnchanged makes executeChecked check, before and after a tx's
// message runs, that the tx still encodes to its bytes: that no handler
// changed it, then or since it was first decoded (through a reference it
// kept). Sharing decoded txs (TxCache) is safe only while that holds. The
// package's tests turn it on, for every tx they run; it costs an encoding.
var checkMsgsUnchanged = false

// executeChecked is l.execute, with checkMsgsUnchanged's checks.
func executeChecked(l *Ledger, o *Overlay, tx *Tx, raw []byte, p Params, info BlockInfo, ev eventsWanted) ([]Event, error) {
	if !checkMsgsUnchanged {
		return l.execute(o, tx, p, info, ev)
	}
	mustDecodeTo(raw, tx, "before")
	defer mustDecodeTo(raw, tx, "after")
	return l.execute(o, tx, p, info, ev)
}

func mustDecodeTo(raw []byte, tx *Tx, when string) {
	// The encoding is canonical: a tx encodes back to raw exactly when it
	// is what raw decodes to.
	if enc, err := tx.Encode(); err != nil || !bytes.Equal(enc, raw) {
		panic(fmt.Sprintf("ledger: a %T tx %s its execution is no longer what its bytes decode to (%v): a handler changed its message or kept a reference into it", tx.Msg, when, err))
	}
}
