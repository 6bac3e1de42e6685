package cli

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/gpunet/gpunet/internal/apiserver/apiservertest"
	"github.com/gpunet/gpunet/internal/blob"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
	"github.com/gpunet/gpunet/internal/provider"
	"github.com/gpunet/gpunet/internal/seal"
)

// story is the CLI against the node's real API over an in-memory ledger
// (apiservertest): a home whose keyring holds alice and bob (both funded),
// and one online CPU provider p1 that the test acts as.
type story struct {
	t      *testing.T
	home   string
	url    string
	chain  *apiservertest.Chain
	alice  *keys.Key
	bob    *keys.Key
	prov   lt.Key
	provID *age.X25519Identity
	blobs  *blob.Client
}

func newStory(t *testing.T) *story { t.Helper(); return newStoryWith(t, nil) }

// newStoryWith is newStory with a genesis that edit changes first.
func newStoryWith(t *testing.T, edit func(*ledger.Genesis)) *story {
	t.Helper()
	s := &story{t: t, home: t.TempDir(), prov: lt.NewKey("p1")}
	kr, err := keys.Open(filepath.Join(s.home, "keyring"))
	if err != nil {
		t.Fatal(err)
	}
	if s.alice, err = kr.AddUnencrypted("alice"); err != nil {
		t.Fatal(err)
	}
	if s.bob, err = kr.AddUnencrypted("bob"); err != nil {
		t.Fatal(err)
	}
	if s.provID, err = age.GenerateX25519Identity(); err != nil {
		t.Fatal(err)
	}
	g := lt.Genesis(100_000_000_000, "p1")
	g.Params.LivenessRatePPM = 0
	g.Accounts = append(g.Accounts,
		ledger.GenesisAccount{Address: s.alice.Address, Balance: 100_000_000_000},
		ledger.GenesisAccount{Address: s.bob.Address, Balance: 100_000_000_000})
	if edit != nil {
		edit(&g)
	}
	s.chain = apiservertest.NewChain(t, g)
	pi := lt.ProviderInfo("", 0, 3_600_000) // 3.6 SYNC/h: 1000 usync a second
	pi.EncryptionKey = s.provID.Recipient().String()
	s.chain.Send(s.prov, &ledger.MsgRegisterProvider{ProviderInfo: pi})
	s.chain.Send(s.prov, &ledger.MsgStake{Amount: 10_000_000})
	srv := apiservertest.NewServer(t, s.chain)
	s.url = srv.URL
	s.blobs = blob.NewClient(srv.URL)
	dir := filepath.Join(s.home, "spec")
	os.MkdirAll(dir, 0o755)
	for name, data := range map[string]string{"m.wasm": "\x00asm\x01\x00\x00\x00", "a.txt": "the input\n", "job.yaml": specYAML} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

const specYAML = `name: t
executor: wasm
module: ./m.wasm
inputs:
  - path: /in/a.txt
    from: ./a.txt
outputs: [/out]
resources: {cpu: 1, memory: 256MiB}
max_price: 4
timeout: 10m
verification: none
`

type result struct {
	code           int
	stdout, stderr string
}

// run runs gpunet against the story's node and home.
func (s *story) run(args ...string) result {
	s.t.Helper()
	return s.runIn("", args...)
}

// runIn is run with stdin.
func (s *story) runIn(stdin string, args ...string) result {
	s.t.Helper()
	var out, errOut bytes.Buffer
	args = append(args, "--node", s.url, "--home", s.home)
	code := RunIO(s.t.Context(), args, strings.NewReader(stdin), &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// ok runs gpunet and requires exit 0.
func (s *story) ok(args ...string) string {
	s.t.Helper()
	r := s.run(args...)
	if r.code != 0 {
		s.t.Fatalf("gpunet %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// submit submits the story's spec as alice, grants the key and starts it
// as p1, and relays lines of its log.
func (s *story) startJob(lines ...string) uint64 {
	s.t.Helper()
	var sub struct{ ID uint64 }
	if err := json.Unmarshal([]byte(s.ok("job", "submit", filepath.Join(s.home, "spec", "job.yaml"), "--from", "alice", "-o", "json")), &sub); err != nil || sub.ID == 0 {
		s.t.Fatalf("job submit: %v", err)
	}
	s.ok("job", "status", "1", "--from", "alice") // grants the key as the owner
	s.chain.Send(s.prov, &ledger.MsgStartJob{JobID: sub.ID})
	cl := chainclient.New(s.url)
	for i, l := range lines {
		var b bytes.Buffer
		r, _ := seal.ParseRecipient(s.alice.Recipient())
		enc, _ := seal.Encrypt(&b, r)
		enc.Write([]byte(l + "\n"))
		enc.Close()
		if err := cl.PostLog(s.t.Context(), provSigner(s.prov), sub.ID, uint64(i), b.Bytes()); err != nil {
			s.t.Fatal(err)
		}
	}
	return sub.ID
}

type provSigner lt.Key

func (p provSigner) PrivateKey() ed25519.PrivateKey { return p.Priv }

// TestJobStory is issue 20's "telling the whole story" for a consumer, a
// job at a time: status shows the cost so far and the time left while it
// runs; logs read as JSON lines; another key is told whose job it is;
// cancel says what was charged and refunded and keeps the log; wait exits
// with the outcome; list filters by state; no command needs --from where
// the keyring's owner of the job is the only answer.
func TestJobStory(t *testing.T) {
	s := newStory(t)
	id := s.startJob("step one", "step two")
	if id != 1 {
		t.Fatalf("job id %d, want 1", id)
	}
	s.chain.Send(s.prov, &ledger.MsgSend{To: s.prov.Addr, Amount: 1}) // a block: the job has run a while

	out := s.ok("job", "status", "1")
	for _, want := range []string{"owned by alice (" + s.alice.Address.String() + ")", "running:  ", " left\n", "so far:   0.00", "running\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("job status of a running job lacks %q:\n%s", want, out)
		}
	}
	var st struct {
		State    string
		Progress *jobProgress
	}
	if err := json.Unmarshal([]byte(s.ok("job", "status", "1", "-o", "json")), &st); err != nil || st.Progress == nil || st.Progress.ElapsedSeconds == 0 || st.Progress.CostSoFar != 1000*st.Progress.ElapsedSeconds || st.Progress.LeftSeconds != 600-st.Progress.ElapsedSeconds {
		t.Errorf("job status -o json: %+v (%v), want progress at 1000 usync a second of a 10m timeout", st.Progress, err)
	}

	// The log as JSON lines, without following.
	out = s.ok("job", "logs", "1", "--follow=false", "-o", "json")
	sc := bufio.NewScanner(strings.NewReader(out))
	var lines []string
	for sc.Scan() {
		var l struct {
			Job  uint64 `json:"job"`
			Line string `json:"line"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Job != 1 {
			t.Fatalf("job logs -o json: line %q is not a log line object (%v)", sc.Text(), err)
		}
		lines = append(lines, l.Line)
	}
	if strings.Join(lines, "|") != "step one|step two" {
		t.Errorf("job logs -o json lines %q", lines)
	}

	// bob is told whose job it is, not that a decryption failed.
	r := s.run("job", "logs", "1", "--from", "bob")
	if want := "job 1 belongs to " + s.alice.Address.String() + " (alice), not to bob (" + s.bob.Address.String() + ")"; r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("job logs 1 --from bob: exit %d, stderr %q; want %q", r.code, r.stderr, want)
	}
	if r := s.run("job", "cancel", "1", "--from", "bob"); r.code != 1 || !strings.Contains(r.stderr, "belongs to") {
		t.Errorf("job cancel 1 --from bob: exit %d, %q", r.code, r.stderr)
	}

	// cancel without --from: alice, the owner, is the only key that can.
	out = s.ok("job", "cancel", "1")
	m := regexp.MustCompile(`job 1 cancelled: charged ([0-9.]+) SYNC \(([0-9.]+) SYNC to providers, [0-9.]+ SYNC fee\), refunded ([0-9.]+) SYNC`).FindStringSubmatch(out)
	if m == nil || m[1] == "0" || m[2] == "0" || m[3] == "0" || !strings.Contains(out, s.prov.Addr.String()+" was paid "+m[2]+" SYNC") {
		t.Errorf("job cancel:\n%s\nwant what it charged (non-zero) and refunded", out)
	}
	// The partial log stays readable (the node's relay, or what cancel
	// kept once the node forgets it).
	if out := s.ok("job", "logs", "1"); out != "step one\nstep two\n" {
		t.Errorf("job logs of the cancelled job: %q", out)
	}
	if b, _ := os.ReadFile(filepath.Join(s.home, "jobs", lt.ChainID, "1.log")); string(b) != "step one\nstep two\n" {
		t.Errorf("cancel kept %q of the log", b)
	}

	// wait exits with the outcome; list filters by state.
	if r := s.run("job", "wait", "1"); r.code != ExitJobCancelled {
		t.Errorf("job wait on a cancelled job: exit %d, want %d\n%s", r.code, ExitJobCancelled, r.stderr)
	}
	id2 := s.startJob()
	res := &ledger.JobResult{OutputBlob: "sha256:" + strings.Repeat("0", 64), MeteredSeconds: 1, ExitCode: 3, Failed: true, Reason: "exit code 3"}
	s.chain.Send(s.prov, &ledger.MsgCommitResult{JobID: id2, MeteredSeconds: 1, Result: res})
	if r := s.run("job", "wait", "2"); r.code != ExitJobFailed {
		t.Errorf("job wait on a failed job: exit %d, want %d\n%s%s", r.code, ExitJobFailed, r.stdout, r.stderr)
	}
	var list []struct {
		ID    uint64
		State string
	}
	if err := json.Unmarshal([]byte(s.ok("job", "list", "--state", "cancelled", "-o", "json")), &list); err != nil || len(list) != 1 || list[0].ID != 1 {
		t.Errorf("job list --state cancelled: %+v (%v), want job 1 alone", list, err)
	}
	if out := s.ok("job", "list", "--state", "running"); !strings.Contains(out, "No jobs.") {
		t.Errorf("job list --state running:\n%s", out)
	}
	if out := s.ok("job", "list"); !strings.Contains(out, "alice") || !strings.Contains(out, "failed") || !strings.Contains(out, "cancelled") {
		t.Errorf("job list (everyone's, owners by name):\n%s", out)
	}
	if r := s.run("job", "list", "--state", "runing"); r.code != ExitUsage || !strings.Contains(r.stderr, "running") {
		t.Errorf("job list --state runing: exit %d, %q", r.code, r.stderr)
	}
}

// TestConventions: -o is --output everywhere (offers sorts with --sort);
// unknown subcommands fail; spec errors in JSON carry field, line and
// column; - reads a spec from stdin; tx send says what it sent; signing
// commands infer the only key and otherwise name the keys.
func TestConventions(t *testing.T) {
	s := newStory(t)

	for _, args := range [][]string{{"job", "runn", "x"}, {"query", "balanse", "alice"}, {"keys", "ad", "x"}} {
		r := s.run(args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, "unknown command") {
			t.Errorf("gpunet %v: exit %d, stderr %q; want a usage error", args, r.code, r.stderr)
		}
	}
	if r := s.run("job", "runn", "x"); !strings.Contains(r.stderr, "did you mean run?") {
		t.Errorf("job runn: no suggestion: %q", r.stderr)
	}
	if r := s.run("job"); r.code != 0 || !strings.Contains(r.stdout, "Available Commands") {
		t.Errorf("gpunet job alone: exit %d, want its help", r.code)
	}

	var offers []map[string]any
	if err := json.Unmarshal([]byte(s.ok("offers", "--sort", "price-", "-o", "json")), &offers); err != nil || len(offers) != 1 {
		t.Errorf("offers --sort price- -o json: %v, %d offers", err, len(offers))
	}
	if r := s.run("offers", "-o", "price-"); r.code != ExitUsage || !strings.Contains(r.stderr, "--sort price-") {
		t.Errorf("offers -o price-: exit %d, %q; want a hint to --sort", r.code, r.stderr)
	}
	out := s.ok("offers", "--all")
	for _, want := range []string{"ONLINE", "PROVIDER", "none (cpu)", "64 GiB", " 1 "} {
		if !strings.Contains(out, want) {
			t.Errorf("offers --all lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(s.ok("offers"), "ONLINE") {
		t.Error("offers without --all has an ONLINE column")
	}

	// A spec error as JSON: each problem's field, line and column.
	bad := "name: t\nexecutor: wasm\nmodule: ./m.wasm\nresources: {cpu: -1}\nmax_price: 1\ntimeout: 1m\n"
	r := s.runIn(bad, "quote", "-", "-o", "json")
	var e struct {
		Error    string
		Problems []specProblem
	}
	if err := json.Unmarshal([]byte(r.stderr), &e); r.code != ExitUsage || err != nil || len(e.Problems) == 0 {
		t.Fatalf("quote - with a bad spec: exit %d, stderr %q (%v)", r.code, r.stderr, err)
	}
	found := false
	for _, p := range e.Problems {
		if p.Field == "resources.cpu" && p.Line == 4 && p.Column > 0 && p.Message != "" {
			found = true
		}
	}
	if !found {
		t.Errorf("problems %+v: want resources.cpu at line 4 with a column", e.Problems)
	}

	// - reads the spec from stdin, its paths relative to the working
	// directory.
	t.Chdir(filepath.Join(s.home, "spec"))
	if out := s.runIn(specYAML, "quote", "-"); out.code != 0 || !strings.Contains(out.stdout, `1 provider(s) can run "t" now`) {
		t.Errorf("quote - : exit %d\n%s%s", out.code, out.stdout, out.stderr)
	}
	var sub struct{ ID uint64 }
	if err := json.Unmarshal([]byte(s.runIn(specYAML, "job", "submit", "-", "--from", "alice", "-o", "json").stdout), &sub); err != nil || sub.ID == 0 {
		t.Errorf("job submit - : %v", err)
	}

	// tx send says what it sent; with several keys --from is asked for by
	// name.
	out = s.ok("tx", "send", "bob", "1usync", "--from", "alice")
	if want := "sent 0.000001 SYNC (1 usync) from alice (" + s.alice.Address.String() + ") to bob (" + s.bob.Address.String() + ")"; !strings.Contains(out, want) {
		t.Errorf("tx send bob 1usync:\n%s\nwant %q", out, want)
	}
	var sent struct {
		TxHash string `json:"tx_hash"`
		Amount uint64 `json:"amount"`
		To     string `json:"to"`
	}
	if err := json.Unmarshal([]byte(s.ok("tx", "send", "bob", "2sync", "--from", "alice", "-o", "json")), &sent); err != nil || sent.Amount != 2_000_000 || sent.To != s.bob.Address.String() || sent.TxHash == "" {
		t.Errorf("tx send -o json: %+v, %v", sent, err)
	}
	if r := s.run("tx", "send", "bob", "1usync"); r.code != ExitUsage || !strings.Contains(r.stderr, "--from KEY (keys in") || !strings.Contains(r.stderr, "alice, bob") {
		t.Errorf("tx send without --from, two keys: exit %d, %q", r.code, r.stderr)
	}
	out = s.ok("query", "balance", "bob")
	if !strings.HasPrefix(out, "bob ("+s.bob.Address.String()+"): 100002.000001 SYNC (100002000001 usync) at height ") {
		t.Errorf("query balance bob: %q", out)
	}
}

// TestProviderStatusInfersTheAgent: provider status without --from shows
// the only agent that ran from the home, or the only one besides a
// devnet's own (provider-N); otherwise it names them.
func TestProviderStatusInfersTheAgent(t *testing.T) {
	s := newStory(t)
	write := func(name string) {
		st := provider.Status{Name: name, Address: s.prov.Addr.String()}
		b, _ := json.Marshal(st)
		os.MkdirAll(filepath.Join(s.home, "provider"), 0o755)
		if err := os.WriteFile(provider.StatusFile(s.home, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if r := s.run("provider", "status"); r.code != 1 || !strings.Contains(r.stderr, "provider start --from KEY") {
		t.Errorf("no agent: exit %d, %q", r.code, r.stderr)
	}
	for _, n := range []string{"provider-1", "provider-2", "mybox"} {
		write(n)
	}
	if out := s.ok("provider", "status"); !strings.HasPrefix(out, "provider mybox (") || !strings.Contains(out, "online:      true") {
		t.Errorf("provider status beside a devnet's agents:\n%s", out)
	}
	write("other")
	if r := s.run("provider", "status"); r.code != ExitUsage || !strings.Contains(r.stderr, "mybox, other") || !strings.Contains(r.stderr, "--from KEY") {
		t.Errorf("two agents of one's own: exit %d, %q", r.code, r.stderr)
	}
}

// TestEveryJSONIsJSON: with -o json, what each command prints on stdout
// is JSON (one value, or one per line for a stream), whatever it says on
// stderr and whatever its exit code.
func TestEveryJSONIsJSON(t *testing.T) {
	s := newStory(t)
	s.startJob("a line")
	spec := filepath.Join(s.home, "spec", "job.yaml")
	for _, args := range [][]string{
		{"version"}, {"status"}, {"keys", "list"}, {"keys", "show", "alice"},
		{"query", "balance", "alice"}, {"query", "account", "alice"}, {"query", "providers"}, {"query", "provider", s.prov.Addr.String()},
		{"offers"}, {"offers", "--all", "--sort", "price-"}, {"quote", spec},
		{"tx", "send", "bob", "1usync", "--from", "alice"}, {"tx", "send", "bob", "1000000000sync", "--from", "alice"},
		{"job", "submit", spec, "--from", "alice"}, {"job", "status", "1"}, {"job", "list"}, {"job", "list", "--state", "running"},
		{"query", "delegations", "alice"}, {"query", "validator", "alice"}, {"stake", "delegate", "bob", "1sync", "--from", "alice"},
		{"job", "logs", "1", "--follow=false"}, {"job", "cancel", "1"}, {"job", "logs", "1"}, {"job", "wait", "1"}, {"job", "get", "1"},
	} {
		r := s.run(append(args, "-o", "json")...)
		if strings.TrimSpace(r.stdout) == "" && r.code == 0 {
			t.Errorf("gpunet %s -o json printed nothing", strings.Join(args, " "))
		}
		dec := json.NewDecoder(strings.NewReader(r.stdout))
		for dec.More() {
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Errorf("gpunet %s -o json: stdout is not JSON (%v):\n%s", strings.Join(args, " "), err, r.stdout)
				break
			}
		}
		if r.code != 0 {
			var e struct{ Error string }
			if err := json.Unmarshal([]byte(r.stderr), &e); err != nil || e.Error == "" {
				t.Errorf("gpunet %s -o json: exit %d and stderr is not a JSON error: %q", strings.Join(args, " "), r.code, r.stderr)
			}
		}
	}
}

// TestProviderClaimRewards: claim-rewards sends claim_rewards for the key;
// an account with no verified work in an ended epoch is told so.
func TestProviderClaimRewards(t *testing.T) {
	s := newStory(t)
	r := s.run("provider", "claim-rewards", "--from", "bob")
	if r.code == 0 || !strings.Contains(r.stderr, "no rewards to claim") {
		t.Errorf("claim-rewards without work: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestProviderImageCacheFlag: --image-cache is a size of at least 1 GiB.
func TestProviderImageCacheFlag(t *testing.T) {
	s := newStory(t)
	for _, bad := range []string{"10MiB", "lots", "-5GiB"} {
		r := s.run("provider", "start", "--from", "alice", "--image-cache", bad)
		if r.code != ExitUsage || !strings.Contains(r.stderr, "--image-cache "+bad) {
			t.Errorf("--image-cache %s: exit %d, stderr %q", bad, r.code, r.stderr)
		}
	}
}

// TestProviderCheckpointGraceFlag: --checkpoint-grace is bounded.
func TestProviderCheckpointGraceFlag(t *testing.T) {
	s := newStory(t)
	for _, bad := range []string{"0s", "11m"} {
		r := s.run("provider", "start", "--from", "alice", "--checkpoint-grace", bad)
		if r.code != ExitUsage || !strings.Contains(r.stderr, "--checkpoint-grace "+bad) {
			t.Errorf("--checkpoint-grace %s: exit %d, stderr %q", bad, r.code, r.stderr)
		}
	}
}

// TestProviderFaultJobArgsFlag: --fault-job-args is bounded in number.
func TestProviderFaultJobArgsFlag(t *testing.T) {
	s := newStory(t)
	args := []string{"provider", "start", "--from", "alice"}
	for range maxFaultJobArgs + 1 {
		args = append(args, "--fault-job-args", "x")
	}
	r := s.run(args...)
	if r.code != ExitUsage || !strings.Contains(r.stderr, "--fault-job-args given 65 times") {
		t.Errorf("--fault-job-args 65 times: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestProviderGangAddressFlag: --gang-address must be one unicast IP.
func TestProviderGangAddressFlag(t *testing.T) {
	s := newStory(t)
	for _, bad := range []string{"example.com", "0.0.0.0", "224.0.0.1", "10.0.0.1:51820"} {
		r := s.run("provider", "start", "--from", "alice", "--gang-address", bad)
		if r.code != ExitUsage || !strings.Contains(r.stderr, "--gang-address") {
			t.Errorf("--gang-address %s: exit %d, stderr %q", bad, r.code, r.stderr)
		}
	}
}
