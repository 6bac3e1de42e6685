package chainclient_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiserver/apiservertest"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/clock/clocktest"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
	"github.com/gpunet/gpunet/internal/offers"
)

// signer signs with a ledgertest key.
type signer lt.Key

func (s signer) PrivateKey() ed25519.PrivateKey { return s.Priv }

var (
	alice = lt.NewKey("alice")
	bob   = lt.NewKey("bob")
	prov  = lt.NewKey("p1")
)

// newChain returns a chain where alice and bob are funded and p1 is an
// online, staked CPU provider asking 1 SYNC/h, and a client of its API.
func newChain(t *testing.T) (*apiservertest.Chain, *chainclient.Client, *httptest.Server) {
	t.Helper()
	g := lt.Genesis(100_000_000_000, "alice", "bob", "p1")
	g.Params.LivenessRatePPM = 0
	c := apiservertest.NewChain(t, g)
	c.Send(prov, &ledger.MsgRegisterProvider{ProviderInfo: lt.ProviderInfo("", 0, 1_000_000)})
	c.Send(prov, &ledger.MsgStake{Amount: 10_000_000})
	srv := apiservertest.NewServer(t, c)
	return c, chainclient.New(srv.URL), srv
}

// TestClientOverTheRealRoutes calls each of the client's reads and
// SendMsg against the API's own handlers over an in-memory ledger.
func TestClientOverTheRealRoutes(t *testing.T) {
	c, cl, _ := newChain(t)
	ctx := t.Context()

	st, err := cl.Status(ctx)
	if err != nil || st.ChainID != lt.ChainID || st.Height == 0 {
		t.Fatalf("Status = %+v, %v; want chain %s at a height > 0", st, err, lt.ChainID)
	}
	before, err := cl.Balance(ctx, bob.Addr)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cl.SendMsg(ctx, signer(alice), 0, &ledger.MsgSend{To: bob.Addr, Amount: 42})
	if err != nil || res.Height == 0 || res.Code != 0 {
		t.Fatalf("SendMsg = %+v, %v; want a tx in a block", res, err)
	}
	if after, err := cl.Balance(ctx, bob.Addr); err != nil || after.Balance != before.Balance+42 {
		t.Errorf("bob's balance %+v, %v after a transfer of 42; want %d", after, err, before.Balance+42)
	}
	if acct, err := cl.Account(ctx, alice.Addr); err != nil || acct.NextSequence != 1 {
		t.Errorf("alice's account %+v, %v; want next sequence 1", acct, err)
	}
	if p, err := cl.Params(ctx); err != nil || p.UnbondingBlocks != ledger.DefaultParams().UnbondingBlocks {
		t.Errorf("Params = %+v, %v", p, err)
	}

	p, err := cl.Provider(ctx, prov.Addr)
	if err != nil || !p.Record.Online || p.Record.Stake != 10_000_000 {
		t.Fatalf("Provider(p1) = %+v, %v; want an online provider staking 10 SYNC", p, err)
	}
	if _, err := cl.Provider(ctx, bob.Addr); !chainclient.IsNotFound(err) {
		t.Errorf("Provider(bob) err = %v, want not found", err)
	}
	if ps, err := cl.Providers(ctx); err != nil || len(ps) != 1 || ps[0].Address != prov.Addr.String() {
		t.Errorf("Providers = %v, %v; want p1 alone", ps, err)
	}
	if offs, err := cl.Offers(ctx, "", "price", false); err != nil || len(offs) != 1 {
		t.Errorf("Offers = %v, %v; want one", offs, err)
	}

	// A job p1 can run is placed on it at once; one priced below its ask
	// would wait, and the quote says so in fields.
	spec := lt.WasmJob("fits", 2_000_000, 60)
	if q, err := cl.Quote(ctx, &spec); err != nil || q.Matching != 1 || q.Code != "" || q.PricePerHour != 1_000_000 {
		t.Errorf("Quote(fits) = %+v, %v; want one match at 1 SYNC/h", q, err)
	}
	cheap := lt.WasmJob("cheap", 500_000, 60)
	if q, err := cl.Quote(ctx, &cheap); err != nil || q.Code != ledger.QuoteOverPrice || q.CheapestAsk != 1_000_000 {
		t.Errorf("Quote(cheap) = %+v, %v; want code %s, cheapest ask 1 SYNC/h", q, err, ledger.QuoteOverPrice)
	}
	c.Send(alice, &ledger.MsgSubmitJob{Spec: spec, ConsumerKey: lt.AgeKey("alice")})
	j, err := cl.Job(ctx, 1)
	if err != nil || j.State != ledger.JobAssigned || len(j.Assignments) != 1 || j.Assignments[0].Provider != prov.Addr {
		t.Fatalf("Job(1) = %+v, %v; want assigned to p1", j, err)
	}
	if _, err := cl.Job(ctx, 2); !chainclient.IsNotFound(err) {
		t.Errorf("Job(2) err = %v, want not found", err)
	}
	if l, err := cl.Jobs(ctx, alice.Addr, 10); err != nil || len(l.Jobs) != 1 || l.Jobs[0].ID != 1 {
		t.Errorf("Jobs(alice) = %+v, %v; want job 1", l, err)
	}
	if l, err := cl.ProviderJobs(ctx, prov.Addr); err != nil || len(l.Jobs) != 1 || l.Jobs[0].ID != 1 {
		t.Errorf("ProviderJobs(p1) = %+v, %v; want job 1", l, err)
	}
	if l, err := cl.ProviderJobs(ctx, bob.Addr); err != nil || l.Jobs == nil || len(l.Jobs) != 0 {
		t.Errorf("ProviderJobs(bob) = %+v, %v; want an empty, non-nil list", l, err)
	}

	// The assigned provider relays a log chunk; the owner reads it back.
	if err := cl.PostLog(ctx, signer(prov), 1, 0, []byte("sealed chunk")); err != nil {
		t.Fatalf("PostLog: %v", err)
	}
	if page, err := cl.Logs(ctx, 1, 0); err != nil || len(page.Chunks) != 1 || string(page.Chunks[0].Data) != "sealed chunk" || page.Next != 1 {
		t.Errorf("Logs = %+v, %v; want the chunk and next 1", page, err)
	}
	// Someone else's chunk is refused with the API's error.
	var ae *chainclient.APIError
	if err := cl.PostLog(ctx, signer(bob), 1, 1, []byte("x")); !errors.As(err, &ae) || ae.Status != http.StatusForbidden {
		t.Errorf("PostLog by bob: %v, want a 403 APIError", err)
	}
}

