package apiserver

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Services (issue 16): GET /v1/services, /v1/services/{id},
// /v1/providers/{addr}/services, and their live logs. Reaching a
// service's ports (/svc/…) and the OpenAI endpoint (/openai/v1/…) are
// mounted by the node from internal/relay and internal/openaigw.

var serviceIDParam = map[string]string{"id": "a service id (a positive integer)"}

func (s *Server) serviceRoutes() []Route {
	h := func(f http.HandlerFunc) http.Handler { return f }
	sample := apiwire.ServiceList{Services: []*ledger.Service{sampleService()}}
	return []Route{
		{Method: "GET", Path: "/v1/services", ID: "listServices", Tag: "services",
			Summary: "Services, newest first: one owner's (all states), or the active ones of everyone, optionally only those serving an OpenAI model",
			Query: []Param{
				{Name: "owner", Type: "string", Desc: "only this account's services (an address)"},
				{Name: "model", Type: "string", Desc: "only active services that declare this model"},
			},
			List: true, Resp: sample, Errors: []int{400}, Handler: h(s.services)},
		{Method: "POST", Path: "/v1/services/quote", ID: "quoteService", Tag: "services",
			Summary: "What deploying a service spec with a budget would give now: the providers that could take its replicas, their prices, the hourly rate with the fee, how long the budget lasts, or why replicas would wait",
			Body:    apiwire.ServiceQuoteRequest{Spec: sampleService().Spec}, Resp: ledger.ServiceQuote{Best: []ledger.QuoteOffer{{}}},
			MaxBody: 1 << 20, Errors: []int{400, 413}, Handler: h(s.quoteService)},
		{Method: "GET", Path: "/v1/services/{id}", ID: "getService", Tag: "services",
			Summary:    "A service: its spec, state, budget and escrow, when the budget runs out, its replicas (provider, price, readiness, relay node, heartbeat, paid) and the replicas that ended, with why (code, and why rendered); wait and reason say why it waits or ended",
			PathParams: serviceIDParam, Resp: sampleService(), Errors: []int{400, 404}, Handler: h(s.service)},
		{Method: "GET", Path: "/v1/providers/{addr}/services", ID: "listProviderServices", Tag: "providers",
			Summary:    "The active services with a replica on a provider (what its agent runs)",
			PathParams: addrParam, Resp: sample, Errors: []int{400}, Handler: h(s.providerServices)},
		{Method: "POST", Path: "/v1/services/{id}/logs", ID: "postServiceLog", Tag: "services",
			Summary:    "A replica's provider posts a chunk of its live log (sealed to the owner, signed over ServiceLogSignBytes)",
			PathParams: serviceIDParam,
			Query: []Param{
				{Name: "X-Gpunet-Provider", In: "header", Type: "string", Required: true, Desc: "the provider's address"},
				{Name: "X-Gpunet-Seq", In: "header", Type: "integer", Required: true, Desc: "the provider's post number for this service: 0, 1, …"},
				{Name: "X-Gpunet-Signature", In: "header", Type: "string", Required: true, Desc: "hex ed25519 signature of ServiceLogSignBytes"},
			},
			BodyType: "application/octet-stream", Resp: apiwire.LogPosted{}, Status: http.StatusCreated, MaxBody: maxLogChunkBytes,
			Errors: []int{400, 403, 404, 409, 413}, Handler: h(s.postServiceLog)},
		{Method: "GET", Path: "/v1/services/{id}/logs", ID: "getServiceLog", Tag: "services",
			Summary:    "A service's live log chunks, every replica's (ciphertext only its owner can read), from a sequence number",
			PathParams: serviceIDParam,
			Query: []Param{
				{Name: "from", Type: "integer", Desc: "the first chunk's seq (the next of the previous page; default 0)"},
				{Name: "limit", Type: "integer", Min: 1, Max: maxChunksPerJob, Desc: "chunks per page, 1 to 512 (default 64)"},
			},
			Resp: apiwire.LogPage{}, Errors: []int{400}, Handler: h(s.getServiceLog)},
	}
}

// sampleService documents a service's optional fields.
func sampleService() *ledger.Service {
	return &ledger.Service{Spec: ledger.ServiceSpec{Ports: []ledger.ServicePort{{}}, OpenAI: &ledger.ServiceOpenAI{}},
		KeyHashes: []ledger.Hash{{}}, Replicas: []ledger.Replica{{}}, Ended: []ledger.ReplicaEnd{{}}, Excluded: []address.Address{{}}}
}

