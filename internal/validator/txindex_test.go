package validator

import (
	"errors"
	"testing"

	dbm "github.com/cometbft/cometbft-db"
)

// TestGuardedDBAfterClose: once closed, the tx indexer's store refuses
// writes, even through a batch made before, instead of reaching Pebble.
func TestGuardedDBAfterClose(t *testing.T) {
	db, err := dbm.NewPebbleDB("guarded", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g := GuardDB(db)
	if err := g.Set([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	early := g.NewBatch()
	if err := early.Set([]byte("k2"), []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := early.WriteSync(); !errors.Is(err, errStoreClosed) {
		t.Errorf("WriteSync of a batch made before Close: %v", err)
	}
	early.Close()
	if err := g.SetSync([]byte("k"), []byte("v")); !errors.Is(err, errStoreClosed) {
		t.Errorf("SetSync after Close: %v", err)
	}
	if _, err := g.Get([]byte("k")); !errors.Is(err, errStoreClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	late := g.NewBatch()
	if err := late.WriteSync(); !errors.Is(err, errStoreClosed) {
		t.Errorf("WriteSync of a batch made after Close: %v", err)
	}
	late.Close()
}