// TestAPIErrors: each kind of failure comes back as the Go error callers
// branch on.
func TestAPIErrors(t *testing.T) {
	_, cl, _ := newChain(t)
	ctx := t.Context()

	// A rejected tx (CheckTx, height 0): a *TxError with the ledger's code.
	_, err := cl.SendMsg(ctx, signer(bob), 0, &ledger.MsgSend{To: alice.Addr, Amount: 1 << 62})
	var txErr *chainclient.TxError
	if !errors.As(err, &txErr) || txErr.Result.Code != ledger.ErrInsufficientFunds.Code || txErr.Result.Height != 0 {
		t.Errorf("an overdrawn send: %v, want a TxError with code %d at height 0", err, ledger.ErrInsufficientFunds.Code)
	} else if !strings.Contains(err.Error(), "rejected") {
		t.Errorf("TxError %q does not say it was rejected", err)
	}
	// A tx that passed CheckTx and failed in its block (the state moved
	// between the two): the node answers 200 with the result; a *TxError
	// with its height.
	failed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(apiwire.TxResult{Hash: "AB", Height: 12, Code: ledger.ErrJobState.Code, Log: "job 1 is done"})
	}))
	defer failed.Close()
	_, err = chainclient.New(failed.URL).BroadcastTx(ctx, []byte("tx"), true)
	if !errors.As(err, &txErr) || txErr.Result.Height != 12 || txErr.Result.Code != ledger.ErrJobState.Code {
		t.Errorf("a tx failed in its block: %v, want a TxError at height 12", err)
	} else if !strings.Contains(err.Error(), "failed in block 12") {
		t.Errorf("TxError %q does not name its block", err)
	}
	// Accepted, not in a block before the node stopped waiting (202).
	pending := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		json.NewEncoder(w).Encode(apiwire.TxResult{Hash: "CD"})
	}))
	defer pending.Close()
	if res, err := chainclient.New(pending.URL).BroadcastTx(ctx, []byte("tx"), true); !errors.Is(err, chainclient.ErrNotInBlockYet) || res == nil || res.Hash != "CD" {
		t.Errorf("a 202 while waiting: %+v, %v; want the result and ErrNotInBlockYet", res, err)
	}
	if _, err := chainclient.New(pending.URL).BroadcastTx(ctx, []byte("tx"), false); err != nil {
		t.Errorf("a 202 without waiting: %v, want no error", err)
	}

	// An error answer: an *APIError with the stable code and the ledger's.
	_, err = cl.Job(ctx, 99)
	var ae *chainclient.APIError
	if !errors.As(err, &ae) || ae.Status != 404 || ae.Code != apiwire.CodeNotFound || ae.LedgerCode != ledger.ErrUnknownJob.Code || ae.Msg == "" {
		t.Errorf("Job(99): %#v, want a 404 APIError, code %s, ledger code %d", err, apiwire.CodeNotFound, ledger.ErrUnknownJob.Code)
	}
	bad := ledger.JobSpec{Name: "bad"}
	if _, err := cl.Quote(ctx, &bad); !errors.As(err, &ae) || ae.Status != 400 || ae.Code != apiwire.CodeInvalidArgument {
		t.Errorf("Quote of an invalid spec: %v, want a 400 APIError", err)
	}

	for _, tc := range []struct {
		name    string
		status  int
		body    string
		wantErr func(error) bool
		what    string
	}{
		{"not JSON", 502, "<html>bad gateway</html>", func(err error) bool {
			return errors.As(err, &ae) && ae.Status == 502 && ae.Code == "" && strings.Contains(ae.Msg, "HTTP 502: <html>bad gateway</html>")
		}, "an APIError quoting the body"},
		{"JSON without a message", 500, `{"code":"internal"}`, func(err error) bool {
			return errors.As(err, &ae) && ae.Status == 500 && strings.Contains(ae.Msg, "HTTP 500")
		}, "an APIError quoting the body"},
		{"bad JSON on success", 200, `{"chain_id": 7`, func(err error) bool {
			return err != nil && strings.Contains(err.Error(), "decode response of GET /v1/status") && !errors.As(err, &ae)
		}, "a decode error"},
		{"wrong type on success", 200, `{"chain_id": 7}`, func(err error) bool {
			return err != nil && strings.Contains(err.Error(), "decode response")
		}, "a decode error"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			io.WriteString(w, tc.body)
		}))
		_, err := chainclient.New(srv.URL).Status(ctx)
		srv.Close()
		if !tc.wantErr(err) {
			t.Errorf("%s: Status err = %v, want %s", tc.name, err, tc.what)
		}
	}
	if chainclient.IsNotFound(errors.New("not found")) {
		t.Error("IsNotFound of a plain error")
	}
}

