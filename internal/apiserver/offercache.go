package apiserver

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/offers"
)

// offerSnap is every provider's list entry at one height.
type offerSnap struct {
	height uint64
	all    []*apiwire.ProviderOffer
}

// offerCache keeps what offers queries share: the latest snapshot (so that
// the requests of one height decode the registry once), the snapshot
// sorted in each order asked for, and the answers of recent queries.
//
// Sorting 100k providers takes tens of milliseconds, more than a page read
// may; filtering a sorted list a few. So each order is sorted once, and
// when the snapshot changes (a block changed a few providers) the sorted
// list is brought up to date by taking out the entries that were replaced
// and merging in their replacements. A query's answer is then one pass
// over the sorted list, kept while the snapshot does not change.
type offerCache struct {
	mu   sync.Mutex
	snap *offerSnap

	smu    sync.Mutex
	sorted map[string]*sortedEntry // by sort keys

	rmu     sync.Mutex
	results map[resultKey]*resultEntry
}

// sortedEntry is a snapshot sorted in one order.
type sortedEntry struct {
	mu   sync.Mutex // held while it is brought up to date: one sort at a time
	src  []*apiwire.ProviderOffer
	list []*apiwire.ProviderOffer
	used time.Time // under offerCache.smu
}

type resultKey struct {
	q, sort string
	all     bool
	// teeAt is the block time a query on tee was answered at (0 for
	// other queries): an attestation that expires changes the answer
	// without changing the snapshot.
	teeAt int64
}

type resultEntry struct {
	matched []*apiwire.ProviderOffer
	// src is the snapshot it was computed from: a later height with the
	// same snapshot (no provider changed) has the same answer.
	src  []*apiwire.ProviderOffer
	used time.Time
}

// sameSnapshot reports whether a and b are the same list of entries.
func sameSnapshot(a, b []*apiwire.ProviderOffer) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

const (
	maxCachedQueries = 64
	maxSortOrders    = 16
	// maxResortShare: when more than one entry in maxResortShare changed,
	// a sorted list is sorted again from scratch.
	maxResortShare = 8
)

// OfferSource supplies every provider's list entry and the height it is
// from, kept up to date by the node (netstats) so that offers queries do
// not decode the whole registry. ok is false until it has one. Callers
// must not modify the entries.
type OfferSource func() (height uint64, all []*apiwire.ProviderOffer, ok bool)

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

// sortedBy returns snap's entries sorted by keys, from the cache when it
// holds them, else brought up to date from the order's previous snapshot,
// else sorted now.
func (c *offerCache) sortedBy(snap *offerSnap, keys []offers.SortKey) []*apiwire.ProviderOffer {
	k := ""
	for _, sk := range keys {
		k += sk.String() + ","
	}
	c.smu.Lock()
	e := c.sorted[k]
	if e == nil {
		if c.sorted == nil {
			c.sorted = map[string]*sortedEntry{}
		}
		if len(c.sorted) >= maxSortOrders {
			oldest := ""
			for sk, se := range c.sorted {
				if oldest == "" || se.used.Before(c.sorted[oldest].used) {
					oldest = sk
				}
			}
			delete(c.sorted, oldest)
		}
		e = &sortedEntry{}
		c.sorted[k] = e
	}
	e.used = time.Now()
	c.smu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.src != nil && sameSnapshot(e.src, snap.all) {
		return e.list
	}
	cmp := offerComparer(keys)
	list, ok := resort(e.src, e.list, snap.all, cmp, nil)
	if !ok {
		list = slices.Clone(snap.all)
		slices.SortFunc(list, cmp)
	}
	e.src, e.list = snap.all, list
	return list
}

func offerComparer(keys []offers.SortKey) func(a, b *apiwire.ProviderOffer) int {
	cmp := offers.Comparer(keys)
	return func(a, b *apiwire.ProviderOffer) int { return cmp(&a.Offer, &b.Offer) }
}

