package jobbench

import (
	"sync"
	"time"
)

// blockClock records when the node reported each block committed.
type blockClock struct {
	mu     sync.Mutex
	cond   *sync.Cond
	at     map[int64]time.Time
	top    int64
	closed bool
}

// newBlockClock records the time each height arrives on heights.
func newBlockClock(heights <-chan int64) *blockClock {
	c := &blockClock{at: map[int64]time.Time{}}
	c.cond = sync.NewCond(&c.mu)
	go func() {
		for h := range heights {
			c.mu.Lock()
			c.at[h], c.top = time.Now(), max(c.top, h)
			c.cond.Broadcast()
			c.mu.Unlock()
		}
		c.mu.Lock()
		c.closed = true
		c.cond.Broadcast()
		c.mu.Unlock()
	}()
	return c
}

// when returns when block h was committed, waiting for its event. Should
// its event have been dropped, the next block's time stands in.
func (c *blockClock) when(h int64) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if t, ok := c.at[h]; ok {
			return t, true
		}
		if c.top > h {
			for n := h + 1; n <= c.top; n++ {
				if t, ok := c.at[n]; ok {
					return t, true
				}
			}
		}
		if c.closed {
			return time.Time{}, false
		}
		c.cond.Wait()
	}
}