// TestUnreachableAndTimeouts: a node that is not there, or does not
// answer within the caller's deadline, is ErrUnreachable, promptly.
func TestUnreachableAndTimeouts(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	if _, err := chainclient.New(url).Status(t.Context()); !errors.Is(err, chainclient.ErrUnreachable) || !strings.Contains(err.Error(), "is the node running?") {
		t.Errorf("a closed port: %v, want ErrUnreachable with a hint", err)
	}
	if err := chainclient.New(url).PostLog(t.Context(), signer(prov), 1, 0, []byte("x")); !errors.Is(err, chainclient.ErrUnreachable) {
		t.Errorf("PostLog to a closed port: %v, want ErrUnreachable", err)
	}

	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(release)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := chainclient.New(hang.URL).Job(ctx, 1)
	if !errors.Is(err, chainclient.ErrUnreachable) || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Errorf("a node that never answers: %v, want ErrUnreachable naming the deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the call took %v past a 100ms deadline", d)
	}
}

// TestSendMsgRetries: a tx whose sequence another tx of the same key took
// first is signed again with the next one after a pause (100ms, then
// 200ms, …, on the client's clock); a fee below a raised min_fee is paid
// again at the new minimum, once.
func TestSendMsgRetries(t *testing.T) {
	c, _, srv := newChain(t)
	ctx := t.Context()
	clk := clocktest.New(time.Unix(1_700_000_000, 0))
	var posts atomic.Int32
	// Before each of the client's first two broadcasts, another tx of
	// alice's lands: the client's sequence is stale twice.
	racing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/txs" && posts.Add(1) <= 2 {
			c.Send(alice, &ledger.MsgSend{To: bob.Addr, Amount: 1})
		}
		proxy(w, r, srv.URL)
	}))
	defer racing.Close()
	cl := chainclient.New(racing.URL)
	cl.Clock = clk
	done := make(chan error, 1)
	go func() {
		_, err := cl.SendMsg(ctx, signer(alice), 0, &ledger.MsgSend{To: bob.Addr, Amount: 7})
		done <- err
	}()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for i, pause := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
		if err := clk.WaitTimers(wctx, 1); err != nil {
			t.Fatalf("SendMsg never waited before attempt %d: %v", i+2, err)
		}
		clk.Advance(pause - time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("SendMsg returned (%v) before its %v pause passed", err, pause)
		default:
		}
		clk.Advance(time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatalf("SendMsg after two stale sequences: %v", err)
	}
	if got := posts.Load(); got != 3 {
		t.Errorf("%d broadcasts, want 3", got)
	}
	if acct, err := chainclient.New(srv.URL).Account(ctx, alice.Addr); err != nil || acct.NextSequence != 3 {
		t.Errorf("alice's next sequence %+v, %v; want 3 (two racing txs and hers)", acct, err)
	}

	// Stale sequences every time: the last refusal is returned.
	posts.Store(-(chainclient.MaxSequenceRetries + 5))
	done = make(chan error, 1)
	go func() {
		_, err := cl.SendMsg(ctx, signer(alice), 0, &ledger.MsgSend{To: bob.Addr, Amount: 7})
		done <- err
	}()
	for range chainclient.MaxSequenceRetries - 1 {
		if err := clk.WaitTimers(wctx, 1); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
	}
	var txErr *chainclient.TxError
	if err := <-done; !errors.As(err, &txErr) || txErr.Result.Code != ledger.ErrBadSequence.Code {
		t.Errorf("after %d stale sequences: %v, want the bad-sequence TxError", chainclient.MaxSequenceRetries, err)
	}
}

