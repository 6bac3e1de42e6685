package validator

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

func TestInitMultiValidator(t *testing.T) {
	home := t.TempDir()
	homes, err := Init(home, InitOptions{ChainID: "multi", Validators: 4, Genesis: lt.Genesis(5, "alice"), BlockTime: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(homes) != 4 {
		t.Fatalf("got %d homes", len(homes))
	}
	ports := map[string]bool{}
	var genesis string
	for i, h := range homes {
		if want := filepath.Join(home, "node"+string(rune('0'+i))); h != want {
			t.Errorf("home %d = %s, want %s", i, h, want)
		}
		c, err := LoadConfig(h)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.PersistentPeers) != 3 {
			t.Errorf("%s has %d peers, want 3", h, len(c.PersistentPeers))
		}
		if c.AdvertiseAPI != "http://"+c.API || len(c.PeerAPIs) != 3 || slices.Contains(c.PeerAPIs, c.AdvertiseAPI) {
			t.Errorf("%s advertises %q and knows the APIs %q, want its own and the 3 others'", h, c.AdvertiseAPI, c.PeerAPIs)
		}
		for _, a := range []string{c.API, c.P2P, c.RPC} {
			if !strings.HasPrefix(a, "127.0.0.1:") || ports[a] {
				t.Errorf("address %s is not a distinct loopback address", a)
			}
			ports[a] = true
		}
		g, err := os.ReadFile(filepath.Join(h, "config/genesis.json"))
		if err != nil {
			t.Fatal(err)
		}
		if genesis == "" {
			genesis = string(g)
		} else if string(g) != genesis {
			t.Errorf("%s has a different genesis", h)
		}
	}
	if _, err := Init(home, InitOptions{ChainID: "multi", Validators: 4}); err == nil || !strings.Contains(err.Error(), "already initialised") {
		t.Fatalf("second init: %v", err)
	}
}

func TestLoadConfigRejectsBadFiles(t *testing.T) {
	good := "chain_id: c\nmoniker: m\napi: 127.0.0.1:1\np2p: 127.0.0.1:2\nblock_time: 1s\ncheck_invariants: false\n"
	for _, tc := range []struct{ name, body, want string }{
		{"unknown field", good + "bogus: 1\n", "bogus"},
		{"bad duration", strings.Replace(good, "1s", "soon", 1), "block_time"},
		{"block time too small", strings.Replace(good, "1s", "1ms", 1), "out of range"},
		{"bad address", strings.Replace(good, "127.0.0.1:1", "localhost", 1), "api"},
		{"no chain id", strings.Replace(good, "chain_id: c", "chain_id: \"\"", 1), "chain_id"},
		{"not yaml", "{{{", ""},
		{"advertise_api not a URL", good + "advertise_api: 127.0.0.1:1\n", "advertise_api"},
		{"peer_apis not URLs", good + "peer_apis: [ftp://x]\n", "peer_apis"},
		{"blob bound below -1", good + "blob_unreferenced_max_bytes: -5\n", "blob_unreferenced_max_bytes"},
		{"blob account cap below -1", good + "blob_account_max_bytes: -2\n", "blob_account_max_bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			os.MkdirAll(filepath.Join(home, "config"), 0o700)
			os.WriteFile(filepath.Join(home, ConfigFile), []byte(tc.body), 0o600)
			_, err := LoadConfig(home)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), ConfigFile) {
				t.Fatalf("got %v, want an error naming the file and %q", err, tc.want)
			}
		})
	}
	if _, err := LoadConfig(t.TempDir()); err == nil || !strings.Contains(err.Error(), "gpunet init") {
		t.Fatalf("missing config: %v", err)
	}
}

func FuzzLoadConfig(f *testing.F) {
	f.Add([]byte("chain_id: c\nmoniker: m\napi: 127.0.0.1:1\np2p: 127.0.0.1:2\nblock_time: 1s\ncheck_invariants: false\n"))
	f.Add([]byte("block_time: [1]"))
	f.Fuzz(func(t *testing.T, body []byte) {
		home := t.TempDir()
		os.MkdirAll(filepath.Join(home, "config"), 0o700)
		os.WriteFile(filepath.Join(home, ConfigFile), body, 0o600)
		c, err := LoadConfig(home)
		if err == nil {
			if err := c.Validate(); err != nil {
				t.Fatalf("loaded an invalid config: %v", err)
			}
		}
	})
}

// TestInitFailureRemovesWhatItMade: an init that fails part-way (here:
// no operator key) leaves no half-written homes behind, and keeps a
// directory that was there before.
func TestInitFailureRemovesWhatItMade(t *testing.T) {
	parent := t.TempDir()
	for _, home := range []string{filepath.Join(parent, "new"), parent} {
		_, err := Init(home, InitOptions{ChainID: "fail", Validators: 2, Genesis: lt.Genesis(5, "alice"), ValidatorStake: 100_000_000,
			OperatorKey: func(string) (address.Address, error) { return address.Address{}, errors.New("no passphrase") }})
		if err == nil || !strings.Contains(err.Error(), "no passphrase") {
			t.Fatalf("init %s: %v, want the operator key's error", home, err)
		}
		for _, d := range []string{filepath.Join(home, "node0"), filepath.Join(home, "node1")} {
			if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s left behind after a failed init (%v)", d, err)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(parent, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a home init created is left behind")
	}
	if _, err := os.Stat(parent); err != nil {
		t.Errorf("the directory that was there before is gone: %v", err)
	}
}
