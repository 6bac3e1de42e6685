package wasm

import (
	"sync"

	"github.com/tetratelabs/wazero/experimental"
)

// memoryCap enforces a job's memory limit on wazero. wazero asks it for
// the guest's linear memory at instantiation and on every memory.grow; it
// refuses sizes over the limit (memory.grow then returns -1 to the guest,
// as when the module's own maximum is reached) and remembers that it did,
// which is how the executor tells "out of memory" from any other failure.
type memoryCap struct {
	limit uint64
	// onGrow, if set, is told each new peak (outside the lock).
	onGrow func(peak uint64)

	mu      sync.Mutex
	refused bool
	peak    uint64
}

func (m *memoryCap) Allocate(capacity, max uint64) experimental.LinearMemory {
	return &linearMemory{cap: m}
}

func (m *memoryCap) wasRefused() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refused
}

func (m *memoryCap) peakBytes() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peak
}

type linearMemory struct {
	cap *memoryCap
	buf []byte
}

func (l *linearMemory) Reallocate(size uint64) []byte {
	m := l.cap
	m.mu.Lock()
	if size > m.limit {
		m.refused = true
		m.mu.Unlock()
		return nil
	}
	grew := size > m.peak
	m.peak = max(m.peak, size)
	m.mu.Unlock()
	if grew && m.onGrow != nil {
		m.onGrow(size)
	}
	if size <= uint64(cap(l.buf)) {
		l.buf = l.buf[:size] // never exposed before, so still zero
		return l.buf
	}
	// Grow geometrically, but never reserve past the limit.
	c := min(max(size, 2*uint64(cap(l.buf))), m.limit)
	b := make([]byte, size, c)
	copy(b, l.buf)
	l.buf = b
	return b
}

func (l *linearMemory) Free() { l.buf = nil }
