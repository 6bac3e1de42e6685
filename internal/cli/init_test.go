package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
)

// TestHWChallengesFlag: init --hw-challenges=false writes a genesis
// without hardware challenges (params.hw_rate_ppm 0), over what
// --genesis-params says; the default keeps them. With --join the genesis
// is the network's, so the flag is refused, as it is beside devnet's
// --hw-challenge-time.
func TestHWChallengesFlag(t *testing.T) {
	run := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := RunIO(t.Context(), args, strings.NewReader(""), &out, &errOut)
		return code, errOut.String()
	}
	params := filepath.Join(t.TempDir(), "params.json")
	if err := os.WriteFile(params, []byte(`{"hw_rate_ppm": 5000}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want uint64
	}{
		{nil, ledger.DefaultParams().HWRatePPM},
		{[]string{"--hw-challenges=false"}, 0},
		{[]string{"--genesis-params", params}, 5000},
		{[]string{"--genesis-params", params, "--hw-challenges=false"}, 0},
	} {
		home := t.TempDir()
		if code, stderr := run(append([]string{"init", "--home", home, "--validator-stake", "0", "-o", "json"}, tc.args...)...); code != 0 {
			t.Fatalf("init %v: exit %d: %s", tc.args, code, stderr)
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
		if got := doc.AppState.Params.HWRatePPM; got != tc.want {
			t.Errorf("init %v: genesis hw_rate_ppm %d, want %d", tc.args, got, tc.want)
		}
	}
	for _, args := range [][]string{
		{"init", "--join", "http://127.0.0.1:1", "--hw-challenges=false"},
		{"devnet", "--hw-challenges=false", "--hw-challenge-time", "2s"},
	} {
		code, stderr := run(append(args, "--home", t.TempDir())...)
		if code != ExitUsage || !strings.Contains(stderr, "--hw-challenge") {
			t.Errorf("gpunet %v: exit %d, stderr %q; want a usage error naming the flag", args, code, stderr)
		}
	}
}
