package validator

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
)

// TestDamagedStoresAreClearErrors garbles each of a stopped node's
// CometBFT files in turn and starts it again: each start must fail with an
// error naming the file and what to do, never a panic (a garbled
// write-ahead log made CometBFT panic on the heights it left; a garbled
// genesis gave a JSON error naming no file).
func TestDamagedStoresAreClearErrors(t *testing.T) {
	base := t.TempDir()
	if _, err := Init(base, InitOptions{ChainID: "c", Validators: 1, Genesis: ledger.Genesis{Params: ledger.DefaultParams()}, BlockTime: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	n, err := Start(t.Context(), base, StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); n.Height() < 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no blocks")
		}
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		path string // under the home: a file, or a directory whose files are garbled
		only string // garble only the files whose names start with this
		want string // the file the error must name, under the home
	}{
		{"block store log", "data/blockstore.db", "000", "data/blockstore.db"},
		{"block store manifest", "data/blockstore.db", "MANIFEST", "data/blockstore.db"},
		{"block store all", "data/blockstore.db", "", "data/blockstore.db"},
		{"state log", "data/state.db", "000", "data/state.db"},
		{"state manifest", "data/state.db", "MANIFEST", "data/state.db"},
		{"genesis", "config/genesis.json", "", "config/genesis.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			if err := os.CopyFS(home, os.DirFS(base)); err != nil {
				t.Fatal(err)
			}
			garble(t, filepath.Join(home, tc.path), tc.only)
			var n *Node
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("start panicked: %v", r)
					}
				}()
				n, err = Start(t.Context(), home, StartOptions{})
			}()
			if err == nil {
				n.Stop()
				t.Fatal("a node with a garbled store started")
			}
			msg := err.Error()
			for _, want := range []string{filepath.Join(home, tc.want), "gpunet devnet --reset"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not name %q", msg, want)
				}
			}
		})
	}
}

// garble flips every byte of path, or of each file under it whose name
// starts with only.
func garble(t *testing.T, path, only string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || !strings.HasPrefix(d.Name(), only) {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i := range b {
			b[i] ^= 0x5a
		}
		n++
		return os.WriteFile(p, b, 0o600)
	})
	if err != nil || n == 0 {
		t.Fatalf("garble %s (%q): %d files, %v", path, only, n, err)
	}
}