// TestSendMsgRereadsARaisedMinFee: a client that read min_fee 0 and sends
// on a chain that now asks 1000 is refused once, reads the parameter
// again and pays 1000.
func TestSendMsgRereadsARaisedMinFee(t *testing.T) {
	g := lt.Genesis(100_000_000_000, "alice", "bob")
	g.Params.MinFee = 1000
	c := apiservertest.NewChain(t, g)
	srv := apiservertest.NewServer(t, c)
	var paramReads atomic.Int32
	stale := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/params" && paramReads.Add(1) == 1 {
			p := g.Params
			p.MinFee = 0 // as read before the minimum went up
			json.NewEncoder(w).Encode(p)
			return
		}
		proxy(w, r, srv.URL)
	}))
	defer stale.Close()
	cl := chainclient.New(stale.URL)
	ctx := t.Context()
	before, _ := cl.Balance(ctx, alice.Addr)
	if _, err := cl.SendMsg(ctx, signer(alice), 0, &ledger.MsgSend{To: bob.Addr, Amount: 10}); err != nil {
		t.Fatalf("SendMsg: %v", err)
	}
	after, _ := cl.Balance(ctx, alice.Addr)
	if paid := before.Balance - after.Balance - 10; paid != 1000 || paramReads.Load() != 2 {
		t.Errorf("paid a fee of %d after %d reads of the params, want 1000 after 2", paid, paramReads.Load())
	}
}

