package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
	"github.com/gpunet/gpunet/internal/offers"
)

func TestErrorShape(t *testing.T) {
	s := New(newFakeChain(t), Options{})
	for _, tc := range []struct {
		method, url string
		body        []byte
		status      int
		code        string
		ledgerCode  uint32
	}{
		{"GET", "/v1/nope", nil, 404, apiwire.CodeNotFound, 0},
		{"DELETE", "/v1/status", nil, 405, apiwire.CodeMethodNotAllowed, 0},
		{"GET", "/v1/accounts/gpu1nope", nil, 400, apiwire.CodeInvalidArgument, ledger.ErrInvalidAddress.Code},
		{"GET", "/v1/jobs/0", nil, 400, apiwire.CodeInvalidArgument, ledger.ErrUnknownJob.Code},
		{"GET", "/v1/jobs/999", nil, 404, apiwire.CodeNotFound, ledger.ErrUnknownJob.Code},
		{"GET", "/v1/jobs?limit=0", nil, 400, apiwire.CodeInvalidArgument, 0},
		{"GET", "/v1/jobs?limit=1001", nil, 400, apiwire.CodeInvalidArgument, 0},
		{"GET", "/v1/jobs?cursor=x", nil, 400, apiwire.CodeInvalidArgument, 0},
		{"GET", "/v1/jobs?state=done", nil, 400, apiwire.CodeInvalidArgument, 0},
		{"GET", "/v1/providers?cursor=gpu1bad", nil, 400, apiwire.CodeInvalidArgument, 0},
		{"GET", "/v1/offers?q=vrm>=24", nil, 400, apiwire.CodeInvalidArgument, ledger.ErrInvalidMsg.Code},
		{"GET", "/v1/offers?all=maybe", nil, 400, apiwire.CodeInvalidArgument, 0},
		{"GET", "/v1/providers/" + consumerKey.Addr.String(), nil, 404, apiwire.CodeNotFound, ledger.ErrUnknownProvider.Code},
		{"GET", "/v1/blocks/0", nil, 400, apiwire.CodeInvalidArgument, 0},
		{"GET", "/v1/blocks/9999", nil, 404, apiwire.CodeNotFound, 0},
		{"GET", "/v1/txs/zz", nil, 400, apiwire.CodeInvalidArgument, 0},
		{"GET", "/v1/txs?cursor=5", nil, 400, apiwire.CodeInvalidArgument, 0},
		{"POST", "/v1/txs", nil, 400, apiwire.CodeInvalidArgument, ledger.ErrDecode.Code},
		{"POST", "/v1/txs", []byte("garbage"), 422, apiwire.CodeTxRejected, ledger.ErrDecode.Code},
		{"POST", "/v1/txs", bytes.Repeat([]byte{1}, maxTxBody+1), 413, apiwire.CodePayloadTooLarge, ledger.ErrTxTooLarge.Code},
		{"POST", "/v1/quote", []byte(`{"name":1}`), 400, apiwire.CodeInvalidArgument, ledger.ErrDecode.Code},
		{"POST", "/v1/quote", bytes.Repeat([]byte(" "), 1<<20+1), 413, apiwire.CodePayloadTooLarge, 0},
	} {
		var eb apiwire.ErrorBody
		rec := do(t, s, tc.method, tc.url, tc.body, nil, &eb)
		if rec.Code != tc.status || eb.Code != tc.code || eb.LedgerCode != tc.ledgerCode || eb.Message == "" {
			t.Errorf("%s %s = %d %+v, want %d code %s ledger_code %d and a message", tc.method, tc.url, rec.Code, eb, tc.status, tc.code, tc.ledgerCode)
		}
		if apiwire.ErrorCodes[eb.Code] != rec.Code {
			t.Errorf("%s %s: code %s is not the one of status %d", tc.method, tc.url, eb.Code, rec.Code)
		}
	}
	// A 405 names what is allowed.
	rec := do(t, s, "PUT", "/v1/jobs/1", nil, nil, nil)
	if got := rec.Header().Get("Allow"); got != "GET, HEAD" {
		t.Errorf("Allow = %q", got)
	}
}

