// Package netstats follows a node's chain block by block and keeps what the
// dashboard and the node's metrics show: the state of every job and every
// provider's list entry (updated from each block's events, never by
// rescanning the state), a bounded time series sampled once per block, a
// bounded log of recent events, each job's observed state changes, and a
// feed of updates for live pages. It serves these over the API
// (Routes) and exports them to Prometheus.
//
// At start it reads the whole registry and every job once; after that the
// cost of a block is proportional to what the block touched. It reads what
// a block touched from the latest committed state, so when it falls behind
// (a burst of blocks, a starved CPU) it takes the newest values at once:
// counts stay exact, but a job that went through two states while it was
// behind shows only the second in its observed timeline.
package netstats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiserver"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/jobtext"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Chain is what Stats needs from a node.
type Chain interface {
	View() (ledger.KV, func())
	// Subscribe returns new block heights until ctx ends.
	Subscribe(ctx context.Context, client string) (<-chan int64, error)
	Block(ctx context.Context, height int64) (*apiwire.Block, error)
	// Mempool returns the number of txs waiting.
	Mempool() int
}

// Options tune Stats.
type Options struct {
	Logger *slog.Logger
	// Registry, when set, gets the chain's metrics.
	Registry prometheus.Registerer
	// SeriesLen is how many per-block samples are kept (default 900).
	SeriesLen int
	// EventsLen is how many recent events are kept (default 20,000).
	EventsLen int
	// Timelines is how many jobs' observed state changes are kept
	// (default 50,000, the most recent jobs).
	Timelines int
}

// Defaults of Options.
const (
	DefaultSeriesLen = 900
	DefaultEventsLen = 20_000
	DefaultTimelines = 50_000
)

// Stats is the node's view of the network. Its methods are safe for
// concurrent use.
type Stats struct {
	chain Chain
	o     Options
	log   *slog.Logger
	m     *metrics

	mu     sync.RWMutex
	ready  bool
	height uint64
	// jobs[id] is job id's state (an index into ledger job states + 1; 0:
	// none). Ids are dense from 1.
	jobs      []uint8
	jobCounts [len(States)]uint64
	// providers and their list entries; entries are replaced, never
	// modified, so snapshots may be shared.
	provIdx   map[address.Address]int
	provs     []*provider
	agg       *aggregate // of provs
	interned  interner   // used by load and apply only
	offerSnap []*apiwire.ProviderOffer
	series    ring[Sample]
	events    ring[Event]
	eventSeq  uint64
	timelines map[uint64][]Transition
	tlOrder   []uint64
	recent    ring[blockStat] // for tx/s
	lastBlock *BlockSummary
	watch     jobWatch // used by load and apply only

	subMu sync.Mutex
	subs  map[chan Update]struct{}
}

// States are the job states in the order the stats list them.
var States = [...]string{ledger.JobQueued, ledger.JobAssigned, ledger.JobRunning, ledger.JobVerifying, ledger.JobSucceeded, ledger.JobFailed, ledger.JobCancelled}

func stateIndex(s string) uint8 {
	for i, st := range States {
		if st == s {
			return uint8(i + 1)
		}
	}
	return 0
}

// provider is what Stats keeps of a provider. It is replaced, never
// modified.
type provider struct {
	offer   *apiwire.ProviderOffer
	asks    []ledger.Ask
	gpus    []gpuCount // by class, sorted
	maxJobs uint64
	jobs    uint64
}

// gpuCount is how many GPUs of a class a provider has.
type gpuCount struct {
	class string
	n     int
}

// Sample is the network at one block.
type Sample struct {
	Height        uint64    `json:"height"`
	Time          time.Time `json:"time"`
	Txs           int       `json:"txs"`      // in this block
	TxRate        float64   `json:"tx_per_s"` // over the last blocks
	Mempool       int       `json:"mempool"`
	Providers     int       `json:"providers"`
	Online        int       `json:"providers_online"`
	GPUsOnline    int       `json:"gpus_online"`
	Slots         uint64    `json:"slots"`      // job slots of online providers
	BusySlots     uint64    `json:"busy_slots"` // of which running jobs
	Utilization   float64   `json:"utilization"`
	Jobs          JobCounts `json:"jobs"`
	MedianPrice   PriceMap  `json:"median_price"` // SYNC per unit-hour, by hardware class, over online providers' asks
	BlockInterval float64   `json:"block_interval_s"`
}

