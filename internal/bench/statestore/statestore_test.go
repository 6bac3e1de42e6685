package statestore

import (
	"fmt"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
)

// TestStores: both kinds keep what was applied, delete what a nil value
// deletes, and iterate in key order within bounds.
func TestStores(t *testing.T) {
	for _, kind := range []string{Pebble, BTree} {
		t.Run(kind, func(t *testing.T) {
			s, err := Open(kind)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var changes []ledger.Change
			for i := range 5 {
				changes = append(changes, ledger.Change{Key: []byte(fmt.Sprintf("k/%d", i)), Value: []byte{byte(i)}})
			}
			if err := s.Apply(changes); err != nil {
				t.Fatal(err)
			}
			if err := s.Apply([]ledger.Change{{Key: []byte("k/2")}}); err != nil {
				t.Fatal(err)
			}
			if got := s.Get([]byte("k/3")); len(got) != 1 || got[0] != 3 {
				t.Errorf("Get(k/3) = %v, want [3]", got)
			}
			if got := s.Get([]byte("k/2")); got != nil {
				t.Errorf("Get(k/2) = %v after its deletion, want nil", got)
			}
			var keys []string
			s.Iterate([]byte("k/1"), []byte("k/4"), func(k, _ []byte) bool { keys = append(keys, string(k)); return true })
			if fmt.Sprint(keys) != "[k/1 k/3]" {
				t.Errorf("Iterate [k/1, k/4) = %v, want [k/1 k/3]", keys)
			}
			if got := CountKeys(s); got != 4 {
				t.Errorf("CountKeys = %d, want 4", got)
			}
		})
	}
	if _, err := Open("memkv"); err == nil {
		t.Error("Open(memkv) accepted")
	}
}
