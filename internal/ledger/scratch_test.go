package ledger

import (
	"fmt"
	"testing"
)

// TestScratchOverlaysBounded: scratch overlays are emptied after each tx,
// reads included, and one a large tx grew is dropped, not kept for every
// later tx to clear.
func TestScratchOverlaysBounded(t *testing.T) {
	base := NewOverlay(NewMemKV())
	var s scratchOverlays
	small := s.on(0, base)
	small.Set([]byte("k"), []byte("v"))
	small.Get([]byte("read"))
	s.release()
	if got := s.on(0, base); got != small || got.Len() != 0 || len(got.read) != 0 {
		t.Fatalf("after a small tx: overlay kept %v (want the same), %d writes and %d reads (want 0)", got == small, got.Len(), len(got.read))
	}
	large := s.on(1, base)
	for i := range maxScratchKeys + 1 {
		large.Set(fmt.Appendf(nil, "k%d", i), []byte("v"))
	}
	s.release()
	if s.on(1, base) == large {
		t.Fatalf("an overlay with %d writes was kept for reuse (the bound is %d)", maxScratchKeys+1, maxScratchKeys)
	}
	if s.on(0, NewOverlay(NewMemKV())) == small {
		t.Fatal("a scratch overlay was reused on another base")
	}
}
