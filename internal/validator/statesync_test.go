package validator

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// TestStateSyncConfig: the state sync settings survive a save and a load,
// reach CometBFT's config, and bad ones are refused naming the field.
func TestStateSyncConfig(t *testing.T) {
	home := t.TempDir()
	if _, err := Init(home, InitOptions{ChainID: "ss", Validators: 1, Genesis: lt.Genesis(5, "alice"), BlockTime: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(home)
	if err != nil {
		t.Fatal(err)
	}
	if c.SnapshotInterval != 20 {
		t.Errorf("init wrote snapshot_interval %d for 200ms blocks, want 20", c.SnapshotInterval)
	}
	if b, _ := os.ReadFile(filepath.Join(home, ConfigFile)); strings.Contains(string(b), "state_sync") {
		t.Errorf("a validator's config mentions state_sync:\n%s", b)
	}
	hash := strings.Repeat("AB", 32)
	seed := strings.Repeat("ab", 20) + "@127.0.0.1:5"
	c.Seeds = []string{seed}
	c.StateSync = StateSyncConfig{Enable: true, RPCServers: []string{"127.0.0.1:7", "http://127.0.0.1:8"}, TrustHeight: 40, TrustHash: hash}
	if err := SaveConfig(home, c); err != nil {
		t.Fatal(err)
	}
	c, err = LoadConfig(home)
	if err != nil {
		t.Fatal(err)
	}
	cfg := cmtConfig(home, c)
	if err := cfg.ValidateBasic(); err != nil {
		t.Fatal(err)
	}
	ss := cfg.StateSync
	if !ss.Enable || ss.TrustHeight != 40 || ss.TrustHash != hash || ss.TrustPeriod != DefaultTrustPeriod ||
		strings.Join(ss.RPCServers, ",") != "http://127.0.0.1:7,http://127.0.0.1:8" || cfg.P2P.Seeds != seed || !cfg.P2P.PexReactor {
		t.Fatalf("cometbft config: statesync %+v seeds %q pex %v", ss, cfg.P2P.Seeds, cfg.P2P.PexReactor)
	}

	for _, tc := range []struct {
		name string
		f    func(s *StateSyncConfig)
		want string
	}{
		{"one rpc server", func(s *StateSyncConfig) { s.RPCServers = s.RPCServers[:1] }, "rpc_servers"},
		{"bad rpc server", func(s *StateSyncConfig) { s.RPCServers[0] = "nowhere" }, "rpc_servers"},
		{"no trust height", func(s *StateSyncConfig) { s.TrustHeight = 0 }, "trust_height"},
		{"short hash", func(s *StateSyncConfig) { s.TrustHash = "AB" }, "trust_hash"},
		{"negative period", func(s *StateSyncConfig) { s.TrustPeriod = -1 }, "trust_period"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := StateSyncConfig{Enable: true, RPCServers: []string{"127.0.0.1:7", "127.0.0.1:8"}, TrustHeight: 40, TrustHash: hash}
			tc.f(&s)
			err := s.validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

func TestDefaultSnapshotInterval(t *testing.T) {
	for _, tc := range []struct {
		bt   time.Duration
		want uint64
	}{{time.Second, 100}, {5 * time.Second, 100}, {200 * time.Millisecond, 20}, {100 * time.Millisecond, 40}, {500 * time.Millisecond, 10}, {10 * time.Millisecond, 100}} {
		if got := DefaultSnapshotInterval(tc.bt); got != tc.want {
			t.Errorf("DefaultSnapshotInterval(%s) = %d, want %d", tc.bt, got, tc.want)
		}
	}
}
