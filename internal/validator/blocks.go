package validator

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	abci "github.com/cometbft/cometbft/abci/types"
	cmttypes "github.com/cometbft/cometbft/types"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// executedHeight is the newest block whose results are stored: the app's
// last committed one. (CometBFT stores a block before executing it.)
func (n *Node) executedHeight() int64 {
	kv, release := n.app.View()
	defer release()
	return min(n.cmt.BlockStore().Height(), int64(ledger.Height(kv)))
}

// Blocks returns up to limit block headers from height down (from the
// latest executed when height is 0), newest first.
func (n *Node) Blocks(ctx context.Context, height int64, limit int) ([]apiwire.BlockHeader, error) {
	bs := n.cmt.BlockStore()
	top := n.executedHeight()
	if height <= 0 || height > top {
		height = top
	}
	base := max(bs.Base(), 1)
	out := []apiwire.BlockHeader{}
	for h := height; h >= base && len(out) < limit; h-- {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m := bs.LoadBlockMeta(h)
		if m == nil {
			continue
		}
		out = append(out, headerOf(m))
	}
	return out, nil
}

func headerOf(m *cmttypes.BlockMeta) apiwire.BlockHeader {
	return apiwire.BlockHeader{
		Height:   m.Header.Height,
		Time:     m.Header.Time.UTC(),
		Hash:     m.BlockID.Hash.String(),
		Proposer: m.Header.ProposerAddress.String(),
		NumTxs:   m.NumTxs,
		Size:     m.BlockSize,
		AppHash:  strings.ToUpper(m.Header.AppHash.String()),
	}
}

// Block returns block height with its txs, their results and the block's
// events; nil when the node does not have it (or has not executed it yet).
// The recent blocks asked for are kept decoded (an executed block never
// changes, and lists of txs and the node's stats read the newest ones over
// and over), so callers share them and must not modify them.
func (n *Node) Block(ctx context.Context, height int64) (*apiwire.Block, error) {
	if height > n.executedHeight() {
		return nil, nil
	}
	if b := n.blocks.get(height); b != nil {
		return b, nil
	}
	b, err := n.loadBlock(ctx, height)
	if b != nil {
		n.blocks.put(b)
	}
	return b, err
}

// blockCacheSize is how many decoded blocks a node keeps: a page of 100
// txs spans a few blocks.
const blockCacheSize = 64

// blockCache keeps the blocks read last, by height.
type blockCache struct {
	mu    sync.Mutex
	byH   map[int64]*apiwire.Block
	order []int64 // oldest put first
}

func (c *blockCache) get(h int64) *apiwire.Block {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byH[h]
}

func (c *blockCache) put(b *apiwire.Block) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byH == nil {
		c.byH = map[int64]*apiwire.Block{}
	}
	if _, ok := c.byH[b.Height]; ok {
		return
	}
	if len(c.order) >= blockCacheSize {
		delete(c.byH, c.order[0])
		c.order = c.order[1:]
	}
	c.byH[b.Height] = b
	c.order = append(c.order, b.Height)
}

func (n *Node) loadBlock(ctx context.Context, height int64) (*apiwire.Block, error) {
	b, m := n.cmt.BlockStore().LoadBlock(height)
	if b == nil || m == nil {
		return nil, nil
	}
	out := &apiwire.Block{BlockHeader: headerOf(m), Txs: []apiwire.BlockTx{}, Events: []ledger.Event{}}
	res, err := n.rpc.BlockResults(ctx, &height)
	if err != nil {
		return nil, fmt.Errorf("results of block %d: %w", height, err)
	}
	for i, raw := range b.Txs {
		t := apiwire.BlockTx{Hash: fmt.Sprintf("%X", raw.Hash()), Index: i, Size: len(raw)}
		if tx, err := ledger.DecodeTx(raw); err == nil {
			t.Type, t.Sender, t.Sequence, t.Fee = tx.Msg.Type().String(), tx.Sender().String(), tx.Sequence, tx.Fee
			t.Msg, _ = json.Marshal(tx.Msg)
		} else {
			t.Type = "undecodable"
		}
		if i < len(res.TxResults) {
			r := res.TxResults[i]
			t.Code, t.Codespace, t.Log, t.Events = r.Code, r.Codespace, r.Log, ledgerEvents(r.Events)
		}
		out.Txs = append(out.Txs, t)
	}
	if evs := ledgerEvents(res.FinalizeBlockEvents); evs != nil {
		out.Events = evs
	}
	return out, nil
}

func ledgerEvents(evs []abci.Event) []ledger.Event {
	var out []ledger.Event
	for _, e := range evs {
		ev := ledger.Event{Type: e.Type}
		for _, a := range e.Attributes {
			ev.Attrs = append(ev.Attrs, ledger.Attr{Key: a.Key, Value: a.Value})
		}
		out = append(out, ev)
	}
	return out
}
