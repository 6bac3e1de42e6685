package apiserver

import (
	"math"
	"net/http"
	"slices"
	"strconv"

	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/offers"
)

// ProviderBody is GET /v1/providers/{addr}: the provider's offer (the
// fields the offers query searches) and its full ledger record.
type ProviderBody struct {
	offers.Offer
	Schedulable   bool                      `json:"schedulable"`
	RequiredStake uint64                    `json:"required_stake"`
	Record        *ledger.Provider          `json:"record"`
	Unbonding     []ledger.Unbonding        `json:"unbonding"`
	Challenge     *ledger.LivenessChallenge `json:"challenge,omitempty"`
	Height        uint64                    `json:"height"`
}

// OfferOf summarises a provider as an offer. A provider with GPUs of
// several classes is shown by its most numerous class.
func OfferOf(p *ledger.Provider) offers.Offer {
	o := offers.Offer{
		Address:    p.Address.String(),
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

func (s *Server) listProviders(kv ledger.KV) ([]offers.Offer, error) {
	out := []offers.Offer{}
	err := ledger.IterateProviders(kv, func(p *ledger.Provider) bool {
		out = append(out, OfferOf(p))
		return true
	})
	return out, err
}

// providers serves GET /v1/providers: every registered provider.
func (s *Server) providers(w http.ResponseWriter, r *http.Request) {
	kv, release := s.chain.View()
	defer release()
	list, err := s.listProviders(kv)
	if err != nil {
		writeError(w, http.StatusInternalServerError, ledger.CodeOf(err), err.Error())
		return
	}
	offers.Sort(list, nil)
	writeJSON(w, http.StatusOK, list)
}

// offersList serves GET /v1/offers?q=QUERY&sort=KEYS&all=true: providers
// matching the query, sorted; by default only those that can take jobs now
// (online and staked the minimum).
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
	all, _ := strconv.ParseBool(r.URL.Query().Get("all"))
	kv, release := s.chain.View()
	defer release()
	params, err := ledger.GetParams(kv)
	if err != nil {
		writeError(w, http.StatusInternalServerError, ledger.CodeOf(err), err.Error())
		return
	}
	out := []offers.Offer{}
	err = ledger.IterateProviders(kv, func(p *ledger.Provider) bool {
		if all || p.Schedulable(params) {
			if o := OfferOf(p); q.Match(&o) {
				out = append(out, o)
			}
		}
		return true
	})
	if err != nil {
		writeError(w, http.StatusInternalServerError, ledger.CodeOf(err), err.Error())
		return
	}
	offers.Sort(out, keys)
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
		writeError(w, http.StatusInternalServerError, ledger.CodeOf(err), err.Error())
		return
	}
	if !found {
		writeError(w, http.StatusNotFound, ledger.ErrUnknownProvider.Code, a.String()+" is not a registered provider")
		return
	}
	params, err := ledger.GetParams(kv)
	if err != nil {
		writeError(w, http.StatusInternalServerError, ledger.CodeOf(err), err.Error())
		return
	}
	body := ProviderBody{
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
	writeJSON(w, http.StatusOK, body)
}
