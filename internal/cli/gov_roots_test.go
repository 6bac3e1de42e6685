package cli

import (
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
)

// TestGovProposeAttestRoots: gov propose attest-roots submits an
// attest_roots proposal with the roots in lower case; a malformed hash is
// a usage error naming the flag, and the ledger's refusal of a root it
// trusts already is shown.
func TestGovProposeAttestRoots(t *testing.T) {
	s := newStory(t)
	add := strings.ToUpper("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	s.ok("gov", "propose", "attest-roots", "--add", add, "--remove", ledger.DefaultAttestRoots[0], "--from", "alice")
	kv, release := s.chain.View()
	p, ok, err := ledger.GetProposal(kv, 1)
	release()
	if err != nil || !ok || p.Kind != ledger.ProposalAttestRoots || len(p.AddRoots) != 1 || p.AddRoots[0] != strings.ToLower(add) ||
		len(p.RemoveRoots) != 1 || p.RemoveRoots[0] != ledger.DefaultAttestRoots[0] {
		t.Fatalf("proposal 1: %v %v %+v", err, ok, p)
	}
	if r := s.run("gov", "propose", "attest-roots", "--add", "abc", "--from", "alice"); r.code != 2 || !strings.Contains(r.stderr, `--add "abc": want the SHA-256`) {
		t.Errorf("a short hash: exit %d: %s", r.code, r.stderr)
	}
	if r := s.run("gov", "propose", "attest-roots", "--from", "alice"); r.code != 2 || !strings.Contains(r.stderr, "needs --add or --remove") {
		t.Errorf("no roots: exit %d: %s", r.code, r.stderr)
	}
	if r := s.run("gov", "propose", "attest-roots", "--add", ledger.DefaultAttestRoots[1], "--from", "alice"); r.code == 0 || !strings.Contains(r.stderr, "a root of trust of this chain already") {
		t.Errorf("a trusted root: exit %d: %s", r.code, r.stderr)
	}
}
