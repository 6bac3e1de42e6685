package ledger

import (
	"crypto/ed25519"
	"fmt"
	"time"
)

// Verifier checks an ed25519 signature. The adapter may supply one that
// remembers signatures it already checked; the result must be that of
// ed25519.Verify.
type Verifier func(pub ed25519.PublicKey, msg, sig []byte) bool

// TxCache remembers txs that passed the checks that depend on their bytes
// alone: decoding, ValidateBasic and the signature, by the hash of their
// bytes (TxHash), which the ledger computes once for a lookup and the Put
// that may follow it. Get returns the tx Put was given for the same hash,
// or nil; Put's raw is the tx's bytes, for an implementation that bounds
// what it holds by their size (it must not keep raw); an implementation may forget
// any tx at any time (it must be bounded), and must be safe for concurrent
// use. A tx it returns is shared by every later use of the same bytes:
// the ledger never changes a decoded Tx or its Msg, nor keeps a reference
// into one past the tx's execution (its tests check every tx they run for
// that, checkMsgsUnchanged), so sharing it gives the same answers as
// decoding again.
type TxCache interface {
	Get(key [32]byte) *Tx
	Put(key [32]byte, raw []byte, tx *Tx)
}

// Ledger applies txs and blocks. Its zero value verifies with ed25519.Verify
// and decodes every tx each time it sees it.
type Ledger struct {
	Verify Verifier
	// Txs, if set, spares the ante step decoding and verifying again a tx
	// it has seen (in CheckTx, a recheck, DeliverTx or PrepareTx).
	Txs TxCache
	// Attest verifies TEE evidence (tee.go): a node sets attest.Verify
	// through abciapp. Without one, MsgAttest is refused.
	Attest AttestVerifier
}

func (l *Ledger) verify(pub ed25519.PublicKey, msg, sig []byte) bool {
	if l.Verify != nil {
		return l.Verify(pub, msg, sig)
	}
	return ed25519.Verify(pub, msg, sig)
}

// Event reports something a tx or block did, for clients that follow the
// chain.
type Event struct {
	Type  string `json:"type"`
	Attrs []Attr `json:"attrs"`
}

// Attr is one key/value of an Event.
type Attr struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// TxResult is the outcome of one tx.
type TxResult struct {
	Err    error // nil on success; wraps an *Error
	Events []Event
}

// Code returns the stable code of the result (0 on success).
func (r TxResult) Code() uint32 { return CodeOf(r.Err) }

// BlockInfo is what the ledger may know about the block being applied.
type BlockInfo struct {
	Height int64
	Time   time.Time // the block header's time, never the wall clock
	// Seed is the block's randomness: the adapter derives it from the
	// block hash, which no one knows before the block is proposed.
	Seed Hash
	// Votes are the last block's commit votes (CometBFT's
	// DecidedLastCommit), Misbehavior the evidence the block commits:
	// they count validators' missed blocks and slash double signers
	// (validatorset.go).
	Votes       []VoteInfo
	Misbehavior []Misbehavior
}

// Block is one block being applied.
type Block struct {
	l      *Ledger
	info   BlockInfo
	base   KV
	state  *Overlay
	params Params
	chain  string
	err    error
	events []Event
	// updates are the validator set's changes, known after End.
	updates []ValidatorUpdate
	scratch scratchOverlays // DeliverTx's overlays, reused
}

// BeginBlock starts applying a block on the committed state base.
func (l *Ledger) BeginBlock(base KV, info BlockInfo) *Block {
	b := &Block{l: l, info: info, base: base, state: NewOverlay(base), chain: ChainID(base)}
	b.params, b.err = GetParams(base)
	if b.err == nil {
		if h := Height(base); info.Height != int64(h)+1 {
			b.err = fmt.Errorf("block height %d does not follow state height %d: %w", info.Height, h, ErrInternal)
		}
	}
	if b.err == nil {
		b.events, b.err = b.begin()
	}
	return b
}

// begin runs what happens at the start of every block, before its txs.
func (b *Block) begin() ([]Event, error) {
	h := uint64(b.info.Height)
	// Governance first: a parameter change passed at the end of the last
	// block's voting period applies to all of this block (gov.go).
	evs, params, err := beginGov(b.state, b.params, b.info)
	if err != nil {
		return nil, err
	}
	b.params = params
	more, err := releaseUnbonded(b.state, h)
	if err != nil {
		return nil, err
	}
	evs = append(evs, more...)
	more, err = beginValidators(b.state, b.params, b.info)
	if err != nil {
		return nil, err
	}
	evs = append(evs, more...)
	// After the evidence: stake that completes unbonding in this block is
	// still slashed for a fault this block's evidence proves.
	more, err = matureDelegations(b.state, h)
	if err != nil {
		return nil, err
	}
	evs = append(evs, more...)
	more, err = expireChallenges(b.state, h, b.params, b.info)
	if err != nil {
		return nil, err
	}
	evs = append(evs, more...)
	more, err = expireJobs(b.state, b.info.Time.Unix(), b.params, b.info)
	if err != nil {
		return nil, err
	}
	evs = append(evs, more...)
	more, err = expireServices(b.state, b.info.Time.Unix(), b.params)
	if err != nil {
		return nil, err
	}
	evs = append(evs, more...)
	// Attestations that expired leave the TEE market (market_tee.go).
	more, err = lapseAttestations(b.state, b.params, b.info)
	return append(evs, more...), err
}

