package devnet

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/validator"
)

// TestConfigureKeepsPorts: a devnet keeps its ports from one start to the
// next (a bookmarked dashboard stays valid); a port another process holds
// is replaced, and Configure says which; --api is kept.
func TestConfigureKeepsPorts(t *testing.T) {
	home := t.TempDir()
	if _, err := Setup(home, Options{}); err != nil {
		t.Fatal(err)
	}
	first, moved, err := Configure(home, "")
	if err != nil || len(moved) != 0 {
		t.Fatalf("Configure: %v, moved %v", err, moved)
	}
	again, moved, err := Configure(home, "")
	if err != nil || len(moved) != 0 || again.API != first.API || again.P2P != first.P2P || again.RPC != first.RPC {
		t.Fatalf("second Configure: api %s p2p %s rpc %s (moved %v, %v); first was %s %s %s", again.API, again.P2P, again.RPC, moved, err, first.API, first.P2P, first.RPC)
	}
	ln, err := net.Listen("tcp", first.API) // another process takes the API's port
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	third, moved, err := Configure(home, "")
	if err != nil || third.API == first.API || len(moved) != 1 || !strings.Contains(moved[0], first.API) || !strings.Contains(moved[0], third.API) {
		t.Fatalf("Configure with the API's port taken: api %s, moved %v, %v", third.API, moved, err)
	}
	if third.P2P != first.P2P {
		t.Errorf("the p2p port moved too: %s, was %s", third.P2P, first.P2P)
	}
	// What the node advertises (to agents' relay sessions and to peers)
	// moves with the API, not left at the old port.
	if third.APIURL() != "http://"+third.API {
		t.Errorf("the node advertises %s, its API moved to %s", third.APIURL(), third.API)
	}
	addr, err := validator.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	if c, _, err := Configure(home, addr); err != nil || c.API != addr || c.APIURL() != "http://"+addr {
		t.Fatalf("Configure with --api %s: %s advertised as %s, %v", addr, c.API, c.APIURL(), err)
	}
	if c, _, err := Configure(home, ""); err != nil || c.API != addr {
		t.Fatalf("the --api address was not kept: %s, %v", c.API, err)
	}
}

// TestResetKeepsUserKeys: a reset lists what it deletes, deletes the
// chain and the devnet's own keys, and keeps the keys the user added and
// the image cache.
func TestResetKeepsUserKeys(t *testing.T) {
	home := t.TempDir()
	if _, err := Setup(home, Options{BlockTime: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	kr, err := keys.Open(filepath.Join(home, "keyring"), keys.WithPassphrase(func(string, bool) ([]byte, error) { return []byte("pass"), nil }))
	if err != nil {
		t.Fatal(err)
	}
	carol, err := kr.Add("carol")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kr.AddUnencrypted("provider-1"); err != nil {
		t.Fatal(err)
	}
	alice, _ := kr.Lookup("alice")
	for _, d := range []string{"provider/oci/images", "provider/provider-1/jobs", "jobs/gpunet-devnet", "examples/wordcount"} {
		os.MkdirAll(filepath.Join(home, d), 0o755)
	}
	os.WriteFile(filepath.Join(home, "provider", "provider-1.json"), []byte("{}"), 0o600)
	if err := updateState(home, func(s *state) { s.ExampleJob = 1 }); err != nil {
		t.Fatal(err)
	}

	p, err := PlanReset(home)
	if err != nil {
		t.Fatal(err)
	}
	var deleted []string
	for _, d := range p.Delete {
		deleted = append(deleted, d.Path)
	}
	for _, want := range []string{"config", "data", "jobs", "examples", "devnet.json", "provider/provider-1", "provider/provider-1.json"} {
		if !slices.Contains(deleted, want) {
			t.Errorf("the plan does not delete %s: %v", want, deleted)
		}
	}
	if !slices.Equal(p.DevKeys, []string{"alice", "bob", "operator", "provider-1"}) || !slices.Equal(p.KeptKeys, []string{"carol"}) || len(p.Kept) != 1 || p.Kept[0].Path != "provider/oci" {
		t.Errorf("plan: dev keys %v, kept keys %v, kept %v", p.DevKeys, p.KeptKeys, p.Kept)
	}

	created, err := Setup(home, Options{Reset: true})
	if err != nil || !created {
		t.Fatalf("reset: created %v, %v", created, err)
	}
	if k, err := kr.Lookup("carol"); err != nil || k.Address != carol.Address || !k.Encrypted() {
		t.Errorf("carol after the reset: %+v, %v; want the same encrypted key", k, err)
	}
	if k, err := kr.Lookup("alice"); err != nil || k.Address == alice.Address {
		t.Errorf("alice after the reset: %v; want a new key", err)
	}
	if _, err := kr.Lookup("provider-1"); err == nil {
		t.Error("provider-1 survived the reset")
	}
	for _, gone := range []string{"jobs", "examples", "provider/provider-1.json", "devnet.json"} {
		if _, err := os.Stat(filepath.Join(home, gone)); err == nil {
			t.Errorf("%s survived the reset", gone)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "provider/oci/images")); err != nil {
		t.Errorf("the image cache did not survive the reset: %v", err)
	}
	if id, _ := ExampleRan(home); id != 0 {
		t.Errorf("the new chain remembers example job %d", id)
	}
}

// TestSetupHardwareChallenges: a new chain's genesis has the default
// hardware challenges, short ones with HWTarget, and none with
// NoHWChallenges (what the e2e tests use unless challenges are their
// subject).
func TestSetupHardwareChallenges(t *testing.T) {
	def := ledger.DefaultParams()
	for _, tc := range []struct {
		name                  string
		o                     Options
		rate, target, allowed uint64
	}{
		{"default", Options{}, def.HWRatePPM, def.HWTargetMillis, def.HWAllowanceMillis},
		{"short", Options{HWTarget: 2 * time.Second, BlockTime: 200 * time.Millisecond}, def.HWRatePPM, 2000, 3000},
		{"none", Options{NoHWChallenges: true}, 0, def.HWTargetMillis, def.HWAllowanceMillis},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			if _, err := Setup(home, tc.o); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(home, "config", "genesis.json"))
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				AppState ledger.Genesis `json:"app_state"`
			}
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			p := doc.AppState.Params
			if p.HWRatePPM != tc.rate || p.HWTargetMillis != tc.target || p.HWAllowanceMillis != tc.allowed {
				t.Errorf("genesis hw_rate_ppm %d, hw_target_millis %d, hw_allowance_millis %d; want %d, %d, %d",
					p.HWRatePPM, p.HWTargetMillis, p.HWAllowanceMillis, tc.rate, tc.target, tc.allowed)
			}
		})
	}
}