func TestTxRejectedCarriesResult(t *testing.T) {
	f := newFakeChain(t)
	s := New(f, Options{})
	// A transfer with a sequence already used.
	raw := consumerKey.Send(0, providerKeys[0].Addr, 1)
	var eb apiwire.ErrorBody
	rec := do(t, s, "POST", "/v1/txs", raw, nil, &eb)
	if rec.Code != 422 || eb.Code != apiwire.CodeTxRejected || eb.Tx == nil || eb.Tx.Code != ledger.ErrBadSequence.Code || eb.LedgerCode != ledger.ErrBadSequence.Code {
		t.Fatalf("stale tx: %d %+v", rec.Code, eb)
	}
}

// pages walks a list with limit and returns every page's items by key.
func pages[T any](t *testing.T, s *Server, url string, limit int, items func(body []byte) ([]T, string)) [][]T {
	t.Helper()
	var out [][]T
	cursor := ""
	for n := 0; ; n++ {
		u := url + sep(url) + "limit=" + itoa(limit)
		if cursor != "" {
			u += "&cursor=" + cursor
		}
		rec := do(t, s, "GET", u, nil, nil, nil)
		if rec.Code != 200 {
			t.Fatalf("GET %s: %d %s", u, rec.Code, rec.Body)
		}
		page, next := items(rec.Body.Bytes())
		if len(page) > limit {
			t.Fatalf("GET %s: %d items over the limit %d", u, len(page), limit)
		}
		out = append(out, page)
		if next == "" {
			return out
		}
		if n > 100 {
			t.Fatalf("GET %s: no end to the pages", url)
		}
		cursor = next
	}
}

func sep(url string) string {
	if strings.Contains(url, "?") {
		return "&"
	}
	return "?"
}

func itoa(n int) string { return strconv.Itoa(n) }

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}

