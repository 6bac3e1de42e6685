package daemon

import (
	"net/http"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiserver"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/openaigw"
	"github.com/gpunet/gpunet/internal/relay"
)

// Services (issue 16, docs/services.md): every node relays traffic to the
// services' replicas (internal/relay) and serves the OpenAI-compatible
// endpoint (internal/openaigw), both reading the node's committed ledger
// through serviceDirectory.

// serviceDirectory answers the relay's and the gateway's questions from a
// view of the ledger.
type serviceDirectory struct {
	view func() (ledger.KV, func())
}

// maxOpenAIServices bounds the services GET /openai/v1/models looks at.
const maxOpenAIServices = 1024

func (d serviceDirectory) Service(id uint64) (*ledger.Service, bool, error) {
	kv, release := d.view()
	defer release()
	return ledger.GetService(kv, id)
}

// Job reads a job: with it the relay routes gang streams between the
// members of a gang's current placement (relay.GangDirectory).
func (d serviceDirectory) Job(id uint64) (*ledger.Job, bool, error) {
	kv, release := d.view()
	defer release()
	return ledger.GetJob(kv, id)
}

var _ relay.GangDirectory = serviceDirectory{}

func (d serviceDirectory) IsProvider(a address.Address) bool {
	kv, release := d.view()
	defer release()
	_, ok, err := ledger.GetProvider(kv, a)
	return ok && err == nil
}

func (d serviceDirectory) ServicesForModel(model string) ([]*ledger.Service, error) {
	kv, release := d.view()
	defer release()
	return d.read(kv, ledger.ServicesForModel(kv, model))
}

func (d serviceDirectory) OpenAIServices() ([]*ledger.Service, error) {
	kv, release := d.view()
	defer release()
	var out []*ledger.Service
	var err error
	ledger.ActiveServices(kv, func(id uint64) bool {
		var sv *ledger.Service
		var ok bool
		if sv, ok, err = ledger.GetService(kv, id); err != nil {
			return false
		}
		if ok && sv.Spec.OpenAI != nil {
			out = append(out, sv)
		}
		return len(out) < maxOpenAIServices
	})
	return out, err
}

// IsServeWitness reports whether the consensus key pub is a service
// witness: a validator in the active set (ledger.IsServeWitness).
func (d serviceDirectory) IsServeWitness(pub []byte) bool {
	kv, release := d.view()
	defer release()
	return ledger.IsServeWitness(kv, pub)
}

func (d serviceDirectory) Reputation(a address.Address) uint64 {
	kv, release := d.view()
	defer release()
	p, ok, err := ledger.GetProvider(kv, a)
	if !ok || err != nil {
		return 0
	}
	return p.Reputation
}

func (d serviceDirectory) read(kv ledger.KV, ids []uint64) ([]*ledger.Service, error) {
	out := make([]*ledger.Service, 0, len(ids))
	for _, id := range ids {
		sv, ok, err := ledger.GetService(kv, id)
		if err != nil {
			return nil, err
		}
		if ok && !sv.Done() {
			out = append(out, sv)
		}
	}
	return out, nil
}

// Bodies of service requests (docs/bounds.md): a request to a service's
// port may stream its body, but must send some of it every svcBodyIdle and
// all of it within svcBodyTimeout; a chat completion's body (at most 4
// MiB) must arrive within openAIBodyTimeout.
const (
	svcBodyTimeout    = time.Hour
	svcBodyIdle       = time.Minute
	openAIBodyTimeout = time.Minute
)

