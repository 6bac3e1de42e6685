package apiserver

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/offers"
)

// offerSnap is every provider's list entry at one height.
type offerSnap struct {
	height uint64
	all    []*ProviderOffer
}

// offerCache keeps the latest snapshot so that the requests of one height
// (a dashboard paging and filtering, several clients) decode the registry
// once.
type offerCache struct {
	mu   sync.Mutex
	snap *offerSnap

	// Sorted matches of recent queries. An entry from an older height
	// than the latest is served (its height says so) while it is
	// recomputed in the background, if at most maxStaleBlocks old: a
	// query over 100k providers (filter and sort) takes tens of
	// milliseconds, more than a page read may.
	rmu     sync.Mutex
	results map[resultKey]*resultEntry
	// refresh holds a token while a background recompute runs: one at a
	// time, so that they never take every core from the requests.
	refresh chan struct{}
}

type resultKey struct {
	q, sort string
	all     bool
}

type resultEntry struct {
	height  uint64
	matched []*ProviderOffer
	// src is the snapshot it was computed from: a later height with the
	// same snapshot (no provider changed) has the same answer.
	src       []*ProviderOffer
	computing bool
	used      time.Time
}

// sameSnapshot reports whether a and b are the same list of entries.
func sameSnapshot(a, b []*ProviderOffer) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

const (
	maxCachedQueries = 64
	maxStaleBlocks   = 3
)

// OfferSource supplies every provider's list entry and the height it is
// from, kept up to date by the node (netstats) so that offers queries do
// not decode the whole registry. ok is false until it has one. Callers
// must not modify the entries.
type OfferSource func() (height uint64, all []*ProviderOffer, ok bool)

// offerSnapshot returns the providers' entries at the latest height: from
// Options.Offers when it has them, else decoded from the state once per
// height.
func (s *Server) offerSnapshot(ctx context.Context) (*offerSnap, error) {
	if s.opts.Offers != nil {
		if h, all, ok := s.opts.Offers(); ok {
			return &offerSnap{height: h, all: all}, nil
		}
	}
	kv, release := s.chain.View()
	defer release()
	h := ledger.Height(kv)
	s.offers.mu.Lock()
	defer s.offers.mu.Unlock()
	if s.offers.snap != nil && s.offers.snap.height == h {
		return s.offers.snap, nil
	}
	params, err := ledger.GetParams(kv)
	if err != nil {
		return nil, err
	}
	snap := &offerSnap{height: h}
	err = ledger.IterateProviders(kv, func(p *ledger.Provider) bool {
		po := ProviderOfferOf(p, params)
		snap.all = append(snap.all, &po)
		return ctx.Err() == nil
	})
	if err != nil {
		return nil, err
	}
	if ctx.Err() == nil {
		s.offers.snap = snap
	}
	return snap, nil
}

// matchOffers returns the providers of snap that q matches (only the
// schedulable ones unless all), sorted by keys.
func matchOffers(ctx context.Context, snap *offerSnap, q *offers.Query, keys []offers.SortKey, all bool) []*ProviderOffer {
	matched := make([]*ProviderOffer, 0, 64)
	for i, po := range snap.all {
		if (all || po.Schedulable) && q.Match(&po.Offer) {
			matched = append(matched, po)
		}
		if i%4096 == 4095 && ctx.Err() != nil {
			return nil
		}
	}
	sortProviderOffers(matched, keys)
	return matched
}

// queryOffers answers an offers query from the cache when it holds the
// query at snap's height, or at most maxStaleBlocks before (recomputing it
// in the background); else it computes it now. It returns the matches and
// the height they are from.
func (s *Server) queryOffers(ctx context.Context, snap *offerSnap, q *offers.Query, keys []offers.SortKey, all bool) ([]*ProviderOffer, uint64) {
	k := resultKey{q: q.String(), all: all}
	for _, sk := range keys {
		k.sort += sk.String() + ","
	}
	c := &s.offers
	c.rmu.Lock()
	e := c.results[k]
	if e != nil && e.matched != nil && e.height < snap.height && sameSnapshot(e.src, snap.all) {
		e.height = snap.height // nothing changed since
	}
	if e != nil && e.matched != nil && (e.height == snap.height || e.height+maxStaleBlocks >= snap.height) {
		e.used = time.Now()
		matched, h := e.matched, e.height
		if e.height != snap.height && !e.computing {
			select {
			case c.refresh <- struct{}{}:
				e.computing = true
				go func() {
					m := matchOffers(context.Background(), snap, q, keys, all)
					<-c.refresh
					c.rmu.Lock()
					e.matched, e.src, e.height, e.computing = m, snap.all, snap.height, false
					c.rmu.Unlock()
				}()
			default: // another refresh runs; a later request starts this one
			}
		}
		c.rmu.Unlock()
		return matched, h
	}
	c.rmu.Unlock()
	matched := matchOffers(ctx, snap, q, keys, all)
	if ctx.Err() != nil {
		return nil, snap.height
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.results == nil {
		c.results = map[resultKey]*resultEntry{}
	}
	if e := c.results[k]; e != nil && e.height > snap.height {
		return matched, snap.height // a newer one landed meanwhile
	}
	if len(c.results) >= maxCachedQueries {
		// Evict the least recently used.
		keys := make([]resultKey, 0, len(c.results))
		for rk := range c.results {
			keys = append(keys, rk)
		}
		oldest := slices.MinFunc(keys, func(a, b resultKey) int { return c.results[a].used.Compare(c.results[b].used) })
		if !c.results[oldest].computing {
			delete(c.results, oldest)
		}
	}
	c.results[k] = &resultEntry{height: snap.height, matched: matched, src: snap.all, used: time.Now()}
	return matched, snap.height
}