// JobCounts are jobs by state.
type JobCounts map[string]uint64

// PriceMap is a price by hardware class.
type PriceMap map[string]float64

// Event is something the chain did, as the event log keeps it.
type Event struct {
	Seq       uint64        `json:"seq"`
	Height    uint64        `json:"height"`
	Time      time.Time     `json:"time"`
	Type      string        `json:"type"`
	Job       uint64        `json:"job,omitempty"`
	Providers []string      `json:"providers,omitempty"`
	Tx        string        `json:"tx,omitempty"` // the tx that caused it; empty for the block's own events
	Attrs     []ledger.Attr `json:"attrs"`
}

// Transition is a job state change the node saw.
type Transition struct {
	State  string    `json:"state"`
	Reason string    `json:"reason,omitempty"`
	Height uint64    `json:"height"`
	Time   time.Time `json:"time"`
}

// BlockSummary is the latest block as the live feed reports it.
type BlockSummary struct {
	Height uint64    `json:"height"`
	Time   time.Time `json:"time"`
	Txs    int       `json:"txs"`
	Hash   string    `json:"hash"`
}

type blockStat struct {
	time time.Time
	txs  int
}

// New returns Stats for chain; Run fills and updates them.
func New(chain Chain, o Options) *Stats {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.SeriesLen <= 0 {
		o.SeriesLen = DefaultSeriesLen
	}
	if o.EventsLen <= 0 {
		o.EventsLen = DefaultEventsLen
	}
	if o.Timelines <= 0 {
		o.Timelines = DefaultTimelines
	}
	s := &Stats{
		chain: chain, o: o, log: o.Logger,
		provIdx:   map[address.Address]int{},
		series:    newRing[Sample](o.SeriesLen),
		events:    newRing[Event](o.EventsLen),
		recent:    newRing[blockStat](20),
		timelines: map[uint64][]Transition{},
		subs:      map[chan Update]struct{}{},
		watch:     newJobWatch(),
	}
	s.m = newMetrics(s, o.Registry)
	return s
}

// Ready reports whether the initial load is done.
func (s *Stats) Ready() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ready
}

// Run loads the state, then follows the chain until ctx ends.
func (s *Stats) Run(ctx context.Context) error {
	heights, err := s.chain.Subscribe(ctx, "netstats")
	if err != nil {
		return fmt.Errorf("netstats: subscribe to blocks: %w", err)
	}
	// A node joining by state sync has no state until its snapshot is
	// restored: load once blocks come.
	for !s.hasChain() {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-heights:
			if !ok {
				return errors.New("netstats: the node's block feed closed")
			}
		}
	}
	start := time.Now()
	if err := s.load(ctx); err != nil {
		return err
	}
	s.log.Info("netstats loaded", "height", s.height, "providers", len(s.provs), "jobs", len(s.jobs), "took", time.Since(start).Round(time.Millisecond))
	for {
		select {
		case <-ctx.Done():
			return nil
		case h, ok := <-heights:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return errors.New("netstats: the node's block feed closed")
			}
			if err := s.catchUp(ctx, uint64(h)); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				s.log.Warn("netstats: following the chain", "err", err)
			}
		}
	}
}

// hasChain reports whether the node's state has a chain (a node restoring
// a snapshot has none yet).
func (s *Stats) hasChain() bool {
	kv, release := s.chain.View()
	defer release()
	return ledger.ChainID(kv) != ""
}

