// Package ledger is gpunet's state machine: the rules every validator applies
// to every block, deterministically (DESIGN.md section 4).
//
// It imports nothing but the standard library and gpunet's own pure
// packages: no CometBFT, no wall clock, no randomness, no files, no
// goroutines, and it never lets map iteration order reach the state. Time is
// the block's time and the only inputs are the committed state (a KV), the
// block's header fields and its txs. The CometBFT adapter (abciapp) and the
// store live outside.
//
// One block goes through BeginBlock, DeliverTx for each tx, and End, which
// returns the sorted change set and the new app hash; the caller persists
// both atomically. The mempool runs CheckTx against its own overlay of the
// committed state.
package ledger

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/gpunet/gpunet/internal/address"
)

// Verifier checks an ed25519 signature. The adapter may supply one that
// remembers signatures it already checked; the result must be that of
// ed25519.Verify.
type Verifier func(pub ed25519.PublicKey, msg, sig []byte) bool

// Ledger applies txs and blocks. Its zero value verifies with ed25519.Verify.
type Ledger struct {
	Verify Verifier
}

func (l *Ledger) verify(pub ed25519.PublicKey, msg, sig []byte) bool {
	if l.Verify != nil {
		return l.Verify(pub, msg, sig)
	}
	return ed25519.Verify(pub, msg, sig)
}

// Genesis is the ledger's part of the genesis document (CometBFT's
// app_state).
type Genesis struct {
	Params   Params           `json:"params"`
	Accounts []GenesisAccount `json:"accounts"`
	// Treasury is the treasury's initial balance: it pays audit and
	// escalation replicas of spot jobs (verify.go) until fees and slashes
	// keep it.
	Treasury uint64 `json:"treasury,omitempty"`
}

// GenesisAccount is an initial allocation.
type GenesisAccount struct {
	Address address.Address `json:"address"`
	Balance uint64          `json:"balance"`
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

// InitGenesis builds the initial state on an empty base and returns its
// change set and app hash.
func (l *Ledger) InitGenesis(base KV, chainID string, g Genesis) ([]Change, []byte, error) {
	if chainID == "" || len(chainID) > maxChainIDLen {
		return nil, nil, fmt.Errorf("chain id %q must be 1 to %d bytes: %w", chainID, maxChainIDLen, ErrInvalidGenesis)
	}
	if err := g.Params.Validate(); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", err, ErrInvalidGenesis)
	}
	if base.Get(keyChainID) != nil {
		return nil, nil, fmt.Errorf("state already initialised: %w", ErrInvalidGenesis)
	}
	o := NewOverlay(base)
	o.Set(keyChainID, []byte(chainID))
	pb, _ := json.Marshal(g.Params)
	o.Set(keyParams, pb)
	var supply uint64
	seen := make(map[address.Address]bool)
	for i, ga := range g.Accounts {
		if ga.Address.IsZero() {
			return nil, nil, fmt.Errorf("accounts[%d]: zero address: %w", i, ErrInvalidGenesis)
		}
		if seen[ga.Address] {
			return nil, nil, fmt.Errorf("accounts[%d]: %s listed twice: %w", i, ga.Address, ErrInvalidGenesis)
		}
		seen[ga.Address] = true
		if supply+ga.Balance < supply {
			return nil, nil, fmt.Errorf("accounts[%d]: total supply overflows: %w", i, ErrInvalidGenesis)
		}
		supply += ga.Balance
		setAccount(o, &Account{Address: ga.Address, Balance: ga.Balance})
	}
	if supply+g.Treasury < supply {
		return nil, nil, fmt.Errorf("treasury: total supply overflows: %w", ErrInvalidGenesis)
	}
	supply += g.Treasury
	setUint(o, keySupply, supply)
	setUint(o, keyTreasury, g.Treasury)
	setUint(o, keyStaked, 0)
	setUint(o, keyUnbonding, 0)
	setUint(o, keyOnlineCount, 0)
	setUint(o, keyEscrow, 0)
	setUint(o, keyHeight, 0)
	return finish(base, o)
}

// BlockInfo is what the ledger may know about the block being applied.
type BlockInfo struct {
	Height int64
	Time   time.Time // the block header's time, never the wall clock
	// Seed is the block's randomness: the adapter derives it from the
	// block hash, which no one knows before the block is proposed.
	Seed Hash
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
	evs, err := releaseUnbonded(b.state, h)
	if err != nil {
		return nil, err
	}
	more, err := expireChallenges(b.state, h, b.params, b.info)
	if err != nil {
		return nil, err
	}
	evs = append(evs, more...)
	more, err = expireJobs(b.state, b.info.Time.Unix(), b.params, b.info)
	return append(evs, more...), err
}

