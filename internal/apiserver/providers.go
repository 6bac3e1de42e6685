package apiserver

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/offers"
)

// teeAt clears o's TEE when its attestation has expired at unix time now
// (the block time of the answer's height; 0 when unknown).
func teeAt(o *offers.Offer, now int64) {
	if o.TEE != "" && now > 0 && now >= o.TEEExpiry {
		o.TEE = ""
	}
}

// blockTime returns the header time of committed block height in unix
// seconds: the time as of which state at that height is answered (never
// the wall clock, which the chain's validity checks do not use). 0 for
// height 0.
func (s *Server) blockTime(ctx context.Context, height uint64) (int64, error) {
	if height == 0 {
		return 0, nil
	}
	hs, err := s.chain.Blocks(ctx, int64(height), 1)
	if err != nil {
		return 0, err
	}
	if len(hs) != 1 || hs[0].Height != int64(height) {
		return 0, fmt.Errorf("the header of block %d is not available", height)
	}
	return hs[0].Time.Unix(), nil
}

// viewAt returns a view of the committed state, as Chain.View, and the
// header time of the block that committed it (blockTime). The time is
// read outside a view (a chain may hold a lock while one is open), so a
// block committed between the two is read again.
func (s *Server) viewAt(ctx context.Context) (ledger.KV, func(), int64, error) {
	for range 3 {
		kv, release := s.chain.View()
		h := ledger.Height(kv)
		release()
		now, err := s.blockTime(ctx, h)
		if err != nil {
			return nil, nil, 0, err
		}
		kv, release = s.chain.View()
		if ledger.Height(kv) == h {
			return kv, release, now, nil
		}
		release()
	}
	return nil, nil, 0, fmt.Errorf("the chain committed blocks faster than their time could be read; try again")
}

// OfferOf summarises a provider as an offer. A provider with GPUs of
// several classes is shown by its most numerous class.
func OfferOf(p *ledger.Provider) offers.Offer {
	o := offers.Offer{
		Address:      p.Address.String(),
		Label:        p.Label,
		Stake:        p.Stake,
		Online:       p.Online,
		GPU:          ledger.CPUClass,
		CPU:          int(p.Inventory.CPUCores),
		RAM:          float64(p.Inventory.RAM) / (1 << 30),
		Disk:         float64(p.Inventory.Disk) / (1 << 30),
		Region:       p.Region,
		Reputation:   float64(p.Reputation) / 1e6,
		Uptime:       float64(p.Uptime()) / 1e6,
		TOPS:         float64(p.EffectiveGOPS()) / 1e3,
		Bandwidth:    float64(p.Measured.BandwidthMBs) / 1e3,
		Executor:     slices.Sorted(slices.Values(p.Executors)),
		WasmEngine:   p.WasmEngine,
		Interconnect: p.Inventory.Interconnect,
		MaxJobs:      int(p.MaxJobs),
		Jobs:         int(p.Jobs),

		Validated:     p.Validated,
		Invalid:       p.Invalid,
		ChallengePass: float64(p.ChallengePassRatePPM()) / 1e6,
		Slashed:       p.Slashed,
	}
	if a := p.TEE; a != nil && a.Kind != "" && a.Key == p.EncryptionKey {
		// Expiry is checked against the answer's block time (teeAt): the
		// entries are kept from one height to the next.
		o.TEE, o.TEEExpiry = a.Kind, a.Expiry
	}
	counts := map[string]int{}
	for _, g := range p.Inventory.GPUs {
		counts[g.Class]++
		if n := counts[g.Class]; n > o.Count || (n == o.Count && g.Class < o.GPU) {
			o.GPU, o.Count = g.Class, n
			// Whole GiB, as GPUs are sold: an RTX 4090's 24564 MiB is 24.
			o.VRAM = math.Round(float64(g.VRAM) / (1 << 30))
			o.ComputeCap = g.ComputeCap
		}
	}
	for _, a := range p.Asks {
		if a.Class == o.GPU {
			o.Price = float64(a.PricePerHour) / 1e6
		}
	}
	return o
}

// ProviderOfferOf is p's list entry under params.
func ProviderOfferOf(p *ledger.Provider, params ledger.Params) apiwire.ProviderOffer {
	return apiwire.ProviderOffer{Offer: OfferOf(p), Earned: p.Earned, Schedulable: p.Schedulable(params)}
}

