package openaigw

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/examples/tinylm/model"
	"github.com/gpunet/gpunet/examples/tinylm/server"
	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/receipt"
)

const checkChain = "gpunet-check-test"

// receiptReplicas serves service 1 of model tinylm with a replica on each
// of n providers: the tinylm server behind a receipt.Proxy signed with the
// provider's key, as an agent runs it; the providers in faulty answer
// every completion wrongly.
type receiptReplicas struct {
	keys  []ed25519.PrivateKey
	provs []address.Address
	addrs []string
	wrong map[address.Address]bool
	chain string // the chain its receipts are signed for; "": checkChain
}

// serve serves h on loopback until the test ends.
func serve(t testing.TB, h http.Handler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}

func newReceiptReplicas(t testing.TB, n int, faulty ...int) *receiptReplicas {
	return newReceiptReplicasOf(t, make([]http.Handler, n), faulty...)
}

// newReceiptReplicasOf is newReceiptReplicas with a model server per
// replica (nil: tinylm).
func newReceiptReplicasOf(t testing.TB, servers []http.Handler, faulty ...int) *receiptReplicas {
	tiny := serve(t, server.New(model.Default(), server.Options{}))
	rr := &receiptReplicas{wrong: map[address.Address]bool{}}
	for i, h := range servers {
		addr := tiny
		if h != nil {
			addr = serve(t, h)
		}
		rr.addrs = append(rr.addrs, addr)
		seed := sha256.Sum256(fmt.Appendf(nil, "replica %d", i))
		k := ed25519.NewKeyFromSeed(seed[:])
		rr.keys = append(rr.keys, k)
		p := address.FromPubKey(k.Public().(ed25519.PublicKey))
		rr.provs = append(rr.provs, p)
		if slices.Contains(faulty, i) {
			rr.wrong[p] = true
		}
	}
	return rr
}

func (rr *receiptReplicas) dial(ctx context.Context, svc *ledger.Service, p address.Address, port uint64, cred string) (net.Conn, error) {
	i := slices.Index(rr.provs, p)
	if i < 0 {
		return nil, fmt.Errorf("no replica on %s", p)
	}
	var d net.Dialer
	back, err := d.DialContext(ctx, "tcp", rr.addrs[i])
	if err != nil {
		return nil, err
	}
	px := &receipt.Proxy{Signer: &receipt.Signer{Key: rr.keys[i], ChainID: cmp.Or(rr.chain, checkChain)}, Service: svc.ID}
	if rr.wrong[p] {
		px.Wrong = func() bool { return true }
	}
	near, far := net.Pipe()
	go px.Serve(far, back)
	return near, nil
}

// checkGateway is a gateway over rr's replicas of a service whose answers
// are declared bit-exact (as tinylm's are) that checks deterministic
// requests at ratePPM and collects its disputes.
func checkGateway(t testing.TB, rr *receiptReplicas, ratePPM uint64) (*Gateway, string, func() []*ledger.MsgServiceDispute) {
	return checkGatewayOf(t, rr, ratePPM, true)
}

// checkGatewayOf is checkGateway for a service whose openai.exact is exact.
func checkGatewayOf(t testing.TB, rr *receiptReplicas, ratePPM uint64, exact bool) (*Gateway, string, func() []*ledger.MsgServiceDispute) {
	return checkGatewayFor(t, rr, "tinylm", checkChain, ratePPM, func(svc *ledger.Service, _ *CheckOptions) {
		svc.Spec.OpenAI.Exact = exact
	})
}