func parseServiceID(w http.ResponseWriter, s string) (uint64, bool) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		writeError(w, http.StatusBadRequest, 0, fmt.Sprintf("service id %q: want a positive integer", s))
		return 0, false
	}
	return id, true
}

// maxServiceScan bounds the records one page of /v1/services reads.
const maxServiceScan = 5000

// services serves GET /v1/services: an owner's services, newest first
// (the cursor is the id below which the page starts), or the active
// services (oldest first, the cursor the id after which it starts),
// optionally those declaring a model.
func (s *Server) services(w http.ResponseWriter, r *http.Request) {
	limit, ok := pageLimit(w, r)
	if !ok {
		return
	}
	cursor, ok := uintCursor(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	var owner *address.Address
	if o := q.Get("owner"); o != "" {
		a, err := address.Parse(o)
		if err != nil {
			writeError(w, http.StatusBadRequest, ledger.ErrInvalidAddress.Code, "owner: "+err.Error())
			return
		}
		owner = &a
	}
	model := q.Get("model")
	if len(model) > ledger.MaxModelNameLen {
		writeError(w, http.StatusBadRequest, 0, fmt.Sprintf("model: at most %d bytes", ledger.MaxModelNameLen))
		return
	}
	kv, release := s.chain.View()
	defer release()
	var ids []uint64
	switch {
	case owner != nil:
		ledger.ServicesOf(kv, *owner, func(id uint64) bool {
			if cursor == 0 || id < cursor {
				ids = append(ids, id)
			}
			return len(ids) <= limit && len(ids) < maxServiceScan
		})
	case model != "":
		for _, id := range ledger.ServicesForModel(kv, model) {
			if id > cursor {
				ids = append(ids, id)
			}
		}
	default:
		ledger.ActiveServices(kv, func(id uint64) bool {
			if id > cursor {
				ids = append(ids, id)
			}
			return len(ids) <= limit && len(ids) < maxServiceScan
		})
	}
	out := apiwire.ServiceList{Services: []*ledger.Service{}, Height: ledger.Height(kv)}
	for _, id := range ids {
		if len(out.Services) == limit {
			out.NextCursor = uintString(out.Services[len(out.Services)-1].ID)
			break
		}
		sv, found, err := ledger.GetService(kv, id)
		if err != nil {
			writeLedgerError(w, err)
			return
		}
		if found && (owner == nil || sv.Owner == *owner) {
			out.Services = append(out.Services, sv)
		}
	}
	renderServices(out.Services)
	writeJSON(w, http.StatusOK, out)
}

// quoteService serves POST /v1/services/quote.
func (s *Server) quoteService(w http.ResponseWriter, r *http.Request) {
	var req apiwire.ServiceQuoteRequest
	if !decodeStrict(w, r, "quote", &req) {
		return
	}
	kv, release := s.chain.View()
	defer release()
	q, err := ledger.QuoteService(kv, &req.Spec, req.Budget)
	if err != nil {
		writeError(w, http.StatusBadRequest, ledger.CodeOf(err), "spec: "+err.Error())
		return
	}
	renderServiceQuote(q, &req.Spec)
	writeJSON(w, http.StatusOK, q)
}

func (s *Server) service(w http.ResponseWriter, r *http.Request) {
	id, ok := parseServiceID(w, r.PathValue("id"))
	if !ok {
		return
	}
	kv, release := s.chain.View()
	defer release()
	sv, found, err := ledger.GetService(kv, id)
	switch {
	case err != nil:
		writeLedgerError(w, err)
	case !found:
		writeError(w, http.StatusNotFound, 0, fmt.Sprintf("no service %d", id))
	default:
		renderService(sv)
		writeJSON(w, http.StatusOK, sv)
	}
}

// providerServices serves GET /v1/providers/{addr}/services: every active
// service with a replica on the provider (at most its slots, so one page).
func (s *Server) providerServices(w http.ResponseWriter, r *http.Request) {
	a, ok := parseAddr(w, r)
	if !ok {
		return
	}
	kv, release := s.chain.View()
	defer release()
	out := apiwire.ServiceList{Services: []*ledger.Service{}, Height: ledger.Height(kv)}
	for _, id := range ledger.ServicesOfProvider(kv, a) {
		sv, found, err := ledger.GetService(kv, id)
		if err != nil {
			writeLedgerError(w, err)
			return
		}
		if found && !sv.Done() {
			out.Services = append(out.Services, sv)
		}
	}
	renderServices(out.Services)
	writeJSON(w, http.StatusOK, out)
}
