package netstats

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// chain is an in-memory chain that keeps each block's txs, results and
// block-level events, as a node's block store does.
type chain struct {
	t       *testing.T
	mu      sync.Mutex
	l       ledger.Ledger
	kv      *ledger.MemKV
	height  int64
	blocks  []*apiwire.Block
	seq     map[string]uint64
	heights chan int64
	mempool int
	// times gives block h's time (default lt.BlockTime).
	times func(h int64) time.Time
}

func newChain(t *testing.T, g ledger.Genesis) *chain {
	c := &chain{t: t, kv: ledger.NewMemKV(), seq: map[string]uint64{}, heights: make(chan int64, 100)}
	changes, _, err := c.l.InitGenesis(c.kv, lt.ChainID, g)
	if err != nil {
		t.Fatal(err)
	}
	c.kv.Apply(changes)
	return c
}

// block applies txs as the next block and announces it.
func (c *chain) block(txs ...[]byte) *apiwire.Block {
	c.t.Helper()
	c.mu.Lock()
	c.height++
	at := lt.BlockTime(c.height)
	if c.times != nil {
		at = c.times(c.height)
	}
	b := c.l.BeginBlock(c.kv, ledger.BlockInfo{Height: c.height, Time: at, Seed: lt.BlockSeed(c.height)})
	vb := &apiwire.Block{BlockHeader: apiwire.BlockHeader{Height: c.height, Time: at, NumTxs: len(txs), Hash: fmt.Sprintf("%064X", c.height)}, Txs: []apiwire.BlockTx{}}
	for i, raw := range txs {
		r := b.DeliverTx(raw)
		if r.Err != nil {
			c.t.Fatalf("block %d tx %d: %v", c.height, i, r.Err)
		}
		h := sha256.Sum256(raw)
		vb.Txs = append(vb.Txs, apiwire.BlockTx{Hash: hex.EncodeToString(h[:]), Index: i, Events: r.Events})
	}
	changes, _, err := b.End()
	if err != nil {
		c.t.Fatal(err)
	}
	vb.Events = b.Events()
	c.kv.Apply(changes)
	c.blocks = append(c.blocks, vb)
	c.mu.Unlock()
	c.heights <- c.height
	return vb
}

func (c *chain) tx(k lt.Key, msg ledger.Msg) []byte {
	raw := k.Tx(lt.ChainID, c.seq[k.Addr.String()], 0, msg)
	c.seq[k.Addr.String()]++
	return raw
}

func (c *chain) View() (ledger.KV, func()) {
	c.mu.Lock()
	return c.kv, c.mu.Unlock
}

func (c *chain) Subscribe(ctx context.Context, _ string) (<-chan int64, error) { return c.heights, nil }

func (c *chain) Block(_ context.Context, h int64) (*apiwire.Block, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h < 1 || h > int64(len(c.blocks)) {
		return nil, nil
	}
	return c.blocks[h-1], nil
}

func (c *chain) Mempool() int { return c.mempool }

var (
	consumer = lt.NewKey("consumer")
	cpuProv  = lt.NewKey("cpu")
	gpuProv  = lt.NewKey("gpu")
)

