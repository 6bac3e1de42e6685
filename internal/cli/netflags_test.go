package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/validator"
)

func runCLI(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := RunIO(t.Context(), args, strings.NewReader(""), &out, &errOut)
	return code, errOut.String()
}

// TestInitNetFlags: init writes --listen, --external-address,
// --persistent-peers, --seeds and the p2p policy flags into the home's
// config; values that are wrong, or go only with one validator, are usage
// errors naming the flag, and nothing is written.
func TestInitNetFlags(t *testing.T) {
	peer := strings.Repeat("ab", 20) + "@198.51.100.2:26656"
	home := filepath.Join(t.TempDir(), "h")
	if code, stderr := runCLI(t, "init", "--home", home, "--validator-stake", "0", "-o", "json", "--listen", "127.0.0.2", "--external-address", "127.0.0.9",
		"--persistent-peers", peer, "--seeds", peer, "--addr-book-strict=false", "--allow-duplicate-ip"); code != 0 {
		t.Fatalf("init: exit %d: %s", code, stderr)
	}
	c, err := validator.LoadConfig(home)
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := strings.Cut(c.P2P, ":")
	if !strings.HasPrefix(c.API, "127.0.0.2:") || !strings.HasPrefix(c.P2P, "127.0.0.2:") || !strings.HasPrefix(c.RPC, "127.0.0.2:") ||
		c.ExternalAddress != "127.0.0.9:"+port || c.AdvertiseAPI != "http://"+c.API ||
		strings.Join(c.PersistentPeers, ",") != peer || strings.Join(c.Seeds, ",") != peer ||
		c.AddrBookStrict == nil || *c.AddrBookStrict || c.AllowDuplicateIP == nil || !*c.AllowDuplicateIP {
		t.Errorf("config: %+v", c)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "0.0.0.0:26656"}, "--listen"},
		{[]string{"--p2p", "nowhere"}, "--p2p"},
		{[]string{"--rpc", "127.0.0.1:0"}, "--rpc"},
		{[]string{"--external-address", "0.0.0.0"}, "--external-address"},
		{[]string{"--advertise-api", "ftp://x"}, "--advertise-api"},
		{[]string{"--persistent-peers", "198.51.100.2:26656"}, "--persistent-peers"},
		{[]string{"--seeds", "x@y"}, "--seeds"},
		{[]string{"--listen", "0.0.0.0"}, "--advertise-api"},
		{[]string{"--listen", ""}, "--listen is empty"},
		{[]string{"--validators", "2", "--p2p", "0.0.0.0:26656"}, "--validators 1"},
		{[]string{"--join", "http://127.0.0.1:1", "--external-address", "0.0.0.0"}, "--external-address"},
	} {
		h := filepath.Join(t.TempDir(), "h")
		code, stderr := runCLI(t, append([]string{"init", "--home", h, "--validator-stake", "0"}, tc.args...)...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("init %v: exit %d, stderr %q; want an error naming %q", tc.args, code, stderr, tc.want)
		}
		if _, err := os.Stat(h); !os.IsNotExist(err) {
			t.Errorf("init %v wrote %s", tc.args, h)
		}
	}
}

// TestNodeNetFlagsRefused: node's network flags are checked, and each new
// listen address tried, before anything is written or started: a wrong
// value is a usage error naming its flag, an address this machine cannot
// listen on an error naming it, and the config is left as it was.
func TestNodeNetFlagsRefused(t *testing.T) {
	home := t.TempDir()
	if _, err := validator.Init(home, validator.InitOptions{ChainID: "c", Validators: 1, Genesis: ledger.Genesis{Params: ledger.DefaultParams()}, BlockTime: time.Second}); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(home, validator.ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"--p2p", "0.0.0.0"}, ExitUsage, []string{"--p2p", "host:port"}},
		{[]string{"--persistent-peers", "nope"}, ExitUsage, []string{"--persistent-peers", "NODE_ID@HOST:PORT"}},
		{[]string{"--external-address", "[::]:1"}, ExitUsage, []string{"--external-address", "cannot be dialled"}},
		{[]string{"--api", "0.0.0.0:0"}, ExitUsage, []string{"every interface", "--advertise-api"}},
		{[]string{"--p2p", "203.0.113.250:26656"}, 1, []string{"--p2p", "cannot listen on 203.0.113.250:26656", "nothing written"}},
		{[]string{"--listen", "203.0.113.250"}, 1, []string{"--listen", "cannot listen on 203.0.113.250:"}},
	} {
		code, stderr := runCLI(t, append([]string{"node", "--home", home}, tc.args...)...)
		if code != tc.code {
			t.Errorf("node %v: exit %d, want %d: %s", tc.args, code, tc.code, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("node %v: stderr %q does not say %q", tc.args, stderr, w)
			}
		}
		if after, _ := os.ReadFile(filepath.Join(home, validator.ConfigFile)); !bytes.Equal(after, before) {
			t.Fatalf("node %v changed the config:\n%s", tc.args, after)
		}
	}
}