// checkGatewayFor is the gateway of the check tests: over rr's replicas of
// a service of model on chain, checking deterministic requests at ratePPM
// and collecting its disputes; edit, when not nil, changes the service
// and the check options first.
func checkGatewayFor(t testing.TB, rr *receiptReplicas, model, chain string, ratePPM uint64, edit func(*ledger.Service, *CheckOptions)) (*Gateway, string, func() []*ledger.MsgServiceDispute) {
	var mu sync.Mutex
	var disputes []*ledger.MsgServiceDispute
	svc := service(1, model, true, 1, rr.provs...)
	checks := &CheckOptions{ChainID: chain, RatePPM: func() uint64 { return ratePPM }, MaxInFlight: 64, Keep: 1 << 20,
		Dispute: func(ctx context.Context, m *ledger.MsgServiceDispute) error {
			mu.Lock()
			defer mu.Unlock()
			disputes = append(disputes, m)
			return nil
		}}
	if edit != nil {
		edit(svc, checks)
	}
	g := New(Options{Directory: &fakeDir{svcs: []*ledger.Service{svc}}, Authorized: authorized, Dial: rr.dial, Log: slog.New(slog.DiscardHandler), Checks: checks})
	t.Cleanup(g.Close)
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return g, srv.URL, func() []*ledger.MsgServiceDispute {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(disputes)
	}
}

func ask(t testing.TB, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url+PathCompletions, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	return resp
}