func TestPagination(t *testing.T) {
	f := newFakeChain(t)
	s := New(f, Options{})
	flat := func(p [][]string) []string { return slices.Concat(p...) }

	// By address bytes, the registry's order.
	keys := slices.Clone(providerKeys)
	slices.SortFunc(keys, func(a, b lt.Key) int { return bytes.Compare(a.Addr[:], b.Addr[:]) })
	var provs []string
	for _, k := range keys {
		provs = append(provs, k.Addr.String())
	}
	got := flat(pages(t, s, "/v1/providers", 2, func(b []byte) ([]string, string) {
		var l apiwire.ProviderList
		mustJSON(t, b, &l)
		var out []string
		for _, p := range l.Providers {
			out = append(out, p.Address)
		}
		return out, l.NextCursor
	}))
	if !slices.Equal(got, provs) {
		t.Errorf("providers pages = %v, want %v", got, provs)
	}

	jobIDs := func(b []byte) ([]string, string) {
		var l apiwire.JobList
		mustJSON(t, b, &l)
		var out []string
		for _, j := range l.Jobs {
			out = append(out, itoa(int(j.ID))+":"+j.State)
		}
		return out, l.NextCursor
	}
	all := []string{"4:queued", "3:assigned", "2:cancelled", "1:assigned"}
	for _, url := range []string{"/v1/jobs", "/v1/jobs?owner=" + consumerKey.Addr.String()} {
		for _, limit := range []int{1, 3, 9} {
			if got := flat(pages(t, s, url, limit, jobIDs)); !slices.Equal(got, all) {
				t.Errorf("%s limit %d = %v, want %v", url, limit, got, all)
			}
		}
	}
	if got := flat(pages(t, s, "/v1/jobs?state=assigned", 1, jobIDs)); !slices.Equal(got, []string{"3:assigned", "1:assigned"}) {
		t.Errorf("assigned jobs = %v", got)
	}
	// The same through an index of states (netstats in a node), which
	// may lag: the handler checks each job.
	indexed := New(f, Options{JobsInState: func(state string, before uint64, limit int) ([]uint64, bool, bool) {
		all := map[string][]uint64{ledger.JobAssigned: {3, 2, 1}} // job 2 is stale: cancelled since
		var ids []uint64
		for _, id := range all[state] {
			if before == 0 || id < before {
				ids = append(ids, id)
			}
		}
		if len(ids) > limit {
			return ids[:limit], true, true
		}
		return ids, false, true
	}})
	for _, limit := range []int{1, 2, 5} {
		if got := flat(pages(t, indexed, "/v1/jobs?state=assigned", limit, jobIDs)); !slices.Equal(got, []string{"3:assigned", "1:assigned"}) {
			t.Errorf("assigned jobs through the index, limit %d = %v", limit, got)
		}
	}
	if got := flat(pages(t, s, "/v1/jobs?owner="+providerKeys[0].Addr.String(), 5, jobIDs)); len(got) != 0 {
		t.Errorf("a provider's own jobs = %v", got)
	}

	offerAddrs := func(b []byte) ([]string, string) {
		var l apiwire.OfferList
		mustJSON(t, b, &l)
		var out []string
		for _, o := range l.Offers {
			out = append(out, o.Region+"/"+o.Address[:8])
		}
		return out, l.NextCursor
	}
	eu := flat(pages(t, s, "/v1/offers?q=region=eu&sort=price-&all=true", 1, offerAddrs))
	if len(eu) != 3 {
		t.Errorf("eu offers, all = %v", eu)
	}
	if got := flat(pages(t, s, "/v1/offers?q=region=eu", 1, offerAddrs)); len(got) != 2 {
		t.Errorf("schedulable eu offers = %v (p5 is offline)", got)
	}

	var heights []string
	for _, p := range pages(t, s, "/v1/blocks", 4, func(b []byte) ([]string, string) {
		var l apiwire.BlockList
		mustJSON(t, b, &l)
		var out []string
		for _, h := range l.Blocks {
			out = append(out, itoa(int(h.Height)))
		}
		return out, l.NextCursor
	}) {
		heights = append(heights, p...)
	}
	if len(heights) != len(f.blocks) {
		t.Errorf("blocks pages hold %d blocks, chain has %d", len(heights), len(f.blocks))
	}
	var txs []string
	for _, p := range pages(t, s, "/v1/txs", 3, func(b []byte) ([]string, string) {
		var l apiwire.TxList
		mustJSON(t, b, &l)
		var out []string
		for _, tx := range l.Txs {
			out = append(out, tx.Hash)
		}
		return out, l.NextCursor
	}) {
		txs = append(txs, p...)
	}
	if len(txs) != len(f.txs) {
		t.Errorf("txs pages hold %d txs, chain has %d", len(txs), len(f.txs))
	}
	if txs[0] != f.blocks[len(f.blocks)-1].Txs[0].Hash {
		t.Errorf("txs are not newest first")
	}
}

func TestCORSOffByDefault(t *testing.T) {
	s := New(newFakeChain(t), Options{})
	rec := do(t, s, "GET", "/v1/status", nil, map[string]string{"Origin": "https://evil.example"}, nil)
	if rec.Code != 200 || rec.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("CORS off: %d, ACAO %q", rec.Code, rec.Header().Get("Access-Control-Allow-Origin"))
	}
	rec = do(t, s, "OPTIONS", "/v1/txs", nil, map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}, nil)
	if rec.Code != 403 || rec.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight with CORS off: %d %v", rec.Code, rec.Header())
	}

	s = New(newFakeChain(t), Options{CORSOrigins: []string{"https://app.example"}})
	rec = do(t, s, "GET", "/v1/status", nil, map[string]string{"Origin": "https://app.example"}, nil)
	if rec.Header().Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Errorf("allowed origin: ACAO %q", rec.Header().Get("Access-Control-Allow-Origin"))
	}
	rec = do(t, s, "GET", "/v1/status", nil, map[string]string{"Origin": "https://other.example"}, nil)
	if rec.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("other origin got ACAO %q", rec.Header().Get("Access-Control-Allow-Origin"))
	}
	rec = do(t, s, "OPTIONS", "/v1/txs", nil, map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "POST"}, nil)
	if rec.Code != 204 || !strings.Contains(rec.Header().Get("Access-Control-Allow-Methods"), "POST") {
		t.Errorf("preflight: %d %v", rec.Code, rec.Header())
	}
}

