package apiserver

import (
	"context"
	"sync"

	"github.com/gpunet/gpunet/internal/ledger"
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
}

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