// waitChecks waits for n checks to be recorded.
func waitChecks(t *testing.T, g *Gateway, n int) []Check {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(g.Checks()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d checks recorded after 20 s, want %d", len(g.Checks()), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return g.Checks()
}

// TestChecksCatchAWrongReplica: with three replicas of three providers,
// one answering wrongly, every checked request that reaches the faulty
// one (first or as the copy) ends in a dispute that names it the odd one,
// that the ledger's checks take (ValidateBasic, and each receipt's
// signature on the chain), and no dispute ever names an honest one. The
// client gets each answer's receipt, which matches what it got. Requests
// that are not deterministic are never checked.
func TestChecksCatchAWrongReplica(t *testing.T) {
	rr := newReceiptReplicas(t, 3, 2)
	faulty := rr.provs[2]
	g, url, disputes := checkGateway(t, rr, 1_000_000)
	const n = 12
	for i := range n {
		stream := ""
		if i%2 == 1 {
			stream = `,"stream":true,"stream_options":{"include_usage":true}`
		}
		resp := ask(t, url, fmt.Sprintf(`{"model":"tinylm","messages":[{"role":"user","content":"the cat %d"}],"seed":%d,"max_tokens":8%s}`, i, i, stream))
		enc := resp.Header.Get(receipt.Header)
		if enc == "" {
			enc = resp.Trailer.Get(receipt.Header)
		}
		r, err := receipt.Decode(enc)
		if err != nil {
			t.Fatalf("request %d: the client got no receipt: %q: %v", i, enc, err)
		}
		if err := r.Verify(checkChain); err != nil || r.Provider.String() != resp.Header.Get(HeaderProvider) {
			t.Fatalf("request %d: receipt of %s (answered by %s): %v", i, r.Provider, resp.Header.Get(HeaderProvider), err)
		}
		waitChecks(t, g, i+1)
	}
	ask(t, url, `{"model":"tinylm","messages":[{"role":"user","content":"no seed"}],"temperature":0.9}`)
	time.Sleep(50 * time.Millisecond)
	checks := g.Checks()
	if len(checks) != n {
		t.Errorf("%d checks, want %d: a request that is not deterministic was checked", len(checks), n)
	}
	involved := 0
	for i, ch := range checks {
		has := slices.ContainsFunc(ch.Receipts, func(r ledger.ServiceReceipt) bool { return r.Provider == faulty })
		switch {
		case ch.Verdict == CheckFailed || ch.Verdict == CheckSplit:
			t.Errorf("check %d: %s (%s)", i, ch.Verdict, ch.Err)
		case has && ch.Verdict != CheckDisputed:
			t.Errorf("check %d: the faulty replica took part and the verdict is %s", i, ch.Verdict)
		case !has && ch.Verdict != CheckAgreed:
			t.Errorf("check %d: two honest replicas, verdict %s", i, ch.Verdict)
		}
		if has {
			involved++
		}
	}
	ds := disputes()
	if len(ds) != involved || involved == 0 {
		t.Fatalf("%d disputes, %d checks involved the faulty replica", len(ds), involved)
	}
	for _, m := range ds {
		if err := m.ValidateBasic(); err != nil {
			t.Fatal(err)
		}
		odd := 0
		for i := range m.Receipts {
			if err := m.Receipts[i].Verify(checkChain); err != nil {
				t.Fatal(err)
			}
			if m.Receipts[i].Provider == faulty {
				odd++
			}
		}
		if odd != 1 {
			t.Errorf("a dispute without the faulty provider: %+v", m.Receipts)
		}
	}
}

// TestChecksHonestNeverDisputed: honest replicas only, every request
// checked: all agree, no dispute.
func TestChecksHonestNeverDisputed(t *testing.T) {
	rr := newReceiptReplicas(t, 3)
	g, url, disputes := checkGateway(t, rr, 1_000_000)
	for i := range 10 {
		ask(t, url, fmt.Sprintf(`{"model":"tinylm","messages":[{"role":"user","content":"a dog %d"}],"temperature":0,"max_tokens":6}`, i))
	}
	for _, ch := range waitChecks(t, g, 10) {
		if ch.Verdict != CheckAgreed {
			t.Errorf("verdict %s (%s)", ch.Verdict, ch.Err)
		}
	}
	if d := disputes(); len(d) != 0 {
		t.Errorf("%d disputes among honest replicas", len(d))
	}
}

// BenchmarkCheckedLatency: the client's latency of a non-streamed
// completion through the gateway to tinylm behind the receipt proxy, with
// no checks and with every request checked (the check runs after the
// answer, beside the next requests) and at the default rate: p50 in ms
// of each, and their ratios.
//
//	go test -run XXX -bench CheckedLatency -benchtime 300x ./internal/openaigw/
func BenchmarkCheckedLatency(b *testing.B) {
	rr := newReceiptReplicas(b, 3)
	_, plain, _ := checkGateway(b, rr, 0)
	_, checked, _ := checkGateway(b, rr, 1_000_000)
	sg, sampled, _ := checkGateway(b, rr, ledger.DefaultParams().ServiceCheckRatePPM)
	p50 := map[string]float64{}
	for _, tc := range []struct{ name, url string }{{"unchecked", plain}, {"checked", checked}, {"default-rate", sampled}, {"unchecked-again", plain}} {
		b.Run(tc.name, func(b *testing.B) {
			var d []time.Duration
			i := 0
			for b.Loop() {
				i++
				start := time.Now()
				ask(b, tc.url, fmt.Sprintf(`{"model":"tinylm","messages":[{"role":"user","content":"the cat %d"}],"seed":%d,"max_tokens":16}`, i, i))
				d = append(d, time.Since(start))
			}
			sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
			p50[tc.name] = float64(d[len(d)/2].Microseconds()) / 1000
			b.ReportMetric(p50[tc.name], "p50-ms")
			if tc.url == sampled {
				// The verification's extra work: answers asked of other
				// replicas per answer served.
				time.Sleep(100 * time.Millisecond)
				extra := 0
				for _, ch := range sg.Checks() {
					extra += len(ch.Receipts) - 1
				}
				b.ReportMetric(float64(extra)/float64(len(d)), "extra-answers/req")
			}
		})
	}
	if p50["unchecked"] > 0 {
		b.Logf("p50: unchecked %.3f ms, every request checked %.3f ms, at the default rate %.3f ms, again unchecked %.3f ms: checked/unchecked %.3f, default-rate/unchecked %.3f",
			p50["unchecked"], p50["checked"], p50["default-rate"], p50["unchecked-again"], p50["checked"]/p50["unchecked"], p50["default-rate"]/p50["unchecked"])
	}
}

// logprobModel answers every completion with the same two tokens, whole
// or streamed as the request asks, with their log-probabilities when it
// asks for them (logprobs, and top_logprobs alternatives per token, most
// likely first), as a model server does: second is its second token, lp
// that token's log-probability, and alt the alternatives it rates for it.
// It keeps the log-probabilities each request asked for.
type logprobModel struct {
	second string
	lp     float64
	alt    map[string]float64
	mu     sync.Mutex
	asked  []string // "logprobs=B top=N" of each request
}

func newLogprobModel(second string, lp float64, alt map[string]float64) *logprobModel {
	return &logprobModel{second: second, lp: lp, alt: alt}
}

func (m *logprobModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Logprobs    bool `json:"logprobs"`
		TopLogprobs int  `json:"top_logprobs"`
		Stream      bool `json:"stream"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.asked = append(m.asked, fmt.Sprintf("logprobs=%v top=%d", req.Logprobs, req.TopLogprobs))
	m.mu.Unlock()
	type alt struct {
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
	}
	logprobs := func(tok string, lp float64, alts map[string]float64) string {
		if !req.Logprobs {
			return "null"
		}
		var top []alt
		for t, l := range alts {
			top = append(top, alt{t, l})
		}
		slices.SortFunc(top, func(a, b alt) int { return cmp.Compare(b.Logprob, a.Logprob) })
		top = top[:min(len(top), req.TopLogprobs)]
		b, _ := json.Marshal(map[string]any{"content": []map[string]any{{"token": tok, "logprob": lp, "top_logprobs": append([]alt{}, top...)}}})
		return string(b)
	}
	first := logprobs("the", -0.1, map[string]float64{"the": -0.1})
	second := logprobs(m.second, m.lp, m.alt)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		both := first
		if req.Logprobs {
			// The two tokens' entries in one list.
			both = strings.TrimSuffix(first, "]}") + "," + strings.TrimPrefix(second, `{"content":[`)
		}
		fmt.Fprintf(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"the%s"},"logprobs":%s,"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`,
			m.second, both)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprintf(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"the\"},\"logprobs\":%s,\"finish_reason\":null}]}\n\n", first)
	fmt.Fprintf(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"logprobs\":%s,\"finish_reason\":\"stop\"}]}\n\n", m.second, second)
	fmt.Fprint(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n")
}

// TestChecksTolerateNearTies: answers that differ where two tokens were
// nearly tied (each replica rates the other's token within the declared
// tolerance of its own, and agrees on the tokens before) are tolerated,
// never disputed: hardware-level float differences. An answer that
// diverges where one token clearly led is disputed.
func TestChecksTolerateNearTies(t *testing.T) {
	honest := newLogprobModel(" cat", -0.500, map[string]float64{" cat": -0.500, " dog": -0.503})
	tie := newLogprobModel(" dog", -0.502, map[string]float64{" dog": -0.502, " cat": -0.505})
	wrong := newLogprobModel(" bird", -0.2, map[string]float64{" bird": -0.2})
	body := `{"model":"tinylm","messages":[{"role":"user","content":"x %d"}],"temperature":0,"logprobs":true,"top_logprobs":2}`
	for _, tc := range []struct {
		name     string
		servers  []http.Handler
		odd      int
		want     string
		disputes bool
	}{
		{"near tie", []http.Handler{honest, tie, honest}, 1, CheckTolerated, false},
		{"a clear lead", []http.Handler{honest, wrong, honest}, 1, CheckDisputed, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rr := newReceiptReplicasOf(t, tc.servers)
			g, url, disputes := checkGateway(t, rr, 1_000_000)
			// Until some check involves the odd replica (it is asked at
			// random), and at least 8.
			involves := func(ch Check) bool {
				return slices.ContainsFunc(ch.Receipts, func(r ledger.ServiceReceipt) bool { return r.Provider == rr.provs[tc.odd] })
			}
			for i := 0; i < 8 || (i < 64 && !slices.ContainsFunc(g.Checks(), involves)); i++ {
				ask(t, url, fmt.Sprintf(body, i))
				waitChecks(t, g, i+1)
			}
			seen := 0
			for _, ch := range g.Checks() {
				has := slices.ContainsFunc(ch.Receipts, func(r ledger.ServiceReceipt) bool { return r.Provider == rr.provs[tc.odd] })
				switch {
				case has && ch.Verdict != tc.want:
					t.Errorf("a check with the odd replica: %s (%s), want %s", ch.Verdict, ch.Err, tc.want)
				case !has && ch.Verdict != CheckAgreed:
					t.Errorf("two alike replicas: %s (%s)", ch.Verdict, ch.Err)
				}
				if has {
					seen++
				}
			}
			if seen == 0 {
				t.Fatal("no check involved the odd replica")
			}
			if got := len(disputes()) > 0; got != tc.disputes {
				t.Errorf("disputes: %d, want some: %v", len(disputes()), tc.disputes)
			}
		})
	}
}

// TestChecksRequireReceipts: with checks on, a whole answer without a
// valid receipt (a replica that could leave it out when it answers
// wrongly) is refused with 502, and one whose receipt names another answer
// too.
func TestChecksRequireReceipts(t *testing.T) {
	rr := newReceiptReplicas(t, 1)
	plain := serve(t, server.New(model.Default(), server.Options{}))
	svc := service(1, "tinylm", true, 1, rr.provs...)
	for _, tc := range []struct {
		name string
		dial func(ctx context.Context, svc *ledger.Service, p address.Address, port uint64, cred string) (net.Conn, error)
		want int
	}{
		{"with receipts", rr.dial, 200},
		{"without", func(ctx context.Context, _ *ledger.Service, _ address.Address, _ uint64, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", plain)
		}, 502},
		{"a receipt of another answer", func(ctx context.Context, svc *ledger.Service, p address.Address, port uint64, cred string) (net.Conn, error) {
			rr.wrong[p] = false
			c, err := rr.dial(ctx, svc, p, port, cred)
			return &rewriting{Conn: c}, err
		}, 502},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New(Options{Directory: &fakeDir{svcs: []*ledger.Service{svc}}, Authorized: authorized, Dial: tc.dial, Log: slog.New(slog.DiscardHandler),
				Checks: &CheckOptions{ChainID: checkChain, RatePPM: func() uint64 { return 0 }}})
			defer g.Close()
			srv := httptest.NewServer(g)
			defer srv.Close()
			resp, err := http.Post(srv.URL+PathCompletions, "application/json", strings.NewReader(`{"model":"tinylm","messages":[{"role":"user","content":"the cat"}],"seed":1,"max_tokens":6}`))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
}

// rewriting changes the first letter of a content it reads (its length
// and the JSON kept): an answer altered after its receipt was signed.
type rewriting struct{ net.Conn }

func (r *rewriting) Read(b []byte) (int, error) {
	n, err := r.Conn.Read(b)
	if i := bytes.Index(b[:n], []byte(`"content":"`)); i >= 0 {
		for i += len(`"content":"`); i < n && b[i] != '"'; i++ {
			if c := b[i]; c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
				b[i] = c ^ 0x20
				break
			}
		}
	}
	return n, err
}

// askFull posts body and returns the answer's status, bytes and receipt
// (its header, or its trailer when streamed).
func askFull(t *testing.T, url, body string) (*http.Response, []byte, *ledger.ServiceReceipt) {
	t.Helper()
	resp, err := http.Post(url+PathCompletions, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, %v: %s", resp.StatusCode, err, b)
	}
	enc := resp.Header.Get(receipt.Header)
	if enc == "" {
		enc = resp.Trailer.Get(receipt.Header)
	}
	r, err := receipt.Decode(enc)
	if err != nil {
		t.Fatalf("the client got no receipt: %q: %v", enc, err)
	}
	return resp, b, r
}

// clientOutputs reads an answer as a client kept it: JSON, or an event
// stream.
func clientOutputs(t *testing.T, b []byte) *receipt.Outputs {
	t.Helper()
	var o receipt.Outputs
	if !bytes.HasPrefix(b, []byte("data:")) {
		if err := o.Add(b); err != nil {
			t.Fatal(err)
		}
		return &o
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		d, ok := strings.CutPrefix(line, "data: ")
		if ok && d != "[DONE]" {
			if err := o.Add([]byte(d)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return &o
}

// TestChecksNonExactNeverDisputed: the replicas of a service whose owner
// does not declare its answers bit-exact are checked as any, and a
// replica that answers every request wrongly is found out (each check it
// takes part in ends diverged, counted), but never disputed: the ledger
// would refuse it, and a float model's honest replica would be slashed by
// it. Its clients get their receipts as for any service.
func TestChecksNonExactNeverDisputed(t *testing.T) {
	rr := newReceiptReplicas(t, 3, 2)
	faulty := rr.provs[2]
	g, url, disputes := checkGatewayOf(t, rr, 1_000_000, false)
	const n = 12
	for i := range n {
		stream := ""
		if i%2 == 1 {
			stream = `,"stream":true`
		}
		_, b, r := askFull(t, url, fmt.Sprintf(`{"model":"tinylm","messages":[{"role":"user","content":"the cat %d"}],"seed":%d,"max_tokens":8%s}`, i, i, stream))
		if err := r.Verify(checkChain); err != nil || r.ResponseHash != clientOutputs(t, b).Hash() {
			t.Fatalf("request %d: the client's receipt does not name its answer: %v", i, err)
		}
		waitChecks(t, g, i+1)
	}
	involved := 0
	for i, ch := range g.Checks() {
		has := slices.ContainsFunc(ch.Receipts, func(r ledger.ServiceReceipt) bool { return r.Provider == faulty })
		switch {
		case has && ch.Verdict != CheckDiverged:
			t.Errorf("check %d: the faulty replica took part and the verdict is %s (%s), want %s", i, ch.Verdict, ch.Err, CheckDiverged)
		case !has && ch.Verdict != CheckAgreed:
			t.Errorf("check %d: two honest replicas, verdict %s (%s)", i, ch.Verdict, ch.Err)
		}
		if has {
			involved++
		}
	}
	if involved == 0 {
		t.Fatal("no check involved the faulty replica")
	}
	if d := disputes(); len(d) != 0 {
		t.Errorf("%d disputes of a service not declared exact", len(d))
	}
	counts := g.CheckCounts()
	if counts[CheckDiverged] != uint64(involved) || counts[CheckAgreed] != uint64(n-involved) || counts[CheckDisputed] != 0 {
		t.Errorf("counts %v, want %d diverged, %d agreed, none disputed", counts, involved, n-involved)
	}
}

// TestChecksFloatDivergenceTolerated: replicas of a float model (not
// declared exact) whose answers differ where two tokens were nearly tied
// end tolerated although the client asked for no log-probabilities: the
// gateway asked every replica for them (top 5), and took them off the
// client's answer, whose receipt still names it. One that diverges where
// a token clearly led ends diverged. Neither is disputed. A client that
// asked for one alternative per token gets one.
func TestChecksFloatDivergenceTolerated(t *testing.T) {
	for _, tc := range []struct {
		name string
		odd  *logprobModel
		want string
	}{
		{"near tie", newLogprobModel(" dog", -0.502, map[string]float64{" dog": -0.502, " cat": -0.505}), CheckTolerated},
		{"a clear lead", newLogprobModel(" bird", -0.2, map[string]float64{" bird": -0.2, " cat": -3}), CheckDiverged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			honest := newLogprobModel(" cat", -0.500, map[string]float64{" cat": -0.500, " dog": -0.503, " cow": -4, " owl": -5, " ant": -6, " bee": -7})
			rr := newReceiptReplicasOf(t, []http.Handler{honest, tc.odd, honest})
			g, url, disputes := checkGatewayOf(t, rr, 1_000_000, false)
			involves := func(ch Check) bool {
				return slices.ContainsFunc(ch.Receipts, func(r ledger.ServiceReceipt) bool { return r.Provider == rr.provs[1] })
			}
			for i := 0; i < 8 || (i < 64 && !slices.ContainsFunc(g.Checks(), involves)); i++ {
				var body string
				switch i % 3 {
				case 0:
					body = fmt.Sprintf(`{"model":"tinylm","messages":[{"role":"user","content":"x %d"}],"temperature":0}`, i)
				case 1:
					body = fmt.Sprintf(`{"model":"tinylm","messages":[{"role":"user","content":"x %d"}],"temperature":0,"stream":true}`, i)
				default:
					body = fmt.Sprintf(`{"model":"tinylm","messages":[{"role":"user","content":"x %d"}],"temperature":0,"logprobs":true,"top_logprobs":1}`, i)
				}
				_, b, r := askFull(t, url, body)
				out := clientOutputs(t, b)
				if err := r.Verify(checkChain); err != nil || r.ResponseHash != out.Hash() {
					t.Fatalf("request %d: the client's receipt does not name its answer %s: %v", i, b, err)
				}
				var got struct {
					Choices []struct {
						Logprobs *struct {
							Content []struct {
								Top []json.RawMessage `json:"top_logprobs"`
							} `json:"content"`
						} `json:"logprobs"`
					} `json:"choices"`
				}
				for line := range strings.SplitSeq(string(b), "\n") {
					line = strings.TrimPrefix(line, "data: ")
					if json.Unmarshal([]byte(line), &got) != nil {
						continue
					}
					for _, c := range got.Choices {
						switch {
						case i%3 != 2 && c.Logprobs != nil:
							t.Fatalf("request %d: the client asked for no log-probabilities and got some: %s", i, line)
						case i%3 == 2 && c.Logprobs == nil:
							t.Fatalf("request %d: the client asked for log-probabilities and got none: %s", i, line)
						case i%3 == 2 && slices.ContainsFunc(c.Logprobs.Content, func(t struct {
							Top []json.RawMessage `json:"top_logprobs"`
						}) bool {
							return len(t.Top) != 1
						}):
							t.Fatalf("request %d: the client asked for one alternative per token: %s", i, line)
						}
					}
				}
				waitChecks(t, g, i+1)
			}
			seen := 0
			for _, ch := range g.Checks() {
				switch has := involves(ch); {
				case has && ch.Verdict != tc.want:
					t.Errorf("a check with the odd replica: %s (%s), want %s", ch.Verdict, ch.Err, tc.want)
				case !has && ch.Verdict != CheckAgreed:
					t.Errorf("two alike replicas: %s (%s)", ch.Verdict, ch.Err)
				case has:
					seen++
				}
			}
			if seen == 0 {
				t.Fatal("no check involved the odd replica")
			}
			if d := disputes(); len(d) != 0 {
				t.Errorf("%d disputes of a float model's replicas", len(d))
			}
			honest.mu.Lock()
			defer honest.mu.Unlock()
			for _, a := range honest.asked {
				if a != "logprobs=true top=5" {
					t.Errorf("a replica was asked %q, want logprobs=true top=5 for every request", a)
				}
			}
		})
	}
}

// TestChecksExactAsksNoLogprobs: requests to a service declared exact go
// to its replicas as the client asked (no log-probabilities added), and
// the gateway changes nothing in the answer.
func TestChecksExactAsksNoLogprobs(t *testing.T) {
	m := newLogprobModel(" cat", -0.5, map[string]float64{" cat": -0.5})
	rr := newReceiptReplicasOf(t, []http.Handler{m, m, m})
	g, url, _ := checkGatewayOf(t, rr, 1_000_000, true)
	askFull(t, url, `{"model":"tinylm","messages":[{"role":"user","content":"x"}],"temperature":0}`)
	waitChecks(t, g, 1)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range m.asked {
		if a != "logprobs=false top=0" {
			t.Errorf("a replica of an exact service was asked %q, want what the client asked", a)
		}
	}
}