// load reads the registry and every job.
func (s *Stats) load(ctx context.Context) error {
	kv, release := s.chain.View()
	defer release()
	params, err := ledger.GetParams(kv)
	if err != nil {
		return fmt.Errorf("netstats: %w", err)
	}
	var provs []*provider
	idx := map[address.Address]int{}
	if err := ledger.IterateProviders(kv, func(p *ledger.Provider) bool {
		idx[p.Address] = len(provs)
		provs = append(provs, providerOf(p, params, &s.interned))
		return ctx.Err() == nil
	}); err != nil {
		return fmt.Errorf("netstats: %w", err)
	}
	last := ledger.LastJobID(kv)
	jobs := make([]uint8, last+1)
	var counts [len(States)]uint64
	if err := ledger.JobsFrom(kv, 1, func(j *ledger.Job) bool {
		if j.ID < uint64(len(jobs)) {
			st := stateIndex(j.State)
			jobs[j.ID] = st
			if st > 0 {
				counts[st-1]++
			}
		}
		s.watch.loaded(j)
		return ctx.Err() == nil
	}); err != nil {
		return fmt.Errorf("netstats: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.m.queue(s.watch.perClass)
	s.mu.Lock()
	s.height = ledger.Height(kv)
	s.provs, s.provIdx, s.agg = provs, idx, newAggregate(provs)
	s.jobs, s.jobCounts = jobs, counts
	s.rebuildOffers()
	s.ready = true
	s.mu.Unlock()
	return nil
}

// providerOf is what Stats keeps of p. The strings that providers repeat
// (regions, classes, executors) are shared, not kept once per provider:
// with 100k providers they were a third of the node's live heap objects,
// which every GC cycle marks.
func providerOf(p *ledger.Provider, params ledger.Params, in *interner) *provider {
	po := apiserver.ProviderOfferOf(p, params)
	po.Region, po.GPU, po.ComputeCap = in.str(po.Region), in.str(po.GPU), in.str(po.ComputeCap)
	po.Executor = in.strs(po.Executor)
	for i := range p.Asks {
		p.Asks[i].Class = in.str(p.Asks[i].Class)
	}
	pr := &provider{offer: &po, asks: p.Asks, maxJobs: p.MaxJobs, jobs: p.Jobs}
	for _, g := range p.Inventory.GPUs {
		i, found := slices.BinarySearchFunc(pr.gpus, g.Class, func(c gpuCount, class string) int { return strings.Compare(c.class, class) })
		if !found {
			pr.gpus = slices.Insert(pr.gpus, i, gpuCount{class: in.str(g.Class)})
		}
		pr.gpus[i].n++
	}
	return pr
}

// interner shares equal strings and string lists. It is used by one
// goroutine at a time (the one that loads and applies blocks).
type interner struct {
	strings map[string]string
	lists   map[string][]string
}

// maxInterned bounds what an interner keeps (values from the chain are
// the providers' own: many could be unique).
const maxInterned = 4096

func (in *interner) str(s string) string {
	if v, ok := in.strings[s]; ok {
		return v
	}
	if in.strings == nil {
		in.strings = map[string]string{}
	}
	if len(in.strings) < maxInterned {
		in.strings[s] = s
	}
	return s
}

// strs returns a list equal to l, shared with the other callers that
// passed an equal one: callers must not modify it.
func (in *interner) strs(l []string) []string {
	var b []byte
	for _, e := range l {
		b = strconv.AppendInt(b, int64(len(e)), 10)
		b = append(b, ':')
		b = append(b, e...)
	}
	key := string(b)
	if v, ok := in.lists[key]; ok {
		return v
	}
	if in.lists == nil {
		in.lists = map[string][]string{}
	}
	for i := range l {
		l[i] = in.str(l[i])
	}
	if len(in.lists) < maxInterned {
		in.lists[key] = l
	}
	return l
}

func (s *Stats) rebuildOffers() {
	snap := make([]*apiwire.ProviderOffer, len(s.provs))
	for i, p := range s.provs {
		snap[i] = p.offer
	}
	s.offerSnap = snap
}

// catchUp processes the blocks after the last one seen up to h.
func (s *Stats) catchUp(ctx context.Context, h uint64) error {
	for {
		s.mu.RLock()
		next := s.height + 1
		s.mu.RUnlock()
		if next > h {
			return nil
		}
		b, err := s.chain.Block(ctx, int64(next))
		if err != nil {
			return err
		}
		if b == nil {
			return fmt.Errorf("block %d is not in the block store", next)
		}
		s.apply(ctx, b)
	}
}

// touched collects what a block's events name.
type touched struct {
	jobs  map[uint64]bool
	provs map[address.Address]bool
}

func (t *touched) event(e ledger.Event) (job uint64, provs []string) {
	for _, a := range e.Attrs {
		switch a.Key {
		case "job":
			if id, err := strconv.ParseUint(a.Value, 10, 64); err == nil {
				t.jobs[id], job = true, id
			}
		case "provider", "providers", "address", "from", "to":
			for _, v := range strings.Split(a.Value, ",") {
				if addr, err := address.Parse(v); err == nil {
					t.provs[addr] = true
					if a.Key != "from" && a.Key != "to" && a.Key != "address" {
						provs = append(provs, v)
					}
				}
			}
		}
	}
	return job, provs
}

// apply folds block b into the stats.
func (s *Stats) apply(ctx context.Context, b *apiwire.Block) {
	t := &touched{jobs: map[uint64]bool{}, provs: map[address.Address]bool{}}
	var evs []Event
	submitted, placed, ended := map[uint64]bool{}, map[uint64]bool{}, map[uint64]bool{}
	add := func(e ledger.Event, tx string) {
		job, provs := t.event(e)
		evs = append(evs, Event{Height: uint64(b.Height), Time: b.Time, Type: e.Type, Job: job, Providers: provs, Tx: tx, Attrs: e.Attrs})
		s.m.event(e)
		switch e.Type {
		case "job_submitted":
			submitted[job] = true
		case "job_assigned":
			placed[job] = true
		case "job_" + ledger.JobSucceeded, "job_" + ledger.JobFailed, "job_" + ledger.JobCancelled:
			ended[job] = true
		}
	}
	for _, tx := range b.Txs {
		for _, e := range tx.Events {
			add(e, tx.Hash)
		}
	}
	for _, e := range b.Events {
		add(e, "")
	}

	kv, release := s.chain.View()
	params, _ := ledger.GetParams(kv)
	// Jobs first: a changed job also touches its providers (their job
	// counts and earnings).
	type jobChange struct {
		id   uint64
		prev uint8
		job  *ledger.Job
	}
	var changes []jobChange
	ids := make([]uint64, 0, len(t.jobs))
	for id := range t.jobs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		j, found, err := ledger.GetJob(kv, id)
		if err != nil || !found {
			continue
		}
		for _, a := range j.Assignments {
			t.provs[a.Provider] = true
		}
		changes = append(changes, jobChange{id: id, job: j})
	}
	provs := make(map[address.Address]*provider, len(t.provs))
	for a := range t.provs {
		if p, found, err := ledger.GetProvider(kv, a); err == nil && found {
			provs[a] = providerOf(p, params, &s.interned)
		}
	}
	totals := totalsOf(kv)
	release()
	mempool := s.chain.Mempool()
	jobs := make([]*ledger.Job, len(changes))
	for i, c := range changes {
		jobs[i] = c.job
		s.watch.setQueued(c.job)
		if ended[c.id] {
			s.m.jobEnded(c.job)
		}
	}
	s.m.queue(s.watch.perClass)
	for _, w := range s.watch.waits(ctx, blockRef{uint64(b.Height), b.Time}, jobs, submitted, placed, s.blockTime) {
		s.m.schedulerWait.Observe(w)
	}

	s.mu.Lock()
	var updates []Update
	for i := range changes {
		c := &changes[i]
		for uint64(len(s.jobs)) <= c.id {
			s.jobs = append(s.jobs, 0)
		}
		c.prev = s.jobs[c.id]
		st := stateIndex(c.job.State)
		if c.prev == st {
			continue
		}
		if c.prev > 0 {
			s.jobCounts[c.prev-1]--
		}
		if st > 0 {
			s.jobCounts[st-1]++
		}
		s.jobs[c.id] = st
		s.addTransition(c.id, c.prev, c.job, uint64(b.Height), b.Time)
		updates = append(updates, Update{Type: "job", Job: &JobUpdate{ID: c.id, State: c.job.State, Reason: jobtext.Job(c.job), Owner: c.job.Owner.String()}})
	}
	changedProvs := false
	for a, p := range provs {
		if i, ok := s.provIdx[a]; ok {
			s.agg.replace(s.provs[i], p)
			s.provs[i] = p
		} else {
			s.agg.replace(nil, p)
			s.provIdx[a] = len(s.provs)
			s.provs = append(s.provs, p)
		}
		changedProvs = true
	}
	if changedProvs {
		s.rebuildOffers()
	}
	for i := range evs {
		s.eventSeq++
		evs[i].Seq = s.eventSeq
		s.events.push(evs[i])
	}
	s.height = uint64(b.Height)
	s.recent.push(blockStat{time: b.Time, txs: len(b.Txs)})
	sample := s.sampleOf(b, mempool)
	last := &BlockSummary{Height: uint64(b.Height), Time: b.Time, Txs: len(b.Txs), Hash: b.Hash}
	s.series.push(sample)
	s.lastBlock = last
	s.mu.Unlock()
	s.m.block(sample, totals)

	s.publish(Update{Type: "block", Block: last, Sample: &sample})
	for _, u := range updates {
		s.publish(u)
	}
}

// blockTime reads block height's time.
func (s *Stats) blockTime(ctx context.Context, height uint64) (time.Time, bool) {
	b, err := s.chain.Block(ctx, int64(height))
	if err != nil || b == nil {
		return time.Time{}, false
	}
	return b.Time, true
}

// addTransition records a job's state change; the caller holds mu.
func (s *Stats) addTransition(id uint64, prev uint8, j *ledger.Job, height uint64, at time.Time) {
	tl, known := s.timelines[id]
	if !known {
		if len(s.tlOrder) >= s.o.Timelines {
			delete(s.timelines, s.tlOrder[0])
			s.tlOrder = s.tlOrder[1:]
		}
		s.tlOrder = append(s.tlOrder, id)
		if prev != 0 {
			// Seen before this node followed it: start from what it was.
			tl = append(tl, Transition{State: States[prev-1]})
		}
	}
	s.timelines[id] = append(tl, Transition{State: j.State, Reason: jobtext.Job(j), Height: height, Time: at})
}

// sampleOf computes the network's figures at block b; the caller holds
// mu. recent is only touched by the goroutine that applies blocks.
func (s *Stats) sampleOf(b *apiwire.Block, mempool int) Sample {
	sm := Sample{Height: uint64(b.Height), Time: b.Time, Txs: len(b.Txs), Mempool: mempool, Providers: len(s.provs), Jobs: JobCounts{}}
	s.agg.fill(&sm)
	for i, st := range States {
		sm.Jobs[st] = s.jobCounts[i]
	}
	if n := s.recent.len(); n >= 2 {
		first, last := s.recent.at(0), s.recent.at(n-1)
		if span := last.time.Sub(first.time).Seconds(); span > 0 {
			txs := 0
			for i := 1; i < n; i++ {
				txs += s.recent.at(i).txs
			}
			sm.TxRate = float64(txs) / span
			sm.BlockInterval = span / float64(n-1)
		}
	}
	return sm
}

// Offers returns every provider's list entry and the height they are
// from; ok is false before the initial load. It is an
// apiserver.OfferSource.
func (s *Stats) Offers() (uint64, []*apiwire.ProviderOffer, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.height, s.offerSnap, s.ready
}

// Overview is the network now.
type Overview struct {
	Ready bool `json:"ready"`
	// Latest is the last block's sample (absent before the first block
	// after start).
	Latest    *Sample       `json:"latest,omitempty"`
	LastBlock *BlockSummary `json:"last_block,omitempty"`
	Height    uint64        `json:"height"`
	Providers int           `json:"providers"`
	Online    int           `json:"providers_online"`
	// GPUs online by hardware class ("cpu": CPU-only providers, counted
	// in cores).
	ByClass []ClassCount `json:"by_class"`
	// Providers and GPUs online by region.
	ByRegion []RegionCount `json:"by_region"`
	Jobs     JobCounts     `json:"jobs"`
}

// ClassCount is the online capacity of one hardware class.
type ClassCount struct {
	Class       string  `json:"class"`
	Providers   int     `json:"providers"`
	Units       int     `json:"units"` // GPUs, or cores for "cpu"
	MedianPrice float64 `json:"median_price"`
}

// RegionCount is the online capacity of one region.
type RegionCount struct {
	Region    string `json:"region"`
	Providers int    `json:"providers"`
	GPUs      int    `json:"gpus"`
}

// Overview returns the network now. It costs what the number of classes
// and regions does: the figures are kept up to date block by block.
func (s *Stats) Overview() Overview {
	s.mu.RLock()
	defer s.mu.RUnlock()
	o := Overview{Ready: s.ready, Height: s.height, Providers: len(s.provs), LastBlock: s.lastBlock, Jobs: JobCounts{}, ByClass: []ClassCount{}, ByRegion: []RegionCount{}}
	if n := s.series.len(); n > 0 {
		last := s.series.at(n - 1)
		o.Latest = &last
	}
	for i, st := range States {
		o.Jobs[st] = s.jobCounts[i]
	}
	if s.agg != nil {
		o.Online, o.ByClass, o.ByRegion = s.agg.online, s.agg.byClass(), s.agg.byRegion()
	}
	return o
}

// Series returns up to n samples, oldest first, of blocks above after.
func (s *Stats) Series(after uint64, n int) []Sample {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []Sample{}
	for i := max(0, s.series.len()-n); i < s.series.len(); i++ {
		if sm := s.series.at(i); sm.Height > after {
			out = append(out, sm)
		}
	}
	return out
}

// JobsInState returns up to limit ids of jobs in state below before (all
// when 0), newest first, and whether older ones remain; ok is false
// before the initial load or for an unknown state. It serves
// apiserver.Options.JobsInState.
func (s *Stats) JobsInState(state string, before uint64, limit int) (ids []uint64, more, ok bool) {
	st := stateIndex(state)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.ready || st == 0 {
		return nil, false, false
	}
	top := uint64(len(s.jobs))
	if before > 0 && before < top {
		top = before
	}
	for id := top; id > 1; {
		id--
		if s.jobs[id] != st {
			continue
		}
		if len(ids) == limit {
			return ids, true, true
		}
		ids = append(ids, id)
	}
	return ids, false, true
}

// Timeline returns job id's observed state changes (nil if the node saw
// none).
func (s *Stats) Timeline(id uint64) []Transition {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.timelines[id])
}

// Events returns up to limit events before seq before (the newest when 0),
// newest first, that match keep (all when nil), and the seq to continue
// below (0: none left).
func (s *Stats) Events(before uint64, limit int, keep func(*Event) bool) ([]Event, uint64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []Event{}
	for i := s.events.len() - 1; i >= 0; i-- {
		e := s.events.at(i)
		if before > 0 && e.Seq >= before {
			continue
		}
		if keep != nil && !keep(&e) {
			continue
		}
		if len(out) == limit {
			return out, out[len(out)-1].Seq
		}
		out = append(out, e)
	}
	return out, 0
}

// ring is a bounded FIFO.
type ring[T any] struct {
	buf   []T
	start int
	n     int
}

func newRing[T any](size int) ring[T] { return ring[T]{buf: make([]T, size)} }

func (r *ring[T]) push(v T) {
	if r.n < len(r.buf) {
		r.buf[(r.start+r.n)%len(r.buf)] = v
		r.n++
		return
	}
	r.buf[r.start] = v
	r.start = (r.start + 1) % len(r.buf)
}

func (r *ring[T]) len() int { return r.n }

// at returns the i-th oldest element.
func (r *ring[T]) at(i int) T { return r.buf[(r.start+i)%len(r.buf)] }