// resort returns the entries of newSrc that keep accepts (all when keep
// is nil) sorted by cmp, given oldList: those of oldSrc, sorted. Entries
// are replaced, never modified, so the entries that differ position by
// position between the two snapshots are all that changed: it takes those
// of oldSrc out of oldList and merges in those of newSrc. ok is false when
// too many changed (or oldList is not what it should be): compute the list
// from scratch instead.
func resort(oldSrc, oldList, newSrc []*apiwire.ProviderOffer, cmp func(a, b *apiwire.ProviderOffer) int, keep func(*apiwire.ProviderOffer) bool) (list []*apiwire.ProviderOffer, ok bool) {
	if oldSrc == nil || (keep == nil && len(oldList) != len(oldSrc)) {
		return nil, false
	}
	if keep == nil {
		keep = func(*apiwire.ProviderOffer) bool { return true }
	}
	limit := max(len(newSrc)/maxResortShare, 1)
	var removed, added []*apiwire.ProviderOffer
	changed := 0
	for i := range max(len(oldSrc), len(newSrc)) {
		var o, n *apiwire.ProviderOffer
		if i < len(oldSrc) {
			o = oldSrc[i]
		}
		if i < len(newSrc) {
			n = newSrc[i]
		}
		if o == n {
			continue
		}
		if changed++; changed > limit {
			return nil, false
		}
		if o != nil && keep(o) {
			removed = append(removed, o)
		}
		if n != nil && keep(n) {
			added = append(added, n)
		}
	}
	// Where the removed entries are in oldList: the order ends with the
	// address, so an entry's place is found by binary search (then among
	// the entries that compare equal to it, should addresses repeat).
	drop := make([]int, 0, len(removed))
	for _, o := range removed {
		i, _ := slices.BinarySearchFunc(oldList, o, cmp)
		for i < len(oldList) && oldList[i] != o && cmp(oldList[i], o) == 0 {
			i++
		}
		if i == len(oldList) || oldList[i] != o {
			return nil, false
		}
		drop = append(drop, i)
	}
	slices.Sort(drop)
	slices.SortFunc(added, cmp)
	at := make([]int, len(added)) // where each added entry goes in oldList
	for j, n := range added {
		at[j], _ = slices.BinarySearchFunc(oldList, n, cmp)
	}
	list = make([]*apiwire.ProviderOffer, 0, len(oldList)-len(removed)+len(added))
	from := 0 // oldList[from:] is still to copy
	copyTo := func(end int) {
		for ; len(drop) > 0 && drop[0] < end; drop = drop[1:] {
			list = append(list, oldList[from:drop[0]]...)
			from = drop[0] + 1
		}
		list = append(list, oldList[from:end]...)
		from = end
	}
	for j, n := range added {
		copyTo(at[j])
		list = append(list, n)
	}
	copyTo(len(oldList))
	if len(list) != len(oldList)-len(removed)+len(added) {
		return nil, false
	}
	return list, true
}

// matchOffers returns the entries of sorted that keep accepts, in order.
func matchOffers(ctx context.Context, sorted []*apiwire.ProviderOffer, keep func(*apiwire.ProviderOffer) bool) []*apiwire.ProviderOffer {
	matched := make([]*apiwire.ProviderOffer, 0, 64)
	for i, po := range sorted {
		if keep(po) {
			matched = append(matched, po)
		}
		if i%4096 == 4095 && ctx.Err() != nil {
			return nil
		}
	}
	return matched
}

// queryOffers answers an offers query at snap: from the cache when it
// holds the query's answer for the same snapshot; else brought up to date
// from its answer for an earlier snapshot, as sorted lists are (a block
// that changed a few providers costs a few binary searches, not a pass
// over every provider); else from snap sorted by keys.
func (s *Server) queryOffers(ctx context.Context, snap *offerSnap, q *offers.Query, keys []offers.SortKey, all bool, now int64) []*apiwire.ProviderOffer {
	k := resultKey{q: q.String(), all: all}
	teeQuery := q.Uses("tee")
	if teeQuery {
		k.teeAt = now
	}
	for _, sk := range keys {
		k.sort += sk.String() + ","
	}
	c := &s.offers
	c.rmu.Lock()
	var prev resultEntry
	if e := c.results[k]; e != nil {
		if sameSnapshot(e.src, snap.all) {
			e.used = time.Now()
			c.rmu.Unlock()
			return e.matched
		}
		prev = *e
	}
	c.rmu.Unlock()
	keep := func(po *apiwire.ProviderOffer) bool {
		if !all && !po.Schedulable {
			return false
		}
		if teeQuery && po.TEE != "" {
			o := po.Offer
			teeAt(&o, now)
			return q.Match(&o)
		}
		return q.Match(&po.Offer)
	}
	matched, ok := resort(prev.src, prev.matched, snap.all, offerComparer(keys), keep)
	if !ok {
		matched = matchOffers(ctx, c.sortedBy(snap, keys), keep)
		if ctx.Err() != nil {
			return nil
		}
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.results == nil {
		c.results = map[resultKey]*resultEntry{}
	}
	if _, ok := c.results[k]; !ok && len(c.results) >= maxCachedQueries {
		// Evict the least recently used.
		keys := make([]resultKey, 0, len(c.results))
		for rk := range c.results {
			keys = append(keys, rk)
		}
		delete(c.results, slices.MinFunc(keys, func(a, b resultKey) int { return c.results[a].used.Compare(c.results[b].used) }))
	}
	c.results[k] = &resultEntry{matched: matched, src: snap.all, used: time.Now()}
	return matched
}
