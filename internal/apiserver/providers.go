package apiserver

import (
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

// OfferOf summarises a provider as an offer. A provider with GPUs of
// several classes is shown by its most numerous class.
func OfferOf(p *ledger.Provider) offers.Offer {
	o := offers.Offer{
		Address:    p.Address.String(),
		Label:      p.Label,
		Stake:      p.Stake,
		Online:     p.Online,
		GPU:        ledger.CPUClass,
		CPU:        int(p.Inventory.CPUCores),
		RAM:        float64(p.Inventory.RAM) / (1 << 30),
		Disk:       float64(p.Inventory.Disk) / (1 << 30),
		Region:     p.Region,
		Reputation: float64(p.Reputation) / 1e6,
		Uptime:     float64(p.Uptime()) / 1e6,
		TOPS:       float64(p.EffectiveGOPS()) / 1e3,
		Bandwidth:  float64(p.Measured.BandwidthMBs) / 1e3,
		Executor:   slices.Sorted(slices.Values(p.Executors)),
		WasmEngine: p.WasmEngine,
		MaxJobs:    int(p.MaxJobs),
		Jobs:       int(p.Jobs),

		Validated:     p.Validated,
		Invalid:       p.Invalid,
		ChallengePass: float64(p.ChallengePassRatePPM()) / 1e6,
		Slashed:       p.Slashed,
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
	kv, release := s.chain.View()
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
	matched := s.queryOffers(r.Context(), snap, q, keys, all)
	if timedOut(w, r) {
		return
	}
	out := apiwire.OfferList{Offers: []apiwire.ProviderOffer{}, Total: len(matched), Height: snap.height}
	if offset < uint64(len(matched)) {
		end := min(uint64(len(matched)), offset+uint64(limit))
		for _, po := range matched[offset:end] {
			out.Offers = append(out.Offers, *po)
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
	kv, release := s.chain.View()
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
		Schedulable:   p.Schedulable(params),
		RequiredStake: p.RequiredStake(params),
		Record:        p,
		Unbonding:     ledger.GetUnbondings(kv, a),
		Challenge:     p.Challenge,
		Height:        ledger.Height(kv),
	}
	if body.Unbonding == nil {
		body.Unbonding = []ledger.Unbonding{}
	}
	renderProvider(p)
	writeJSON(w, http.StatusOK, body)
}
