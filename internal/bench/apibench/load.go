package apibench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/bench/market"
	"github.com/gpunet/gpunet/internal/bench/measure"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/daemon"
	"github.com/gpunet/gpunet/internal/ledger"
)

// runLoad sends the transfers and the reads for o.Duration, with the
// profiles asked for running, and fills res's latencies and the blocks the
// validator made meanwhile.
func runLoad(ctx context.Context, d *daemon.Daemon, o Options, st *apiState, senders []market.Key, res *Result) error {
	startHeight := d.Node.Height()
	lctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var txWG sync.WaitGroup
	if o.TxRate > 0 {
		txWG.Go(func() { sendTransfers(lctx, d.APIURL, senders, o.TxRate) })
	}
	if o.CPUProfile != nil {
		if err := pprof.StartCPUProfile(o.CPUProfile); err != nil {
			return err
		}
	}
	if o.Trace != nil {
		if err := trace.Start(o.Trace); err != nil {
			return err
		}
	}
	if o.AllocsBase != nil {
		pprof.Lookup("allocs").WriteTo(o.AllocsBase, 0)
	}
	err := measureReads(ctx, d.APIURL, o, st, res)
	if o.Allocs != nil {
		pprof.Lookup("allocs").WriteTo(o.Allocs, 0)
	}
	if o.Trace != nil {
		trace.Stop()
	}
	if o.CPUProfile != nil {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return err
	}
	stopLoad()
	txWG.Wait()
	end := d.Node.Height()
	res.Blocks = int(end - startHeight)
	for h := startHeight + 1; h <= end; h++ {
		if b, err := d.Node.Block(ctx, h); err == nil && b != nil {
			res.BlockTxs += len(b.Txs)
		}
	}
	return nil
}

// sendTransfers posts signed transfers at rate a second (without waiting
// for their blocks) until ctx ends.
func sendTransfers(ctx context.Context, api string, senders []market.Key, rate int) {
	cl := chainclient.New(api)
	seq := make([]uint64, len(senders))
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		k := i % len(senders)
		t := &ledger.Tx{ChainID: chainID, Sequence: seq[k], Fee: market.TxFee, Msg: &ledger.MsgSend{To: senders[(k+1)%len(senders)].Addr, Amount: 1}}
		if t.Sign(senders[k].Priv) != nil {
			continue
		}
		raw, err := t.Encode()
		if err != nil {
			continue
		}
		if _, err := cl.BroadcastTx(ctx, raw, false); err == nil {
			seq[k]++
		}
	}
}

// apiRequest is one kind of request of the load.
type apiRequest struct {
	name string
	list bool
	path func(r *rand.Rand) string
}

func apiRequests(st *apiState) []apiRequest {
	job := func(r *rand.Rand) uint64 { return 1 + r.Uint64N(st.lastJob) }
	prov := func(r *rand.Rand) string { return st.providers[r.IntN(len(st.providers))].Addr.String() }
	cons := func(r *rand.Rand) string { return st.consumers[r.IntN(len(st.consumers))].Addr.String() }
	return []apiRequest{
		{"GET /v1/jobs/{id}", false, func(r *rand.Rand) string { return fmt.Sprintf("/v1/jobs/%d", job(r)) }},
		{"GET /v1/providers/{addr}", false, func(r *rand.Rand) string { return "/v1/providers/" + prov(r) }},
		{"GET /v1/accounts/{addr}", false, func(r *rand.Rand) string { return "/v1/accounts/" + cons(r) }},
		{"GET /v1/accounts/{addr}/balance", false, func(r *rand.Rand) string { return "/v1/accounts/" + prov(r) + "/balance" }},
		{"GET /v1/jobs/{id}/timeline", false, func(r *rand.Rand) string { return fmt.Sprintf("/v1/jobs/%d/timeline", job(r)) }},

		{"GET /v1/jobs?limit=100", true, func(r *rand.Rand) string { return "/v1/jobs?limit=100" }},
		{"GET /v1/jobs?limit=100&cursor=ID", true, func(r *rand.Rand) string { return fmt.Sprintf("/v1/jobs?limit=100&cursor=%d", job(r)) }},
		{"GET /v1/jobs?owner=ADDR&limit=100", true, func(r *rand.Rand) string { return "/v1/jobs?limit=100&owner=" + cons(r) }},
		{"GET /v1/jobs?state=S&limit=100", true, func(r *rand.Rand) string {
			return "/v1/jobs?limit=100&state=" + []string{ledger.JobQueued, ledger.JobRunning, ledger.JobSucceeded, ledger.JobFailed, ledger.JobCancelled}[r.IntN(5)]
		}},
		{"GET /v1/providers?limit=100&cursor=ADDR", true, func(r *rand.Rand) string { return "/v1/providers?limit=100&cursor=" + prov(r) }},
		{"GET /v1/offers?q=…&sort=price&limit=100", true, func(r *rand.Rand) string {
			q := []string{"gpu=RTX_4090 region=eu", "cpu>=8 ram>=32", "count>=2 vram>=24", "region=us-east", ""}[r.IntN(5)]
			return "/v1/offers?limit=100&sort=price&q=" + strings.ReplaceAll(q, " ", "+")
		}},
		{"GET /v1/blocks?limit=100", true, func(r *rand.Rand) string { return "/v1/blocks?limit=100" }},
		{"GET /v1/txs?limit=100", true, func(r *rand.Rand) string { return "/v1/txs?limit=100" }},
		{"GET /v1/events?limit=100", true, func(r *rand.Rand) string { return "/v1/events?limit=100" }},
	}
}

