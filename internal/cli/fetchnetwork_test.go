package cli

import (
	"strings"
	"testing"
)

// TestProviderAllowFetchNetworkFlag: --allow-fetch-network, of provider
// start and of devnet, takes networks only, and says what is wrong with
// one that is not.
func TestProviderAllowFetchNetworkFlag(t *testing.T) {
	s := newStory(t)
	for bad, want := range map[string]string{
		"10.0.0.1/8": "did you mean 10.0.0.0/8",
		"lan":        "e.g. 10.0.0.0/8",
	} {
		for _, cmd := range [][]string{{"provider", "start", "--from", "alice"}, {"devnet"}} {
			r := s.run(append(cmd, "--allow-fetch-network", "127.0.0.0/8", "--allow-fetch-network", bad)...)
			if r.code != ExitUsage || !strings.Contains(r.stderr, "--allow-fetch-network") || !strings.Contains(r.stderr, want) {
				t.Errorf("%s --allow-fetch-network %s: exit %d, stderr %q, want a usage error saying %q", cmd[0], bad, r.code, r.stderr, want)
			}
		}
	}
}
