package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/devnet"
)

var (
	hex64  = regexp.MustCompile(`^[0-9A-Fa-f]{64}$`)
	addrRE = regexp.MustCompile(`^gpu1[02-9ac-hj-np-z]{38}$`)
)

// TestCLIContract checks the CLI's JSON output, its exit codes and error
// messages, and devnet's stop, resume (on the same ports) and reset (which
// keeps the keys the user added), against real devnets; two of them run
// side by side.
func TestCLIContract(t *testing.T) {
	parallel(t, weightLight)
	home := t.TempDir()
	dn, info := startDevnet(t, home, "--block-time", "200ms")
	other, otherInfo := startDevnet(t, t.TempDir(), "--block-time", "200ms")
	if !info.Created || info.ChainID != devnet.ChainID || len(info.Keys) != 2 {
		t.Fatalf("devnet JSON line %+v: want created, chain %s, keys alice and bob", info, devnet.ChainID)
	}
	// Genesis balances are readable at once, before block 1 is committed.
	var bal struct {
		Balance uint64 `json:"balance"`
	}
	gpunetJSON(t, &bal, "query", "balance", "alice", "--home", otherInfo.Home)
	if bal.Balance != devnet.DevBalance {
		t.Fatalf("fresh devnet: alice has %d, want %d", bal.Balance, uint64(devnet.DevBalance))
	}
	if otherInfo.API == info.API || otherInfo.addr(t, "alice") == info.addr(t, "alice") {
		t.Fatalf("two devnets share an API or keys: %+v %+v", info, otherInfo)
	}
	waitUntil(t, 30*time.Second, "both devnets at height 2", func() bool {
		return height(t, nodeAPI(t, home, "")) >= 2 && height(t, nodeAPI(t, otherInfo.Home, "")) >= 2
	})
	if status(t, "--home", home).Height < 2 || status(t, "--home", otherInfo.Home).Height < 2 {
		t.Fatal("gpunet status shows a devnet below height 2")
	}
	if code := other.stop(10 * time.Second); code != 0 {
		t.Fatalf("second devnet exited %d on SIGINT, want 0", code)
	}

	t.Run("version", func(t *testing.T) {
		var v map[string]any
		gpunetJSON(t, &v, "version")
		if s, _ := v["version"].(string); s == "" {
			t.Errorf("version JSON %v has no version", v)
		}
	})

	var carol keyJSON
	gpunetJSON(t, &carol, "keys", "add", "carol", "--home", home)
	if carol.Name != "carol" || !addrRE.MatchString(carol.Address) || !carol.Encrypted {
		t.Fatalf("keys add carol: %+v, want an encrypted key", carol)
	}
	// At rest, carol's private key is encrypted with the passphrase.
	if data, err := os.ReadFile(filepath.Join(home, "keyring", "carol.json")); err != nil ||
		strings.Contains(string(data), "private_key_seed") || !strings.Contains(string(data), "BEGIN AGE ENCRYPTED FILE") {
		t.Fatalf("carol's key file (%v) is not encrypted:\n%s", err, data)
	}
	t.Run("keys", func(t *testing.T) {
		var shown keyJSON
		gpunetJSON(t, &shown, "keys", "show", "carol", "--home", home)
		if shown != carol {
			t.Errorf("keys show carol: %+v, keys add said %+v", shown, carol)
		}
		// operator: the key that bonds the devnet's validator.
		if got := keyNames(t, home); !slices.Equal(got, []string{"alice", "bob", "carol", "operator"}) {
			t.Errorf("keys list: %v, want alice bob carol operator", got)
		}
	})

	t.Run("send and query", func(t *testing.T) {
		var tx txJSON
		gpunetJSON(t, &tx, "tx", "send", "carol", "2.5sync", "--from", "alice", "--home", home)
		if tx.Code != 0 || tx.Height <= 0 || !hex64.MatchString(tx.TxHash) {
			t.Errorf("tx send: %+v, want code 0, a height and a 64-hex hash", tx)
		}
		var b balanceJSON
		gpunetJSON(t, &b, "query", "balance", "carol", "--home", home)
		if b.Balance != 2_500_000 || b.Address != carol.Address || int64(b.Height) < tx.Height {
			t.Errorf("query balance carol: %+v, want 2500000 usync at height ≥ %d", b, tx.Height)
		}
		var a accountJSON
		gpunetJSON(t, &a, "query", "account", "alice", "--home", home)
		if a.Sequence != 1 || a.Address != info.addr(t, "alice") || a.Balance != devnet.DevBalance-2_500_000 {
			t.Errorf("query account alice: %+v, want sequence 1 and %d usync", a, devnet.DevBalance-2_500_000)
		}
		st := status(t, "--home", home)
		if st.ChainID != devnet.ChainID || st.Height < tx.Height || !hex64.MatchString(st.AppHash) || !strings.HasPrefix(st.API, "http://") || len(st.Validators) != 1 {
			t.Errorf("status: %+v", st)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		wantFail(t, 2, []string{"positive"}, "tx", "send", "carol", "0", "--from", "alice", "--home", home)
		wantFail(t, 1, []string{"insufficient funds"}, "tx", "send", "carol", "2000000sync", "--from", "alice", "--home", home)
		wantFail(t, 2, []string{"checksum"}, "tx", "send", typo(carol.Address), "1usync", "--from", "alice", "--home", home)
		wantFail(t, 1, []string{"nosuchkey", "keys add"}, "tx", "send", "carol", "1usync", "--from", "nosuchkey", "--home", home)
		wrong := filepath.Join(t.TempDir(), "wrong")
		if err := os.WriteFile(wrong, []byte("not "+e2ePassphrase+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		wantFail(t, 1, []string{"carol.json", "wrong passphrase"}, "tx", "send", "alice", "1usync", "--from", "carol", "--home", home, "--keyring-passphrase-file", wrong)
		wantFail(t, 1, []string{"unreachable"}, "status", "--node", "127.0.0.1:1", "--home", home)
		wantFail(t, 2, []string{"--output"}, "status", "--output", "yaml", "--home", home)
		wantFail(t, 2, []string{`unknown command "runn"`, "did you mean run?"}, "job", "runn", "x", "--home", home)
		wantFail(t, 2, []string{"--sort price-"}, "offers", "-o", "price-", "--home", home)

		// With --output json a rejected tx still prints its result on
		// stdout, and the error goes to stderr as {"error": ...}.
		r := wantFail(t, 1, nil, "tx", "send", "carol", "2000000sync", "--from", "alice", "--home", home, "--output", "json")
		var tx txJSON
		var e struct{ Error string }
		if json.Unmarshal([]byte(r.stdout), &tx) != nil || tx.Code == 0 || tx.Height != 0 || !hex64.MatchString(tx.TxHash) {
			t.Errorf("rejected tx: stdout is not its result:\n%s", r)
		}
		if json.Unmarshal([]byte(r.stderr), &e) != nil || !strings.Contains(e.Error, "insufficient funds") {
			t.Errorf("rejected tx: stderr is not a JSON error:\n%s", r)
		}
		if a := balance(t, "alice", "--home", home); a != devnet.DevBalance-2_500_000 {
			t.Errorf("alice has %d usync after the failed sends, want %d", a, devnet.DevBalance-2_500_000)
		}
	})

	// Stop and resume: same chain, same keys, state kept.
	before := status(t, "--home", home)
	if code := dn.stop(10 * time.Second); code != 0 {
		t.Fatalf("devnet exited %d on SIGINT, want 0", code)
	}
	dn, resumed := startDevnet(t, home, "--block-time", "200ms")
	if resumed.Created || resumed.addr(t, "alice") != info.addr(t, "alice") {
		t.Fatalf("resumed devnet: %+v, want created=false and the same keys as %+v", resumed, info)
	}
	// The same ports: a bookmarked dashboard still works.
	if resumed.API != info.API {
		t.Errorf("resumed devnet serves its API on %s, was on %s", resumed.API, info.API)
	}
	if st := status(t, "--home", home); st.Height < before.Height {
		t.Fatalf("resumed devnet at height %d, was at %d", st.Height, before.Height)
	}
	if b := balance(t, "carol", "--home", home); b != 2_500_000 {
		t.Fatalf("carol has %d usync after the restart, want 2500000", b)
	}
	waitUntil(t, 30*time.Second, "blocks after resuming", func() bool { return height(t, nodeAPI(t, home, "")) >= before.Height+5 })
	last := status(t, "--home", home)
	if last.Height < before.Height+5 {
		t.Fatalf("gpunet status shows height %d after resuming, want %d or more", last.Height, before.Height+5)
	}
	if code := dn.stop(10 * time.Second); code != 0 {
		t.Fatalf("resumed devnet exited %d on SIGINT, want 0", code)
	}

	// Reset: a new chain with new dev keys; carol, a key the user added,
	// is kept, and the reset said what it deleted and kept.
	resetProc, fresh := startDevnet(t, home, "--block-time", "200ms", "--reset")
	if !fresh.Created || fresh.addr(t, "alice") == info.addr(t, "alice") {
		t.Fatalf("reset devnet: %+v, want created=true and new keys", fresh)
	}
	var plan struct {
		Reset *devnet.ResetPlan `json:"reset"`
	}
	if err := json.Unmarshal([]byte(resetProc.stdout.Lines()[0]), &plan); err != nil || plan.Reset == nil ||
		!slices.Equal(plan.Reset.KeptKeys, []string{"carol"}) || !slices.Equal(plan.Reset.DevKeys, []string{"alice", "bob", "operator"}) || len(plan.Reset.Delete) == 0 {
		t.Errorf("reset devnet's plan: %+v (%v), want alice, bob and operator deleted, carol kept, the chain's paths listed", plan.Reset, err)
	}
	st := status(t, "--home", home)
	if st.Height >= last.Height || st.AppHash == last.AppHash {
		t.Errorf("reset devnet at height %d, the old chain was at %d", st.Height, last.Height)
	}
	t.Logf("devnet stopped at height %d, resumed up to %d, reset to %d", before.Height, last.Height, st.Height)
	if got := keyNames(t, home); !slices.Equal(got, []string{"alice", "bob", "carol", "operator"}) {
		t.Errorf("keys list after reset: %v, want alice bob carol operator", got)
	}
	if b := balance(t, carol.Address, "--home", home); b != 0 {
		t.Errorf("carol's address has %d usync on the reset chain, want 0", b)
	}
}

// keyNames returns the names `keys list` shows, in its order.
func keyNames(t testing.TB, home string) []string {
	t.Helper()
	var ks []keyJSON
	gpunetJSON(t, &ks, "keys", "list", "--home", home)
	var names []string
	for _, k := range ks {
		names = append(names, k.Name)
	}
	return names
}

// typo changes one character of an address's data part.
func typo(addr string) string {
	i := len(addr) - 10
	c := byte('q')
	if addr[i] == 'q' {
		c = 'p'
	}
	return addr[:i] + string(c) + addr[i+1:]
}