// TestMinFeeCache: min_fee is read once per MinFeeTTL on the client's
// clock, and again at once when asked for fresh.
func TestMinFeeCache(t *testing.T) {
	var reads atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := reads.Add(1)
		json.NewEncoder(w).Encode(ledger.Params{MinFee: uint64(100 * n)})
	}))
	defer srv.Close()
	clk := clocktest.New(time.Unix(1_700_000_000, 0))
	cl := chainclient.New(srv.URL)
	cl.Clock = clk
	ctx := t.Context()
	for _, step := range []struct {
		advance time.Duration
		fresh   bool
		want    uint64
	}{
		{0, false, 100},
		{chainclient.MinFeeTTL - time.Second, false, 100},
		{time.Second, false, 200},
		{0, false, 200},
		{0, true, 300},
	} {
		clk.Advance(step.advance)
		if got, err := cl.MinFee(ctx, step.fresh); err != nil || got != step.want {
			t.Errorf("after %v (fresh %v): MinFee = %d, %v; want %d", step.advance, step.fresh, got, err, step.want)
		}
	}
}

// TestPagination: the lists walk every page, passing back next_cursor
// and asking for the largest page.
func TestPagination(t *testing.T) {
	var reqs []string
	page := func(w http.ResponseWriter, r *http.Request, items func(i int) any, key string) {
		reqs = append(reqs, r.URL.RequestURI())
		if got := r.URL.Query().Get("limit"); got != strconv.Itoa(apiwire.MaxPageLimit) {
			t.Errorf("%s: limit %q, want %d", r.URL, got, apiwire.MaxPageLimit)
		}
		// Three pages of two, cursors "2" and "4".
		from, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
		out := map[string]any{key: []any{items(from), items(from + 1)}, "height": 9}
		if from < 4 {
			out["next_cursor"] = strconv.Itoa(from + 2)
		}
		json.NewEncoder(w).Encode(out)
	}
	addr := func(i int) address.Address { return address.Address{byte(i + 1)} }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/providers":
			page(w, r, func(i int) any { return offers.Offer{Address: addr(i).String()} }, "providers")
		case r.URL.Path == "/v1/offers":
			if q := r.URL.Query(); q.Get("q") != "gpu=T4" || q.Get("sort") != "price" || q.Get("all") != "true" {
				t.Errorf("offers query %v", q)
			}
			page(w, r, func(i int) any { return offers.Offer{Address: addr(i).String()} }, "offers")
		case strings.HasSuffix(r.URL.Path, "/jobs"):
			page(w, r, func(i int) any { return ledger.Job{ID: uint64(i + 1)} }, "jobs")
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	cl := chainclient.New(srv.URL)
	ctx := t.Context()

	check := func(what string, n int, first, last string) {
		t.Helper()
		if n != 6 {
			t.Errorf("%s: %d items, want 6 from three pages", what, n)
		}
		if len(reqs) != 3 || strings.Contains(reqs[0], "cursor") || !strings.Contains(reqs[1], "cursor=2") || !strings.Contains(reqs[2], "cursor=4") {
			t.Errorf("%s: requests %q, want three, the later ones with cursors 2 and 4", what, reqs)
		}
		if first != addr(0).String() && first != "1" || last != addr(5).String() && last != "6" {
			t.Errorf("%s: first %s, last %s", what, first, last)
		}
		reqs = nil
	}
	ps, err := cl.Providers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check("Providers", len(ps), ps[0].Address, ps[len(ps)-1].Address)
	offs, err := cl.Offers(ctx, "gpu=T4", "price", true)
	if err != nil {
		t.Fatal(err)
	}
	check("Offers", len(offs), offs[0].Address, offs[len(offs)-1].Address)
	jl, err := cl.ProviderJobs(ctx, addr(0))
	if err != nil {
		t.Fatal(err)
	}
	check("ProviderJobs", len(jl.Jobs), "1", strconv.FormatUint(jl.Jobs[len(jl.Jobs)-1].ID, 10))
	if jl.Height != 9 {
		t.Errorf("ProviderJobs height %d, want 9", jl.Height)
	}
}

// proxy forwards r to base and copies the answer to w.
func proxy(w http.ResponseWriter, r *http.Request, base string) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, base+r.URL.RequestURI(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}
