package openaigw

import (
	"bytes"
	"slices"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

// The weights of a candidate's score terms (route.go's [score]). Each term
// is in [0, 1], so a weight says how much that term may outweigh another:
// price, latency and load count the same, reputation (which the ledger
// already uses to place replicas) half as much.
const (
	weightPrice      = 1.0
	weightLatency    = 1.0
	weightLoad       = 1.0
	weightReputation = 0.5
)

// Latency measurement: each new sample moves the average by ewmaAlpha; a
// replica that could not be dialled counts as a sample of failurePenalty,
// so that it is tried again only after the others or once it has answered
// quickly a few times.
const (
	ewmaAlpha      = 0.3
	failurePenalty = 10 * time.Second
	// statsKeep is how long a replica's measurements are kept after its
	// last use, and statsPruneAt how many replicas' measurements there are
	// before the old ones are dropped.
	statsKeep    = time.Hour
	statsPruneAt = 1024
)

// maxReputation is the ledger's reputation scale (parts per million).
const maxReputation = 1_000_000

// A candidate is a routable replica of a service the caller may use, with
// what this node knows of it.
type candidate struct {
	Service    *ledger.Service
	Credential string // for Options.Dial
	Provider   address.Address
	Price      uint64        // usync per hour, as agreed at placement
	Latency    time.Duration // this node's EWMA of its time to first byte; 0: not measured yet
	InFlight   int           // requests this node has in flight to it
	Reputation uint64        // its provider's, parts per million
	Score      float64       // lower is better; set by rank
}

// routable reports whether a replica of svc takes traffic: its provider has
// reported it ready (and it was ready once: ReadyAt) and svc is active.
func routable(svc *ledger.Service, r *ledger.Replica) bool {
	return !svc.Done() && r.Ready && r.ReadyAt != 0
}

// rank scores each candidate and sorts them best first.
//
// A candidate's score is the weighted sum of four terms, each in [0, 1]
// and lower for a better replica: its price over the dearest candidate's;
// its measured latency over the slowest candidate's (an unmeasured replica
// counts as the fastest, so that each is tried once and then measured);
// its requests in flight over the busiest candidate's; and its provider's
// missing reputation (1 - reputation). Equal scores are ordered by service
// id, then provider address, so that the choice is deterministic.
func rank(cs []candidate) {
	var maxPrice uint64
	var maxLatency time.Duration
	maxInFlight := 0
	for _, c := range cs {
		maxPrice = max(maxPrice, c.Price)
		maxLatency = max(maxLatency, c.Latency)
		maxInFlight = max(maxInFlight, c.InFlight)
	}
	for i := range cs {
		c := &cs[i]
		var s float64
		if maxPrice > 0 {
			s += weightPrice * float64(c.Price) / float64(maxPrice)
		}
		if maxLatency > 0 {
			s += weightLatency * float64(c.Latency) / float64(maxLatency)
		}
		if maxInFlight > 0 {
			s += weightLoad * float64(c.InFlight) / float64(maxInFlight)
		}
		rep := min(c.Reputation, maxReputation)
		s += weightReputation * float64(maxReputation-rep) / maxReputation
		c.Score = s
	}
	slices.SortStableFunc(cs, func(a, b candidate) int {
		switch {
		case a.Score < b.Score:
			return -1
		case a.Score > b.Score:
			return 1
		case a.Service.ID != b.Service.ID:
			if a.Service.ID < b.Service.ID {
				return -1
			}
			return 1
		}
		return bytes.Compare(a.Provider[:], b.Provider[:])
	})
}

// replicaKey names a replica at this node.
type replicaKey struct {
	service  uint64
	provider address.Address
}

type replicaStats struct {
	latency  time.Duration // EWMA; 0: none yet
	inFlight int
	used     time.Time
}

// stats is this node's measurements of the replicas it routes to.
type stats struct {
	mu sync.Mutex
	m  map[replicaKey]*replicaStats
}

func newStats() *stats { return &stats{m: map[replicaKey]*replicaStats{}} }

// get returns k's latency and requests in flight.
func (s *stats) get(k replicaKey) (time.Duration, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.m[k]; st != nil {
		return st.latency, st.inFlight
	}
	return 0, 0
}

// entry returns k's stats, made if needed; s.mu is held.
func (s *stats) entry(k replicaKey, now time.Time) *replicaStats {
	st := s.m[k]
	if st == nil {
		if len(s.m) >= statsPruneAt {
			for k2, st2 := range s.m {
				if st2.inFlight == 0 && now.Sub(st2.used) > statsKeep {
					delete(s.m, k2)
				}
			}
		}
		st = &replicaStats{}
		s.m[k] = st
	}
	st.used = now
	return st
}

// begin counts a request in flight to k; the returned func ends it.
func (s *stats) begin(k replicaKey, now time.Time) (end func()) {
	s.mu.Lock()
	s.entry(k, now).inFlight++
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if st := s.m[k]; st != nil {
				st.inFlight--
			}
			s.mu.Unlock()
		})
	}
}

// observe adds a latency sample for k.
func (s *stats) observe(k replicaKey, d time.Duration, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.entry(k, now)
	if st.latency == 0 {
		st.latency = max(d, 1)
		return
	}
	st.latency = time.Duration(ewmaAlpha*float64(d) + (1-ewmaAlpha)*float64(st.latency))
}