// Events returns the block-level events (not those of its txs) so far.
func (b *Block) Events() []Event { return b.events }

// DeliverTx applies one tx of the block. A tx whose envelope is bad (cannot
// be decoded, wrong chain, bad signature or sequence, fee not paid) leaves
// the state unchanged; a tx whose message fails still consumes its sequence
// and fee, so it cannot be replayed.
func (b *Block) DeliverTx(raw []byte) TxResult { return b.deliver(raw, nil) }

// DeliverPrepared is DeliverTx(p's bytes), for a tx Ledger.Prepare decoded
// and verified (on several cores, ahead of the block's txs): its result is
// DeliverTx's, without those steps or a lookup in Ledger.Txs.
func (b *Block) DeliverPrepared(p PreparedTx) TxResult { return b.deliver(p.raw, p.tx) }

func (b *Block) deliver(raw []byte, pre *Tx) TxResult {
	if b.err != nil {
		return TxResult{Err: b.err}
	}
	ante := b.scratch.on(0, b.state)
	defer b.scratch.release()
	tx, err := b.l.ante(ante, b.chain, b.params, raw, pre)
	if err != nil {
		return TxResult{Err: err}
	}
	ante.Flush(b.state)
	msgState := b.scratch.on(1, b.state)
	events, err := executeChecked(b.l, msgState, tx, raw, b.params, b.info, withEvents)
	if err != nil {
		return TxResult{Err: err}
	}
	msgState.Flush(b.state)
	return TxResult{Events: events}
}

// End finishes the block: it returns the change set to persist and the new
// app hash.
func (b *Block) End() ([]Change, []byte, error) {
	if b.err != nil {
		return nil, nil, b.err
	}
	h := uint64(b.info.Height)
	evs, err := schedule(b.state, b.params, b.info)
	if err != nil {
		return nil, nil, err
	}
	b.events = append(b.events, evs...)
	evs, err = endMarket(b.state, b.params, b.info)
	if err != nil {
		return nil, nil, err
	}
	b.events = append(b.events, evs...)
	evs, err = issueChallenges(b.state, h, b.info.Seed, b.params)
	if err != nil {
		return nil, nil, err
	}
	b.events = append(b.events, evs...)
	evs, err = advanceHardwareChallenges(b.state, b.info, b.params)
	if err != nil {
		return nil, nil, err
	}
	b.events = append(b.events, evs...)
	evs, err = issueHardwareChallenges(b.state, b.info, b.params)
	if err != nil {
		return nil, nil, err
	}
	b.events = append(b.events, evs...)
	b.events = append(b.events, burnFees(b.state, b.params)...)
	b.updates, evs, err = endValidators(b.state, b.params, b.info)
	if err != nil {
		return nil, nil, err
	}
	b.events = append(b.events, evs...)
	setUint(b.state, keyHeight, h)
	return finish(b.base, b.state)
}

// ValidatorUpdates returns the changes End made to the validator set, in
// consensus address order (power 0 removes a validator): what the adapter
// returns to CometBFT, which applies them from two heights on.
func (b *Block) ValidatorUpdates() []ValidatorUpdate { return b.updates }

// CheckTx decides whether a tx may enter the mempool, applying it to the
// mempool's state (an overlay of the committed state) when it is valid so
// that later txs from the same sender are checked after it. Unlike
// DeliverTx, a tx whose message fails leaves no trace.
func (l *Ledger) CheckTx(state *Overlay, raw []byte) TxResult {
	return l.NewTxChecker(state).Check(raw)
}

// finish folds the staged changes into the lattice hash and returns the
// complete change set (including the new hash) and the app hash.
func finish(base KV, o *Overlay) ([]Change, []byte, error) {
	h, err := ltHashFromBytes(base.Get(keyLtHash))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", err, ErrInternal)
	}
	var x ltHasher
	for _, c := range o.Changes() {
		if !Hashed(c.Key) {
			continue
		}
		if old := o.baseGet(c.Key); old != nil {
			h.remove(&x, c.Key, old)
		}
		if c.Value != nil {
			h.add(&x, c.Key, c.Value)
		}
	}
	o.Set(keyLtHash, h.Bytes())
	return o.Changes(), h.Sum(), nil
}

// Height returns the height of the last block applied to kv (0 after genesis).
func Height(kv KV) uint64 { return getUint(kv, keyHeight) }

// ChainID returns the chain id recorded at genesis.
func ChainID(kv KV) string { return string(kv.Get(keyChainID)) }

// AppHash returns the commitment to the state in kv.
func AppHash(kv KV) ([]byte, error) {
	h, err := ltHashFromBytes(kv.Get(keyLtHash))
	if err != nil {
		return nil, err
	}
	return h.Sum(), nil
}