func waitHeight(t *testing.T, s *Stats, h uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ov := s.Overview(); ov.Ready && ov.Height >= h {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats never reached height %d (at %d)", h, s.Overview().Height)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestFollowsJobsAndProviders(t *testing.T) {
	g := lt.Genesis(100_000_000_000, "consumer", "cpu", "gpu")
	g.Params.LivenessRatePPM = 0
	c := newChain(t, g)
	// One provider before the stats start, one after.
	c.block(c.tx(cpuProv, &ledger.MsgRegisterProvider{ProviderInfo: lt.ProviderInfo("", 0, 36_000)}), c.tx(cpuProv, &ledger.MsgStake{Amount: 10_000_000}))

	reg := prometheus.NewRegistry()
	s := New(c, Options{Registry: reg, SeriesLen: 4})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	waitHeight(t, s, 1)
	if h, offers, ok := s.Offers(); !ok || h != 1 || len(offers) != 1 {
		t.Fatalf("offers after load: %d %d %v", h, len(offers), ok)
	}
	updates, unsub := s.Subscribe()
	defer unsub()

	gpuInfo := lt.ProviderInfo("RTX_4090", 2, 1_000_000)
	gpuInfo.Region = "us-east"
	waitHeight(t, s, uint64(c.block(c.tx(gpuProv, &ledger.MsgRegisterProvider{ProviderInfo: gpuInfo}), c.tx(gpuProv, &ledger.MsgStake{Amount: 200_000_000})).Height))
	b := c.block(c.tx(consumer, &ledger.MsgSubmitJob{Spec: lt.WasmJob("a", 1_000_000, 60), ConsumerKey: lt.AgeKey("consumer")}))
	waitHeight(t, s, uint64(b.Height))
	// Granted, the job holds its slot for real (an ungranted placement
	// holds one only tentatively, and is not a busy slot).
	c.mu.Lock()
	j, ok, err := ledger.GetJob(c.kv, 1)
	c.mu.Unlock()
	if err != nil || !ok || len(j.Assignments) != 1 {
		t.Fatalf("job 1: %+v, %v, %v: want it placed", j, ok, err)
	}
	b = c.block(c.tx(consumer, &ledger.MsgGrantKey{JobID: 1, Grants: []ledger.Grant{{Provider: j.Assignments[0].Provider, WrappedKey: []byte("k")}}}))
	waitHeight(t, s, uint64(b.Height))

	ov := s.Overview()
	if ov.Providers != 2 || ov.Online != 2 || ov.Jobs[ledger.JobAssigned] != 1 || ov.Jobs[ledger.JobQueued] != 0 {
		t.Fatalf("overview: %+v", ov)
	}
	if len(ov.ByClass) != 2 || ov.ByClass[0].Class != "RTX_4090" || ov.ByClass[0].Units != 2 || ov.ByClass[0].MedianPrice != 1 || ov.ByClass[1].Class != "cpu" || ov.ByClass[1].Units != 16 {
		t.Errorf("by class: %+v", ov.ByClass)
	}
	if len(ov.ByRegion) != 2 || ov.ByRegion[1].Region != "us-east" || ov.ByRegion[1].GPUs != 2 {
		t.Errorf("by region: %+v", ov.ByRegion)
	}
	if ov.Latest == nil || ov.Latest.BusySlots != 1 || ov.Latest.Slots != 8 || ov.Latest.Utilization != 0.125 {
		t.Errorf("latest sample: %+v", ov.Latest)
	}

	// The job runs to the end, one block per step (granted above).
	p := j.Assignments[0].Provider
	prov := map[bool]lt.Key{true: cpuProv, false: gpuProv}[p == cpuProv.Addr]
	// (A node's blocks are spaced by its block time; here each waits for
	// the stats to take the last, or they would read later states.)
	step := func(tx []byte) { waitHeight(t, s, uint64(c.block(tx).Height)) }
	step(c.tx(prov, &ledger.MsgStartJob{JobID: 1}))
	last := c.block(c.tx(prov, &ledger.MsgCommitResult{JobID: 1, MeteredSeconds: 3, Result: &ledger.JobResult{ManifestHash: ledger.Hash{1}, OutputBlob: "sha256:" + strings.Repeat("ab", 32), MeteredSeconds: 3}}))
	waitHeight(t, s, uint64(last.Height))

	ov = s.Overview()
	if ov.Jobs[ledger.JobSucceeded] != 1 || ov.Jobs[ledger.JobAssigned] != 0 || ov.Latest.BusySlots != 0 {
		t.Errorf("after the job: %+v %+v", ov.Jobs, ov.Latest)
	}
	if ids, more, ok := s.JobsInState(ledger.JobSucceeded, 0, 10); !ok || more || len(ids) != 1 || ids[0] != 1 {
		t.Errorf("succeeded jobs: %v %v %v", ids, more, ok)
	}
	if ids, _, ok := s.JobsInState(ledger.JobQueued, 0, 10); !ok || len(ids) != 0 {
		t.Errorf("queued jobs: %v", ids)
	}
	var states []string
	for _, tr := range s.Timeline(1) {
		states = append(states, tr.State)
	}
	if got := strings.Join(states, ","); got != "assigned,running,succeeded" {
		t.Errorf("timeline = %s", got)
	}
	// The provider's entry follows its earnings and job count.
	_, offers, _ := s.Offers()
	for _, o := range offers {
		if o.Address == p.String() && (o.Earned == 0 || o.Jobs != 0) {
			t.Errorf("provider entry after the job: %+v", o)
		}
	}
	// Its history has the job's events.
	hist, _ := s.Events(0, 100, func(e *Event) bool {
		for _, a := range e.Providers {
			if a == p.String() {
				return true
			}
		}
		return false
	})
	var types []string
	for _, e := range hist {
		types = append(types, e.Type)
	}
	if got := strings.Join(types, ","); !strings.Contains(got, "job_result") || !strings.Contains(got, "job_started") || !strings.Contains(got, "job_assigned") {
		t.Errorf("provider history = %s", got)
	}
	// The series is bounded.
	if n := len(s.Series(0, 100)); n != 4 {
		t.Errorf("series holds %d samples, want 4", n)
	}
	// Live updates: blocks and the job's state changes.
	var got []string
	for len(got) < 8 {
		select {
		case u := <-updates:
			if u.Job != nil {
				got = append(got, "job:"+u.Job.State)
			} else {
				got = append(got, u.Type)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("updates: %v", got)
		}
	}
	if strings.Join(got, " ") != "block block job:assigned block block job:running block job:succeeded" {
		t.Errorf("updates = %v", got)
	}
	if v := testutil.ToFloat64(s.m.jobs.WithLabelValues(ledger.JobSucceeded)); v != 1 {
		t.Errorf("gpunet_jobs{succeeded} = %v", v)
	}
	if n := testutil.CollectAndCount(s.m.schedulerWait); n != 1 {
		t.Errorf("scheduler wait series: %d", n)
	}
}

func TestChallengeEventsCount(t *testing.T) {
	RegisterChallengeEvent("test_hw_passed", "hardware", "passed")
	reg := prometheus.NewRegistry()
	s := New(&chain{}, Options{Registry: reg})
	s.m.event(ledger.Event{Type: "test_hw_passed"})
	s.m.event(ledger.Event{Type: "liveness_missed"})
	s.m.event(ledger.Event{Type: "job_assigned"})
	if v := testutil.ToFloat64(s.m.challenges.WithLabelValues("hardware", "passed")); v != 1 {
		t.Errorf("hardware passed = %v", v)
	}
	if v := testutil.ToFloat64(s.m.challenges.WithLabelValues("liveness", "missed")); v != 1 {
		t.Errorf("liveness missed = %v", v)
	}
	if v := testutil.ToFloat64(s.m.challenges.WithLabelValues("hardware", "failed")); v != 0 {
		t.Errorf("hardware failed = %v", v)
	}
}

// TestRoutes serves the stats through the API: its document covers them
// and the live stream sends server-sent events.
func TestRoutes(t *testing.T) {
	g := lt.Genesis(100_000_000_000, "consumer", "cpu")
	g.Params.LivenessRatePPM = 0
	c := newChain(t, g)
	c.block(c.tx(cpuProv, &ledger.MsgRegisterProvider{ProviderInfo: lt.ProviderInfo("", 0, 36_000)}), c.tx(cpuProv, &ledger.MsgStake{Amount: 10_000_000}))
	s := New(c, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	waitHeight(t, s, 1)

	mux := http.NewServeMux()
	for _, rt := range s.Routes() {
		mux.Handle(rt.Method+" "+rt.Path, rt.Handler)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/v1/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("stream content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	next := func() (string, string) {
		var ev, data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev = line[7:]
			case strings.HasPrefix(line, "data: "):
				data = line[6:]
			case line == "" && ev != "":
				return ev, data
			}
		}
		t.Fatalf("stream ended: %v", sc.Err())
		return "", ""
	}
	if ev, _ := next(); ev != "hello" {
		t.Fatalf("first event %q", ev)
	}
	c.block(c.tx(consumer, &ledger.MsgSubmitJob{Spec: lt.WasmJob("a", 1_000_000, 60), ConsumerKey: lt.AgeKey("consumer")}))
	ev, data := next()
	var u Update
	if err := json.Unmarshal([]byte(data), &u); err != nil || ev != "block" || u.Block.Height != 2 || u.Sample.Jobs[ledger.JobAssigned] != 1 {
		t.Fatalf("block event %q %s: %v", ev, data, err)
	}
	if ev, data = next(); ev != "job" || !strings.Contains(data, `"state":"assigned"`) {
		t.Fatalf("job event %q %s", ev, data)
	}

	get := func(path string, v any) int {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		json.NewDecoder(resp.Body).Decode(v)
		return resp.StatusCode
	}
	var tl Timeline
	if st := get("/v1/jobs/1/timeline", &tl); st != 200 || tl.State != ledger.JobAssigned || len(tl.Steps) != 2 || tl.Steps[1].What != "assigned" || len(tl.Observed) != 1 {
		t.Errorf("timeline: %d %+v", st, tl)
	}
	var eb apiwire.ErrorBody
	if st := get("/v1/jobs/9/timeline", &eb); st != 404 || eb.Code != apiwire.CodeNotFound {
		t.Errorf("missing job timeline: %d %+v", st, eb)
	}
	var page EventPage
	if st := get("/v1/events?type=job_assigned", &page); st != 200 || len(page.Events) != 1 || page.Events[0].Job != 1 {
		t.Errorf("events: %d %+v", st, page)
	}
	if st := get("/v1/events?limit=1", &page); st != 200 || len(page.Events) != 1 || page.NextCursor == "" {
		t.Errorf("events page: %d %+v", st, page)
	}
	if st := get("/v1/events?limit=0", &eb); st != 400 || eb.Code != apiwire.CodeInvalidArgument {
		t.Errorf("bad limit: %d %+v", st, eb)
	}
	var hist EventPage
	if st := get("/v1/providers/"+cpuProv.Addr.String()+"/history", &hist); st != 200 || len(hist.Events) == 0 {
		t.Errorf("history: %d %+v", st, hist)
	}
	var series SeriesPage
	if st := get("/v1/stats/series?limit=1", &series); st != 200 || len(series.Samples) != 1 || series.Samples[0].Height != 2 {
		t.Errorf("series: %d %+v", st, series)
	}
}