// serviceRoutes documents and mounts the relay and the OpenAI gateway.
// Both bound their answers themselves (streams, tunnels), so no route time
// limit applies; their bodies are bounded as uploads, and a request that
// carries one of a service's keys is trusted (internal/admission).
func serviceRoutes(hub *relay.Hub, gw *openaigw.Gateway) []apiserver.Route {
	svc := hub.ServiceHandler()
	params := map[string]string{"id": "a service id (a positive integer)", "port": "a port the service declares", "rest": "the path passed on to the service"}
	var routes []apiserver.Route
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		routes = append(routes, apiserver.Route{Method: m, Path: "/svc/{id}/{port}/{rest...}", ID: "service" + m, Tag: "services",
			Summary:    m + " on a service's HTTP port, relayed to one of its ready replicas (docs/services.md); needs one of the service's keys (Authorization: Bearer or X-Gpunet-Key) unless it is public",
			PathParams: params, RespType: "application/octet-stream", MaxBody: -1, Timeout: -1,
			BodyTimeout: svcBodyTimeout, BodyIdle: svcBodyIdle, Trusted: hub.KeyHolder,
			Errors: []int{400, 401, 404, 502, 503, 504}, Handler: svc})
	}
	routes = append(routes,
		apiserver.Route{Method: "GET", Path: "/svc/{id}/{port}", ID: "serviceTunnel", Tag: "services",
			Summary:    "With Connection: Upgrade and Upgrade: gpunet-tcp, a raw byte tunnel to a port of one of the service's replicas (101): what gpunet service connect uses, and how an owner runs TLS end to end",
			PathParams: map[string]string{"id": params["id"], "port": params["port"]}, RespType: "application/octet-stream", MaxBody: -1, Timeout: -1,
			Trusted: hub.KeyHolder, Errors: []int{400, 401, 404, 503}, Handler: svc},
		apiserver.Route{Method: "GET", Path: "/v1/services/{id}/probe", ID: "probeService", Tag: "services",
			Summary:    "This node reaches each replica of the service as a request would and runs its readiness check: reachable or not, how, how long, and the error (one probe of a service at a time per node); needs one of its keys unless it is public",
			PathParams: map[string]string{"id": params["id"]}, Resp: apiwire.ServiceProbe{Replicas: []apiwire.ReplicaProbe{{}}}, MaxBody: -1, Timeout: time.Minute,
			Errors: []int{400, 401, 404, 429, 503}, Handler: hub.ProbeHandler()},
		apiserver.Route{Method: "GET", Path: "/v1/services/checks", ID: "serviceChecks", Tag: "services",
			Summary: "This node's latest sampled checks of OpenAI answers (docs/services.md, \"Receipts and sampled re-execution\"): each with its service, request hash, the replicas' receipts (Gpunet-Receipt form) and the verdict (agreed, disputed, split, tolerated, failed)",
			Resp:    []checkView{{}}, Handler: checksHandler(gw)},
		apiserver.Route{Method: "POST", Path: relay.NoncePath, ID: "relayNonce", Tag: "services",
			Summary: "A nonce for a provider's agent to sign into its next relay handshake with this node (with the node's advertised URL and chain, which the agent must be configured with); good for one handshake within 30 s, at most 16 outstanding per client address",
			Resp:    relay.NonceAnswer{}, Errors: []int{429, 503}, Handler: hub.NonceHandler()},
		apiserver.Route{Method: "GET", Path: relay.AgentPath, ID: "relayAgent", Tag: "services",
			Summary:  "A provider's agent opens its relay session (Upgrade: gpunet-relay/1, signed by its key for this node's advertised URL and chain over a nonce from " + relay.NoncePath + "): nodes reach its replicas over it, so providers behind NAT work",
			RespType: "application/octet-stream", MaxBody: -1, Timeout: -1, Vouches: true, Errors: []int{400, 401, 403, 503}, Handler: hub.AgentHandler()},
		apiserver.Route{Method: "GET", Path: relay.TunnelPath, ID: "relayTunnel", Tag: "services",
			Summary: "Node to node: a raw tunnel to a replica whose agent is connected to this node, or, with gang=, a gang stream to a member whose agent is (X-Gpunet-Gang-Pass: the asker's pass, checked against this node's ledger) (Upgrade: gpunet-tcp, X-Gpunet-Hop: 1); never forwarded again",
			Query: []apiserver.Param{{Name: "service", Type: "integer", Desc: "the service id (a replica's tunnel)"}, {Name: "provider", Type: "string", Required: true, Desc: "the replica's provider, or the asking gang member's"},
				{Name: "port", Type: "integer", Desc: "a port the service declares (a replica's tunnel)"},
				{Name: "gang", Type: "integer", Desc: "the gang job (a gang stream)"}, {Name: "placement", Type: "integer", Desc: "the gang's placement (a gang stream)"},
				{Name: "rank", Type: "integer", Desc: "the target member's rank (a gang stream)"}, {Name: "via", Type: "string", Desc: "the asking node's advertised API URL, which the pass signs (a gang stream)"}},
			RespType: "application/octet-stream", MaxBody: -1, Timeout: -1, Errors: []int{400, 401, 403, 404, 429, 503}, Handler: hub.TunnelHandler()},
		apiserver.Route{Method: "GET", Path: openaigw.PathModels, ID: "openaiModels", Tag: "openai",
			Summary: "OpenAI-compatible: the models of the active services the caller may use (its key's, and the public ones)",
			Resp:    map[string]any{}, MaxBody: -1, Timeout: -1, Trusted: gw.KeyHolder, Errors: []int{401}, Handler: gw},
		apiserver.Route{Method: "GET", Path: openaigw.PathModels + "/{model...}", ID: "openaiModel", Tag: "openai",
			Summary:    "OpenAI-compatible: one model",
			PathParams: map[string]string{"model": "a model id"}, Resp: map[string]any{}, MaxBody: -1, Timeout: -1, Trusted: gw.KeyHolder, Errors: []int{401, 404}, Handler: gw},
		apiserver.Route{Method: "POST", Path: openaigw.PathCompletions, ID: "openaiChatCompletions", Tag: "openai",
			Summary: "OpenAI-compatible chat completions (streamed with stream: true, usage always reported), routed to a ready replica of a service serving the model by price, latency, load and reputation",
			Body:    map[string]any{}, Resp: map[string]any{}, MaxBody: -1, Timeout: -1,
			BodyTimeout: openAIBodyTimeout, Trusted: gw.KeyHolder,
			Errors: []int{400, 401, 404, 408, 413, 415, 502, 503, 504}, Handler: gw},
		apiserver.Route{Method: "OPTIONS", Path: "/openai/v1/{path...}", ID: "openaiPreflight", Tag: "openai",
			Summary: "CORS preflight for the OpenAI-compatible endpoint (any origin: keys are bearer tokens, never cookies)", Status: http.StatusNoContent,
			PathParams: map[string]string{"path": "models or chat/completions"}, MaxBody: -1, Errors: []int{404}, Handler: gw},
	)
	return routes
}