func TestTokenAndTimeout(t *testing.T) {
	served := 0
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			if timedOut(w, r) {
				return
			}
		case <-time.After(5 * time.Second):
		}
		served++
		writeJSON(w, 200, apiwire.LogPosted{})
	})
	mk := func(token string) *Server {
		s := New(newFakeChain(t), Options{Token: token})
		s.Mount(Route{Method: "POST", Path: "/v1/secret", ID: "secret", Tag: "t", Summary: "s", Auth: true, Resp: apiwire.LogPosted{}, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			served++
			writeJSON(w, 200, apiwire.LogPosted{})
		})}, Route{Method: "GET", Path: "/v1/slow", ID: "slow", Tag: "t", Summary: "s", Timeout: 20 * time.Millisecond, Resp: apiwire.LogPosted{}, Handler: slow})
		return s
	}
	s := mk("")
	var eb apiwire.ErrorBody
	if rec := do(t, s, "POST", "/v1/secret", nil, map[string]string{"Authorization": "Bearer x"}, &eb); rec.Code != 403 || eb.Code != apiwire.CodeForbidden {
		t.Errorf("no token configured: %d %+v", rec.Code, eb)
	}
	s = mk("0123456789abcdef")
	for _, h := range []string{"", "Bearer wrong", "0123456789abcdef", "Bearer 0123456789abcdeF"} {
		if rec := do(t, s, "POST", "/v1/secret", nil, map[string]string{"Authorization": h}, &eb); rec.Code != 401 || eb.Code != apiwire.CodeUnauthorized {
			t.Errorf("Authorization %q: %d %+v", h, rec.Code, eb)
		}
	}
	if served != 0 {
		t.Fatalf("handler ran without the token")
	}
	if rec := do(t, s, "POST", "/v1/secret", nil, map[string]string{"Authorization": "Bearer 0123456789abcdef"}, nil); rec.Code != 200 || served != 1 {
		t.Errorf("right token: %d", rec.Code)
	}
	start := time.Now()
	if rec := do(t, s, "GET", "/v1/slow", nil, nil, &eb); rec.Code != 504 || eb.Code != apiwire.CodeTimeout || time.Since(start) > 2*time.Second {
		t.Errorf("slow route: %d %+v after %s", rec.Code, eb, time.Since(start))
	}
}

func TestAccountShowsStakeAndEarnings(t *testing.T) {
	f := newFakeChain(t)
	s := New(f, Options{})
	var a apiwire.AccountBody
	do(t, s, "GET", "/v1/accounts/"+providerKeys[0].Addr.String(), nil, nil, &a)
	if !a.Provider || a.Stake != 10_000_000 || a.NextSequence != 2 {
		t.Errorf("provider account = %+v", a)
	}
	do(t, s, "GET", "/v1/accounts/"+consumerKey.Addr.String(), nil, nil, &a)
	if a.Provider || a.Stake != 0 {
		t.Errorf("consumer account = %+v", a)
	}
}

