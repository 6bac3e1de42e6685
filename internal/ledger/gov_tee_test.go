package ledger_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/attest"
	"github.com/gpunet/gpunet/internal/attest/attesttest"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// rootsProposal proposes adding and removing roots of trust.
func rootsProposal(add, remove []string) *ledger.MsgSubmitProposal {
	return &ledger.MsgSubmitProposal{Kind: ledger.ProposalAttestRoots, Title: "roots of trust", AddRoots: add, RemoveRoots: remove, Deposit: ledger.Amount(10 * sync)}
}

// passRoots submits p as alice, three of four validators vote yes, and
// the tally's block applies it; it returns the proposal as decided.
func passRoots(t *testing.T, c *govChain, p *ledger.MsgSubmitProposal) *ledger.Proposal {
	t.Helper()
	r := c.mustDo(t, "alice", p)
	id := ledger.LastProposalID(c.KV)
	if !govHasEvent(r.Events, "proposal_voting") {
		t.Fatalf("proposal %d not voting at once: %v", id, r.Events)
	}
	for _, v := range []string{"v1", "v2", "v3"} {
		c.mustDo(t, v, vote(id, ledger.VoteYes))
	}
	c.until(t, int64(c.proposal(t, id).VotingEnd)+1)
	return c.proposal(t, id)
}

// TestGovAttestRoots: a passed attest_roots proposal changes which TEE
// evidence the chain accepts. The chain trusts only the test TDX root, so
// the test SNP evidence is refused; once a proposal adds the SNP root it
// is accepted; once another removes it, refused again.
func TestGovAttestRoots(t *testing.T) {
	tdxRoot, snpRoot := attesttest.RootHashes()[0], attesttest.RootHashes()[1]
	g := govGenesis()
	g.Params.LivenessRatePPM = 0
	g.AttestRoots = []string{tdxRoot}
	c := newGovChain(t, g)
	c.L.Attest = attest.LedgerVerifier
	bob := lt.NewKey("bob")
	c.mustDo(t, "bob", &ledger.MsgRegisterProvider{ProviderInfo: lt.ProviderInfo("", 0, 36_000)})
	c.mustDo(t, "bob", &ledger.MsgStake{Amount: 10_000_000})
	tryAttest := func() ledger.TxResult {
		t.Helper()
		c.mustDo(t, "bob", &ledger.MsgRequestAttestation{})
		p, _, _ := ledger.GetProvider(c.KV, bob.Addr)
		return c.do(t, "bob", evidenceMsg(t, attest.KindSEVSNP, p.TEE.Nonce[:], p.EncryptionKey))
	}
	if r := tryAttest(); !errors.Is(r.Err, ledger.ErrAttestation) || !strings.Contains(r.Err.Error(), "is not a trusted root") {
		t.Fatalf("SNP evidence before the SNP root is trusted: %v, want refused for its roots", r.Err)
	}

	p := passRoots(t, c, rootsProposal([]string{snpRoot}, nil))
	if p.Status != ledger.ProposalPassed || !slices.Equal(p.AddRoots, []string{snpRoot}) {
		t.Fatalf("add proposal: %s %+v", p.Status, p)
	}
	if got := ledger.GetAttestRoots(c.KV); !slices.Equal(got, []string{tdxRoot, snpRoot}) {
		t.Fatalf("roots after the add passed: %v, want the TDX then the SNP root", got)
	}
	if r := tryAttest(); r.Err != nil {
		t.Fatalf("SNP evidence after its root was added: %v", r.Err)
	}

	p = passRoots(t, c, rootsProposal(nil, []string{snpRoot}))
	if p.Status != ledger.ProposalPassed {
		t.Fatalf("remove proposal: %s %+v", p.Status, p.Wait)
	}
	if got := ledger.GetAttestRoots(c.KV); !slices.Equal(got, []string{tdxRoot}) {
		t.Fatalf("roots after the removal passed: %v, want the TDX root only", got)
	}
	if r := tryAttest(); !errors.Is(r.Err, ledger.ErrAttestation) {
		t.Fatalf("SNP evidence after its root was removed: %v, want refused", r.Err)
	}

	// Passed, but no longer applicable when tallied: both proposals
	// remove the TDX root; the second finds it gone.
	c.mustDo(t, "alice", rootsProposal(nil, []string{tdxRoot}))
	c.mustDo(t, "bob", rootsProposal(nil, []string{tdxRoot}))
	first, second := ledger.LastProposalID(c.KV)-1, ledger.LastProposalID(c.KV)
	for _, v := range []string{"v1", "v2", "v3"} {
		c.ApplyBlock(t, c.tx(v, vote(first, ledger.VoteYes)))
		c.ApplyBlock(t, c.tx(v, vote(second, ledger.VoteYes)))
	}
	c.until(t, int64(c.proposal(t, second).VotingEnd)+1)
	if a, b := c.proposal(t, first), c.proposal(t, second); a.Status != ledger.ProposalPassed || b.Status != ledger.ProposalFailed ||
		b.Wait == nil || b.Wait.Cause != ledger.NotExecutedRoots {
		t.Fatalf("two removals of one root: %s, %s (%+v); want passed, then failed attest_roots_invalid", a.Status, b.Status, b.Wait)
	}
	if got := ledger.GetAttestRoots(c.KV); len(got) != 0 {
		t.Fatalf("roots after the TDX root's removal: %v, want none", got)
	}
}

// TestGovAttestRootsRefused: an attest_roots proposal's roots are
// checked when it is submitted, each refusal naming what is wrong.
func TestGovAttestRootsRefused(t *testing.T) {
	root := attesttest.RootHashes()[0]
	c := newGovChain(t, govGenesis())
	tooMany := make([]string, 65)
	for i := range tooMany {
		tooMany[i] = strings.Repeat("0", 62) + string("0123456789abcdef"[i/16]) + string("0123456789abcdef"[i%16])
	}
	for _, tc := range []struct {
		name string
		msg  *ledger.MsgSubmitProposal
		want string
	}{
		{"nothing", rootsProposal(nil, nil), "adds or removes at least one root"},
		{"not hex", rootsProposal([]string{strings.Repeat("zz", 32)}, nil), "add_roots[0]"},
		{"upper case", rootsProposal([]string{strings.ToUpper(root)}, nil), "64 lower-case hex digits"},
		{"31 bytes", rootsProposal(nil, []string{root[:62]}), "remove_roots[0]"},
		{"twice", rootsProposal([]string{root}, []string{root}), "listed twice"},
		{"too many", rootsProposal(tooMany, nil), "at most 64 roots each"},
		{"roots on a text proposal", &ledger.MsgSubmitProposal{Kind: ledger.ProposalText, Title: "t", AddRoots: []string{root}, Deposit: ledger.Amount(10 * sync)}, "changes no roots of trust"},
		{"add one trusted already", rootsProposal([]string{ledger.DefaultAttestRoots[0]}, nil), "a root of trust of this chain already"},
		{"remove one not trusted", rootsProposal(nil, []string{root}), "is not a root of trust of this chain"},
	} {
		r := c.do(t, "alice", tc.msg)
		if !errors.Is(r.Err, ledger.ErrInvalidMsg) || !strings.Contains(r.Err.Error(), tc.want) {
			t.Errorf("%s: %v, want invalid: %q", tc.name, r.Err, tc.want)
		}
	}
}
