package validator

import (
	"testing"

	"github.com/gpunet/gpunet/internal/apiwire"
)

// TestBlockCacheKeepsTheLatest: the cache answers for the blocks put last
// and forgets the oldest beyond its size.
func TestBlockCacheKeepsTheLatest(t *testing.T) {
	var c blockCache
	for h := int64(1); h <= blockCacheSize+10; h++ {
		c.put(&apiwire.Block{BlockHeader: apiwire.BlockHeader{Height: h}})
	}
	c.put(&apiwire.Block{BlockHeader: apiwire.BlockHeader{Height: blockCacheSize + 10, NumTxs: 7}}) // again: kept as first put
	for h := int64(1); h <= blockCacheSize+10; h++ {
		b := c.get(h)
		if kept := h > 10; kept != (b != nil) {
			t.Errorf("block %d: got %v, kept %v", h, b, kept)
		}
		if b != nil && (b.Height != h || b.NumTxs != 0) {
			t.Errorf("block %d: got %+v", h, b.BlockHeader)
		}
	}
	if len(c.order) != blockCacheSize || len(c.byH) != blockCacheSize {
		t.Errorf("%d heights in order, %d in the map; want %d", len(c.order), len(c.byH), blockCacheSize)
	}
}