// Events returns the block-level events (not those of its txs) so far.
func (b *Block) Events() []Event { return b.events }

// DeliverTx applies one tx of the block. A tx whose envelope is bad (cannot
// be decoded, wrong chain, bad signature or sequence, fee not paid) leaves
// the state unchanged; a tx whose message fails still consumes its sequence
// and fee, so it cannot be replayed.
func (b *Block) DeliverTx(raw []byte) TxResult {
	if b.err != nil {
		return TxResult{Err: b.err}
	}
	ante := NewOverlay(b.state)
	tx, err := b.l.ante(ante, b.chain, b.params, raw)
	if err != nil {
		return TxResult{Err: err}
	}
	ante.Flush(b.state)
	msgState := NewOverlay(b.state)
	events, err := execute(msgState, tx, b.params, b.info)
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
	setUint(b.state, keyHeight, h)
	return finish(b.base, b.state)
}

// CheckTx decides whether a tx may enter the mempool, applying it to the
// mempool's state (an overlay of the committed state) when it is valid so
// that later txs from the same sender are checked after it. Unlike
// DeliverTx, a tx whose message fails leaves no trace.
func (l *Ledger) CheckTx(state *Overlay, raw []byte) TxResult {
	params, err := GetParams(state)
	if err != nil {
		return TxResult{Err: err}
	}
	txState := NewOverlay(state)
	tx, err := l.ante(txState, ChainID(state), params, raw)
	if err != nil {
		return TxResult{Err: err}
	}
	events, err := execute(txState, tx, params, BlockInfo{Height: int64(Height(state)) + 1})
	if err != nil {
		return TxResult{Err: err}
	}
	txState.Flush(state)
	return TxResult{Events: events}
}

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
	if tx.Fee > 0 {
		setUint(o, keyTreasury, Treasury(o)+tx.Fee)
	}
	return tx, nil
}

// execute applies a tx's message. Handlers live beside their state area.
func execute(o *Overlay, tx *Tx, params Params, info BlockInfo) ([]Event, error) {
	from := tx.Sender()
	switch m := tx.Msg.(type) {
	case *MsgSend:
		return execSend(o, from, m)
	case *MsgRegisterProvider:
		return execRegisterProvider(o, from, m, info)
	case *MsgUpdateProvider:
		return execUpdateProvider(o, from, m, info)
	case *MsgSetProviderStatus:
		return execSetProviderStatus(o, from, m, params, info)
	case *MsgStake:
		return execStake(o, from, m)
	case *MsgUnstake:
		return execUnstake(o, from, m, params, info)
	case *MsgLivenessProof:
		return execLivenessProof(o, from, m, info)
	case *MsgSubmitJob:
		return execSubmitJob(o, from, m, params, info)
	case *MsgGrantKey:
		return execGrantKey(o, from, m, params, info)
	case *MsgStartJob:
		return execStartJob(o, from, m, params, info)
	case *MsgCommitResult:
		return execCommitResult(o, from, m, params, info)
	case *MsgCancelJob:
		return execCancelJob(o, from, m, params, info)
	case *MsgRevealResult:
		return execRevealResult(o, from, m, params, info)
	case *MsgChallengeCommit:
		return execChallengeCommit(o, from, m, info)
	case *MsgChallengeOpen:
		return execChallengeOpen(o, from, m, params, info)
	case *MsgRequestKeyHandover:
		return execRequestKeyHandover(o, from, m, params, info)
	case *MsgHandOverKey:
		return execHandOverKey(o, from, m, params, info)
	case *MsgDisputeKeyHandover:
		return execDisputeKeyHandover(o, from, m, params, info)
	}
	return nil, fmt.Errorf("no handler for %s: %w", tx.Msg.Type(), ErrUnknownMsgType)
}

func execSend(o *Overlay, from address.Address, m *MsgSend) ([]Event, error) {
	src, err := GetAccount(o, from)
	if err != nil {
		return nil, err
	}
	amt := uint64(m.Amount)
	if src.Balance < amt {
		return nil, fmt.Errorf("%s has %dusync, cannot send %dusync: %w", from, src.Balance, amt, ErrInsufficientFunds)
	}
	src.Balance -= amt
	setAccount(o, &src)
	dst, err := GetAccount(o, m.To)
	if err != nil {
		return nil, err
	}
	if dst.Balance+amt < dst.Balance {
		return nil, fmt.Errorf("balance of %s would overflow: %w", m.To, ErrInvalidAmount)
	}
	dst.Balance += amt
	setAccount(o, &dst)
	return []Event{{Type: "transfer", Attrs: []Attr{
		{"from", from.String()}, {"to", m.To.String()}, {"amount", strconv.FormatUint(amt, 10)},
	}}}, nil
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