func TestServesOverHTTP(t *testing.T) {
	s := New(newFakeChain(t), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	addr, done, err := s.ListenAndServe(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr.String() + "/v1/status")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/status: %v %v", resp, err)
	}
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestOffersQueryCache: a query's answer is kept while the snapshot is
// the same (at later heights too), and recomputed, at the latest height,
// as soon as it changes.
func TestOffersQueryCache(t *testing.T) {
	var mu sync.Mutex
	height := uint64(4)
	entries := []*apiwire.ProviderOffer{{Offer: offers.Offer{Address: "a", Region: "eu", Online: true}, Schedulable: true}}
	s := New(newFakeChain(t), Options{Offers: func() (uint64, []*apiwire.ProviderOffer, bool) {
		mu.Lock()
		defer mu.Unlock()
		return height, entries, true
	}})
	get := func() apiwire.OfferList {
		var l apiwire.OfferList
		do(t, s, "GET", "/v1/offers?q=region=eu", nil, nil, &l)
		return l
	}
	if l := get(); l.Height != 4 || l.Total != 1 {
		t.Fatalf("first answer: %+v", l)
	}
	key := resultKey{q: "region=eu"}
	first := s.offers.results[key]
	// The same entries at the next height: the same answer.
	mu.Lock()
	height = 5
	mu.Unlock()
	if l := get(); l.Height != 5 || l.Total != 1 {
		t.Fatalf("unchanged entries one block later: %+v", l)
	}
	if e := s.offers.results[key]; e != first {
		t.Errorf("unchanged entries: the answer was computed again")
	}
	mu.Lock()
	height = 6
	entries = []*apiwire.ProviderOffer{entries[0], {Offer: offers.Offer{Address: "b", Region: "eu", Online: true}, Schedulable: true}}
	mu.Unlock()
	if l := get(); l.Height != 6 || l.Total != 2 {
		t.Errorf("a provider more: %+v", l)
	}
}

// TestResortMatchesSort: a sorted list, or a query's sorted matches,
// brought up to date after random changes (entries replaced, added,
// removed, moved) is what filtering and sorting the new snapshot from
// scratch gives.
func TestResortMatchesSort(t *testing.T) {
	keys, err := offers.ParseSort("price,region-")
	if err != nil {
		t.Fatal(err)
	}
	cmp := offerComparer(keys)
	entry := func(r *rand.Rand, i int) *apiwire.ProviderOffer {
		return &apiwire.ProviderOffer{Offer: offers.Offer{Address: fmt.Sprintf("p%05d", i), Price: float64(r.IntN(5)), Region: []string{"eu", "us"}[r.IntN(2)]}}
	}
	eu := func(po *apiwire.ProviderOffer) bool { return po.Region == "eu" }
	for _, keep := range []func(*apiwire.ProviderOffer) bool{nil, eu} {
		filter := func(l []*apiwire.ProviderOffer) []*apiwire.ProviderOffer {
			if keep == nil {
				return l
			}
			return slices.DeleteFunc(l, func(po *apiwire.ProviderOffer) bool { return !keep(po) })
		}
		resorted := 0
		for seed := range uint64(200) {
			r := rand.New(rand.NewPCG(seed, 3))
			n := r.IntN(200)
			src := make([]*apiwire.ProviderOffer, n)
			for i := range src {
				src[i] = entry(r, i)
			}
			list := filter(slices.Clone(src))
			slices.SortFunc(list, cmp)
			for range 20 {
				next := slices.Clone(src)
				for range r.IntN(4) {
					switch op := r.IntN(4); {
					case op == 0 || len(next) == 0:
						next = append(next, entry(r, n))
						n++
					case op == 1:
						next = next[:len(next)-1]
					case op == 2:
						i, j := r.IntN(len(next)), r.IntN(len(next))
						next[i], next[j] = next[j], next[i]
					default:
						i := r.IntN(len(next))
						e := *next[i]
						e.Price, e.Region = float64(r.IntN(5)), []string{"eu", "us"}[r.IntN(2)]
						next[i] = &e
					}
				}
				want := filter(slices.Clone(next))
				slices.SortFunc(want, cmp)
				got, ok := resort(src, list, next, cmp, keep)
				if !ok {
					got = want
				} else {
					resorted++
				}
				if !slices.Equal(got, want) {
					t.Fatalf("filtered %v, seed %d: resorted %v, want %v", keep != nil, seed, addrs(got), addrs(want))
				}
				src, list = next, got
			}
		}
		if resorted < 1000 {
			t.Errorf("filtered %v: only %d of 4000 lists were brought up to date rather than computed again", keep != nil, resorted)
		}
	}
}

func addrs(l []*apiwire.ProviderOffer) []string {
	var out []string
	for _, po := range l {
		out = append(out, po.Address)
	}
	return out
}

// BenchmarkOffersSorted: an offers query's costs at 100k providers: the
// sort from scratch, bringing the sorted list up to date after a block
// that changed 10 providers, and the pass over it for a query.
func BenchmarkOffersSorted(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	regions := []string{"eu", "us-east", "us-west", "ap"}
	entry := func(i int) *apiwire.ProviderOffer {
		return &apiwire.ProviderOffer{Offer: offers.Offer{Address: fmt.Sprintf("gpu1%038d", i), Price: float64(r.IntN(4000)) / 1000, Region: regions[r.IntN(4)],
			GPU: []string{"RTX_4090", "A100", "H100", "cpu"}[r.IntN(4)], Count: r.IntN(8), CPU: 4 << r.IntN(4), Online: true}, Schedulable: true}
	}
	src := make([]*apiwire.ProviderOffer, 100_000)
	for i := range src {
		src[i] = entry(i)
	}
	keys, _ := offers.ParseSort("price")
	cmp := offerComparer(keys)
	sorted := slices.Clone(src)
	slices.SortFunc(sorted, cmp)
	b.Run("sort", func(b *testing.B) {
		for b.Loop() {
			l := slices.Clone(src)
			slices.SortFunc(l, cmp)
		}
	})
	b.Run("resort10", func(b *testing.B) {
		for b.Loop() {
			next := slices.Clone(src)
			for range 10 {
				i := r.IntN(len(next))
				next[i] = entry(i)
			}
			l, ok := resort(src, sorted, next, cmp, nil)
			if !ok {
				b.Fatal("not resorted")
			}
			src, sorted = next, l
		}
	})
	q, _ := offers.Parse("gpu=RTX_4090 region=eu")
	keep := func(po *apiwire.ProviderOffer) bool { return po.Schedulable && q.Match(&po.Offer) }
	b.Run("match", func(b *testing.B) {
		for b.Loop() {
			matchOffers(b.Context(), sorted, keep)
		}
	})
	b.Run("rematch10", func(b *testing.B) {
		matched := matchOffers(b.Context(), sorted, keep)
		for b.Loop() {
			next := slices.Clone(src)
			for range 10 {
				i := r.IntN(len(next))
				next[i] = entry(i)
			}
			m, ok := resort(src, matched, next, cmp, keep)
			if !ok {
				b.Fatal("not brought up to date")
			}
			src, matched = next, m
		}
	})
}

// TestStopClosesStuckRequests: a request still running when the grace
// ends has its connection closed, and the stop reports no error (a
// jobbench run that had passed failed at its node's stop with
// "context deadline exceeded").
func TestStopClosesStuckRequests(t *testing.T) {
	defer func(g time.Duration) { shutdownGrace = g }(shutdownGrace)
	shutdownGrace = 200 * time.Millisecond
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	s := New(newFakeChain(t), Options{})
	s.Mount(Route{Method: "GET", Path: "/v1/stuck", ID: "stuck", Tag: "t", Summary: "s", Timeout: -1, Resp: apiwire.LogPosted{},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			<-release // a handler that does not watch its context
		})})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := s.Serve(ctx, l)
	go http.Get("http://" + l.Addr().String() + "/v1/stuck")
	<-entered
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stop with a stuck request: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("stop waited for a stuck request")
	}
}