// sample is one request's outcome.
type sample struct {
	kind int // index in the requests
	lat  time.Duration
	ok   bool
	err  string
}

// measureReads runs the open-loop load and fills res's latencies.
func measureReads(ctx context.Context, api string, o Options, st *apiState, res *Result) error {
	reqs := apiRequests(st)
	samples, start := sendReads(ctx, api, o, reqs)
	if err := ctx.Err(); err != nil {
		return err
	}
	summarise(reqs, samples, time.Since(start), res)
	return nil
}

// sendReads sends the reads for o.Duration through 256 workers: two
// open-loop schedules, singles at o.Rate and lists at o.ListRate, each
// sending at fixed intervals from the start it returns.
func sendReads(ctx context.Context, api string, o Options, reqs []apiRequest) (samples []sample, start time.Time) {
	var singles, lists []int
	for i, r := range reqs {
		if r.list {
			lists = append(lists, i)
		} else {
			singles = append(singles, i)
		}
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: time.Minute}, Timeout: 30 * time.Second}
	type job struct {
		kind int
		path string
		due  time.Time
	}
	work := make(chan job, 100_000)
	out := make(chan sample, 100_000)
	var wg sync.WaitGroup
	for range 256 {
		wg.Go(func() {
			for j := range work {
				ok, msg := get(hc, api, j.path)
				out <- sample{j.kind, time.Since(j.due), ok, msg}
			}
		})
	}
	collected := make(chan struct{})
	go func() {
		for s := range out {
			samples = append(samples, s)
		}
		close(collected)
	}()
	start = time.Now()
	end := start.Add(o.Duration)
	// A schedule sends the requests that are due, then sleeps until the
	// next one is: sleeps overshoot, so sending one request per sleep
	// would fall behind the rate.
	schedule := func(rate int, kinds []int, seed uint64) {
		r := rand.New(rand.NewPCG(o.Seed, seed))
		interval := time.Second / time.Duration(rate)
		for i := 0; ; {
			now := time.Now()
			for ; ; i++ {
				due := start.Add(time.Duration(i) * interval)
				if due.After(end) || ctx.Err() != nil {
					return
				}
				if due.After(now) {
					time.Sleep(due.Sub(now))
					break
				}
				k := kinds[r.IntN(len(kinds))]
				work <- job{k, reqs[k].path(r), due}
			}
		}
	}
	var sched sync.WaitGroup
	sched.Go(func() { schedule(o.Rate, singles, 11) })
	if o.ListRate > 0 {
		sched.Go(func() { schedule(o.ListRate, lists, 12) })
	}
	sched.Wait()
	close(work)
	wg.Wait()
	close(out)
	<-collected
	return samples, start
}

// get sends one read: whether it answered 200, and if not, what it said.
func get(hc *http.Client, api, path string) (ok bool, msg string) {
	resp, err := hc.Get(api + path)
	if err != nil {
		return false, err.Error()
	}
	// Read the body without keeping it: io.ReadAll's growing buffers were
	// a fifth of the process's allocations, and their GC cycles a part of
	// the tail measured.
	ok = resp.StatusCode == 200
	if !ok {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		msg = fmt.Sprintf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return ok, msg
}

// summarise fills res's classes and endpoints from the samples of a load
// that ran for elapsed.
func summarise(reqs []apiRequest, samples []sample, elapsed time.Duration, res *Result) {
	var single, list []time.Duration
	byKind := make([][]time.Duration, len(reqs))
	for _, s := range samples {
		byKind[s.kind] = append(byKind[s.kind], s.lat)
		cls := &res.Single
		if reqs[s.kind].list {
			list = append(list, s.lat)
			cls = &res.List
		} else {
			single = append(single, s.lat)
		}
		cls.Requests++
		if !s.ok {
			cls.Errors++
			if len(res.ErrorSamples) < 5 {
				res.ErrorSamples = append(res.ErrorSamples, s.err)
			}
		}
	}
	p, ms := measure.Percentile, measure.Ms
	fill := func(c *Class, ds []time.Duration) {
		c.RatePerS = float64(len(ds)) / elapsed.Seconds()
		c.P50Ms, c.P90Ms, c.P99Ms, c.MaxMs = ms(p(ds, 50)), ms(p(ds, 90)), ms(p(ds, 99)), ms(p(ds, 100))
	}
	fill(&res.Single, single)
	fill(&res.List, list)
	for i, ds := range byKind {
		if len(ds) == 0 {
			continue
		}
		res.Endpoints = append(res.Endpoints, Endpoint{Name: reqs[i].name, List: reqs[i].list, N: len(ds),
			P50Ms: ms(p(ds, 50)), P99Ms: ms(p(ds, 99)), MaxMs: ms(p(ds, 100))})
	}
}