// providers serves GET /v1/providers: registered providers by address.
// The cursor is the last address of the previous page.
func (s *Server) providers(w http.ResponseWriter, r *http.Request) {
	limit, ok := pageLimit(w, r)
	if !ok {
		return
	}
	var after *address.Address
	if c := r.URL.Query().Get("cursor"); c != "" {
		a, err := address.Parse(c)
		if err != nil {
			writeError(w, http.StatusBadRequest, 0, fmt.Sprintf("cursor %q: not a cursor of this list (pass back next_cursor as given)", c))
			return
		}
		after = &a
	}
	kv, release, now, err := s.viewAt(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, 0, err.Error())
		return
	}
	defer release()
	params, err := ledger.GetParams(kv)
	if err != nil {
		writeLedgerError(w, err)
		return
	}
	out := apiwire.ProviderList{Providers: []apiwire.ProviderOffer{}, Height: ledger.Height(kv)}
	more := false
	err = ledger.ProvidersAfter(kv, after, func(p *ledger.Provider) bool {
		if len(out.Providers) == limit {
			more = true
			return false
		}
		out.Providers = append(out.Providers, ProviderOfferOf(p, params))
		return true
	})
	if err != nil {
		writeLedgerError(w, err)
		return
	}
	for i := range out.Providers {
		teeAt(&out.Providers[i].Offer, now)
	}
	if more {
		out.NextCursor = out.Providers[len(out.Providers)-1].Address
	}
	writeJSON(w, http.StatusOK, out)
}

// offersList serves GET /v1/offers?q=QUERY&sort=KEYS&all=true: providers
// matching the query, sorted; by default only those that can take jobs now
// (online and staked the minimum). The cursor is an offset into the sorted
// matches.
func (s *Server) offersList(w http.ResponseWriter, r *http.Request) {
	q, err := offers.Parse(r.URL.Query().Get("q"))
	if err != nil {
		writeError(w, http.StatusBadRequest, ledger.ErrInvalidMsg.Code, err.Error())
		return
	}
	keys, err := offers.ParseSort(r.URL.Query().Get("sort"))
	if err != nil {
		writeError(w, http.StatusBadRequest, ledger.ErrInvalidMsg.Code, err.Error())
		return
	}
	all := false
	if a := r.URL.Query().Get("all"); a != "" {
		if all, err = strconv.ParseBool(a); err != nil {
			writeError(w, http.StatusBadRequest, 0, fmt.Sprintf("all %q: want true or false", a))
			return
		}
	}
	limit, ok := pageLimit(w, r)
	if !ok {
		return
	}
	offset, ok := uintCursor(w, r)
	if !ok {
		return
	}
	snap, err := s.offerSnapshot(r.Context())
	if err != nil {
		writeLedgerError(w, err)
		return
	}
	if timedOut(w, r) {
		return
	}
	// A tee term depends on the block time (an attestation expires);
	// the time is read only when the answer needs it.
	var now int64
	if q.Uses("tee") {
		if now, err = s.blockTime(r.Context(), snap.height); err != nil {
			writeError(w, http.StatusServiceUnavailable, 0, err.Error())
			return
		}
	}
	matched := s.queryOffers(r.Context(), snap, q, keys, all, now)
	if timedOut(w, r) {
		return
	}
	out := apiwire.OfferList{Offers: []apiwire.ProviderOffer{}, Total: len(matched), Height: snap.height}
	if offset < uint64(len(matched)) {
		end := min(uint64(len(matched)), offset+uint64(limit))
		for _, po := range matched[offset:end] {
			out.Offers = append(out.Offers, *po)
		}
		if now == 0 && slices.ContainsFunc(out.Offers, func(po apiwire.ProviderOffer) bool { return po.TEE != "" }) {
			if now, err = s.blockTime(r.Context(), snap.height); err != nil {
				writeError(w, http.StatusServiceUnavailable, 0, err.Error())
				return
			}
		}
		for i := range out.Offers {
			teeAt(&out.Offers[i].Offer, now)
		}
		if end < uint64(len(matched)) {
			out.NextCursor = strconv.FormatUint(end, 10)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// provider serves GET /v1/providers/{addr}.
func (s *Server) provider(w http.ResponseWriter, r *http.Request) {
	a, ok := parseAddr(w, r)
	if !ok {
		return
	}
	kv, release, now, err := s.viewAt(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, 0, err.Error())
		return
	}
	defer release()
	p, found, err := ledger.GetProvider(kv, a)
	if err != nil {
		writeLedgerError(w, err)
		return
	}
	if !found {
		writeError(w, http.StatusNotFound, ledger.ErrUnknownProvider.Code, a.String()+" is not a registered provider")
		return
	}
	params, err := ledger.GetParams(kv)
	if err != nil {
		writeLedgerError(w, err)
		return
	}
	body := apiwire.ProviderBody{
		Offer:         OfferOf(p),
		Attestation:   apiwire.AttestationOf(p, now),
		Schedulable:   p.Schedulable(params),
		RequiredStake: p.RequiredStake(params),
		Record:        p,
		Unbonding:     ledger.GetUnbondings(kv, a),
		Challenge:     p.Challenge,
		Height:        ledger.Height(kv),
	}
	teeAt(&body.Offer, now)
	if body.Unbonding == nil {
		body.Unbonding = []ledger.Unbonding{}
	}
	renderProvider(p)
	writeJSON(w, http.StatusOK, body)
}
