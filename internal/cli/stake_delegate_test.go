package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// delegationStory is a story with two genesis validators: v1 (its
// operator's key in the home's keyring as "v1") and one operated by p1,
// the story's provider, so that p1's address is both a validator's
// operator and a provider.
func delegationStory(t *testing.T) *story {
	t.Helper()
	s := newStoryWith(t, func(g *ledger.Genesis) {
		g.Validators = []ledger.GenesisValidator{lt.GenesisValidator("v1", 30_000_000), lt.GenesisValidator("p1", 30_000_000)}
		g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: lt.NewKey("v1").Addr, Balance: 100_000_000})
	})
	kr, err := keys.Open(s.home + "/keyring")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Import("v1", lt.NewKey("v1").Priv.Seed(), ""); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *story) delegations(who string) apiwire.DelegatorBody {
	s.t.Helper()
	var d apiwire.DelegatorBody
	if err := json.Unmarshal([]byte(s.ok("query", "delegations", who, "-o", "json")), &d); err != nil {
		s.t.Fatal(err)
	}
	return d
}

// TestStakeDelegate: stake delegate finds what its target is from the
// chain (a validator's operator, a provider) and refuses an address that
// is neither or both unless --to says which; the amounts take units;
// query delegations and query validator show what was delegated;
// undelegate and redelegate infer the source from the delegator's own
// delegations; commission takes a percentage; a delegator with no stake of
// its own votes.
func TestStakeDelegate(t *testing.T) {
	s := delegationStory(t)
	v1, p1 := lt.NewKey("v1").Addr.String(), s.prov.Addr.String()

	out := s.ok("stake", "delegate", "v1", "5sync", "--from", "alice")
	if want := "delegated 5 SYNC (5000000 usync) from alice (" + s.alice.Address.String() + ") to validator v1 (" + v1 + ")"; !strings.Contains(out, want) {
		t.Errorf("stake delegate v1 5sync:\n%s\nwant %q", out, want)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"stake", "delegate", p1, "1sync", "--from", "alice"}, ExitUsage, "both operates a validator and is a registered provider: say which with --to validator or --to provider"},
		{[]string{"stake", "delegate", "bob", "1sync", "--from", "alice"}, ExitUsage, "neither operates a validator nor is a registered provider"},
		{[]string{"stake", "delegate", "v1", "5", "--from", "alice"}, ExitUsage, `amount "5" `},
		{[]string{"stake", "delegate", "v1", "1sync", "--from", "alice", "--to", "validatr"}, ExitUsage, `--to "validatr": want validator or provider`},
		{[]string{"stake", "commission", "150%", "--from", "v1"}, ExitUsage, `rate "150%"`},
		{[]string{"stake", "commission", "5%", "--from", "alice"}, ExitUsage, "neither operates a validator nor is a registered provider"},
	} {
		r := s.run(c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("gpunet %s: exit %d, stderr %q; want exit %d and %q", strings.Join(c.args, " "), r.code, r.stderr, c.code, c.want)
		}
	}
	var res delegateResult
	if err := json.Unmarshal([]byte(s.ok("stake", "delegate", p1, "3sync", "--to", "provider", "--from", "alice", "-o", "json")), &res); err != nil ||
		res.Target == nil || res.Target.Kind != ledger.TargetProvider || res.Amount != 3_000_000 || res.Delegator != s.alice.Address.String() || res.Code != 0 {
		t.Errorf("stake delegate p1 --to provider -o json: %+v, %v", res, err)
	}

	d := s.delegations("alice")
	if len(d.Delegations) != 2 || d.Delegated != 8_000_000 {
		t.Fatalf("query delegations alice: %+v; want 5sync to v1 and 3sync to p1", d)
	}
	out = s.ok("query", "delegations", "alice")
	for _, want := range []string{"validator v1 (" + v1 + ")", "provider " + p1, "5 SYNC (5000000 usync)", "delegated 8 SYNC"} {
		if !strings.Contains(out, want) {
			t.Errorf("query delegations alice lacks %q:\n%s", want, out)
		}
	}
	var v apiwire.ValidatorBody
	if err := json.Unmarshal([]byte(s.ok("query", "validator", "v1", "-o", "json")), &v); err != nil || v.Bond != 30_000_000 || v.Delegated != 5_000_000 || v.Total != 35_000_000 || len(v.Delegations) != 1 {
		t.Errorf("query validator v1: %+v, %v", v, err)
	}
	if out := s.ok("query", "validator", v.Address.String()); !strings.Contains(out, "delegated   5 SYNC (5000000 usync) by 1 delegator(s)") {
		t.Errorf("query validator by consensus address:\n%s", out)
	}
	if r := s.run("query", "validator", "bob"); r.code == 0 || !strings.Contains(r.stderr, "operates no validator") {
		t.Errorf("query validator bob: exit %d, %q", r.code, r.stderr)
	}

	// p1 is ambiguous to the chain, but alice delegated to it as a
	// provider only: undelegate and redelegate take that.
	s.ok("stake", "undelegate", p1, "1sync", "--from", "alice")
	out = s.ok("stake", "redelegate", "v1", p1, "2sync", "--to", "provider", "--from", "alice")
	if !strings.Contains(out, "redelegated 2 SYNC (2000000 usync) of alice") || !strings.Contains(out, "from validator v1") || !strings.Contains(out, "to provider "+p1) {
		t.Errorf("stake redelegate:\n%s", out)
	}
	d = s.delegations("alice")
	if d.Delegated != 7_000_000 || d.UnbondingTotal != 1_000_000 || len(d.Unbonding) != 1 || len(d.Redelegations) != 1 {
		t.Errorf("after undelegate and redelegate: %+v; want 3sync to v1 and 4sync to p1, 1sync unbonding, one redelegation", d)
	}
	if out := s.ok("query", "delegations", "alice"); !strings.Contains(out, "UNBONDING FROM") || !strings.Contains(out, "REDELEGATED FROM") {
		t.Errorf("query delegations shows no entries:\n%s", out)
	}

	// The operator sets its commission.
	if out := s.ok("stake", "commission", "5%", "--from", "v1"); !strings.Contains(out, "commission of validator v1 ("+v1+") set to 5%") {
		t.Errorf("stake commission 5%%:\n%s", out)
	}
	if err := json.Unmarshal([]byte(s.ok("query", "validator", "v1", "-o", "json")), &v); err != nil || v.Pool.CommissionPPM != 50_000 {
		t.Errorf("commission after stake commission 5%%: %+v, %v", v.Pool, err)
	}

	// alice has no stake of her own: she votes with her delegations.
	s.ok("gov", "propose", "text", "hello", "--from", "alice")
	if out := s.ok("gov", "vote", "1", "yes", "--from", "alice"); !strings.Contains(out, "(code 0)") {
		t.Errorf("gov vote by a delegator:\n%s", out)
	}
}

func TestParseRatePPM(t *testing.T) {
	for in, want := range map[string]uint64{"5%": 50_000, "0.05": 50_000, "50000ppm": 50_000, "0": 0, "100%": 1_000_000, "12.5%": 125_000, "0.0001%": 1} {
		if got, err := parseRatePPM(in); err != nil || got != want {
			t.Errorf("parseRatePPM(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "%", "abc", "-1%", "101%", "1.5", "0.00001%", "1e2ppm"} {
		if _, err := parseRatePPM(in); err == nil {
			t.Errorf("parseRatePPM(%q): no error", in)
		}
	}
	for ppm, want := range map[uint64]string{50_000: "5%", 125_000: "12.5%", 0: "0%", 1: "0.0001%", 1_000_000: "100%"} {
		if got := formatPPM(ppm); got != want {
			t.Errorf("formatPPM(%d) = %q, want %q", ppm, got, want)
		}
	}
}
