package relay

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// ProbeHandler serves GET /v1/services/{id}/probe: the node reaches every
// replica of the service the way a client's request would and asks its
// readiness check, and answers what it saw (apiwire.ServiceProbe). It is
// how an owner sees, from any node, a replica that its provider reports
// ready but that does not answer (and then evicts it). It takes the
// service's key as /svc does; one probe of a service runs at a time at a
// node (429 otherwise), each replica's bounded by the handshake timeout
// plus the readiness timeout.
func (h *Hub) ProbeHandler() http.Handler { return http.HandlerFunc(h.serveProbe) }

func (h *Hub) serveProbe(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		writeError(w, apiwire.CodeInvalidArgument, fmt.Sprintf("service id %q: want a positive integer", r.PathValue("id")))
		return
	}
	svc, ok := h.lookup(w, id)
	if !ok {
		return
	}
	credential, ok := Authorized(svc, r)
	if !ok {
		writeUnauthorized(w, id)
		return
	}
	release, ok := h.takeProbe(id)
	if !ok {
		w.Header().Set("Retry-After", "2")
		writeError(w, apiwire.CodeTooManyRequests, fmt.Sprintf("service %d is being probed at this node already", id))
		return
	}
	defer release()
	ctx := r.Context()
	if hasHop(r) {
		ctx = noForward(ctx)
	}
	out := apiwire.ServiceProbe{Service: id, Node: h.o.Self, Replicas: make([]apiwire.ReplicaProbe, len(svc.Replicas))}
	var wg sync.WaitGroup
	for i := range svc.Replicas {
		wg.Go(func() { out.Replicas[i] = h.probeReplica(ctx, svc, &svc.Replicas[i], credential) })
	}
	wg.Wait()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

func (h *Hub) takeProbe(id uint64) (release func(), ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.probing[id] {
		return nil, false
	}
	h.probing[id] = true
	return func() {
		h.mu.Lock()
		delete(h.probing, id)
		h.mu.Unlock()
	}, true
}

// probeReplica reaches rep's readiness port and runs its check.
func (h *Hub) probeReplica(ctx context.Context, svc *ledger.Service, rep *ledger.Replica, credential string) apiwire.ReplicaProbe {
	rd := svc.Spec.Readiness
	out := apiwire.ReplicaProbe{Provider: rep.Provider, Ready: rep.Ready, Route: "relay"}
	if h.Connected(rep.Provider) {
		out.Route = "session"
	}
	// Within the route's minute: the handshake plus at most 30 s of check.
	ctx, cancel := context.WithTimeout(ctx, h.o.HandshakeTimeout+time.Duration(min(rd.TimeoutSeconds, 30))*time.Second)
	defer cancel()
	start := time.Now() // a real duration, whatever Clock says
	status, err := h.check(ctx, svc, rep.Provider, credential)
	out.Millis = float64(time.Since(start).Microseconds()) / 1000
	out.Status = status
	if err != nil {
		out.Error = err.Error()
	} else {
		out.OK = true
	}
	return out
}

// check runs svc's readiness check on provider's replica, reached as a
// request would reach it.
func (h *Hub) check(ctx context.Context, svc *ledger.Service, provider address.Address, credential string) (status int, err error) {
	rd := svc.Spec.Readiness
	return CheckReadiness(ctx, func(ctx context.Context) (net.Conn, error) {
		return h.DialReplica(ctx, svc, provider, rd.Port, credential)
	}, rd.Port, rd.Path, "gpunet-probe/1")
}

// CheckReadiness runs one readiness check over the connections dial makes
// to port: without a path, a connection made; with one, GET path answering
// 2xx (status is the answer's). The agent checks its replicas with it
// through the container's loopback, and the probe through the relay, so
// that both judge alike.
func CheckReadiness(ctx context.Context, dial func(context.Context) (net.Conn, error), port uint64, path, userAgent string) (status int, err error) {
	if path == "" {
		c, err := dial(ctx)
		if err != nil {
			return 0, err
		}
		return 0, c.Close()
	}
	tr := &http.Transport{
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.FormatUint(port, 10)+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("User-Agent", userAgent)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("GET %s answered %s", path, resp.Status)
	}
	return resp.StatusCode, nil
}

// witnessUserAgent is what a witness's probe says it is: a plain HTTP
// client, as the OpenAI gateway's requests to replicas are, never a
// gpunet probe marker.
const witnessUserAgent = "Go-http-client/1.1"

// witnessPrompts are what a witness's chat completion asks: short, as
// many users' first requests are; one at random each time.
var witnessPrompts = []string{"Hi", "Hello", "hello!", "Say hi.", "ping", "Are you there?", "What is 2+2?", "Name a color.", "Tell me a fact.", "Hey"}

// WitnessProbe checks provider's replica of svc for the node's service
// witness (internal/daemon, ledger.MsgAttestServed): the replica is
// reached exactly as a user's request reaches it (the agent's session on
// this node, or a tunnel through the node that holds it) and its readiness
// check is run, within the handshake timeout plus the check's (at most 30
// s). nil means it answered. A private service's replica whose session is
// on another node is reached with a witness pass (witness.go) signed with
// HubOptions.WitnessKey.
//
// A service that declares OpenAI models is asked what users ask it: a
// chat completion of one token for one of its models, sent over the port
// as the OpenAI gateway sends a user's (the same host, path, headers and
// JSON encoding), answering 2xx; so a replica that answers its readiness
// path but not completions is not witnessed, and a replica cannot tell
// the witness from a user who asks for one token.
func (h *Hub) WitnessProbe(ctx context.Context, svc *ledger.Service, provider address.Address) error {
	rd := svc.Spec.Readiness
	ctx = context.WithValue(ctx, witnessProbeKey{}, true)
	if oa := svc.Spec.OpenAI; oa != nil && len(oa.Models) > 0 {
		return h.witnessCompletion(ctx, svc, provider, oa)
	}
	ctx, cancel := context.WithTimeout(ctx, h.o.HandshakeTimeout+time.Duration(min(rd.TimeoutSeconds, 30))*time.Second)
	defer cancel()
	_, err := CheckReadiness(ctx, func(ctx context.Context) (net.Conn, error) {
		return h.DialReplica(ctx, svc, provider, rd.Port, "")
	}, rd.Port, rd.Path, witnessUserAgent)
	return err
}

// witnessCompletion asks provider's replica of svc for a one-token chat
// completion, as the gateway forwards a user's (openaigw: the replica's
// host name, UpstreamPath, Content-Type and Accept, a body re-encoded
// with sorted keys, asking for log-probabilities when the service is not
// declared exact), within the handshake timeout plus 30 s.
func (h *Hub) witnessCompletion(ctx context.Context, svc *ledger.Service, provider address.Address, oa *ledger.ServiceOpenAI) error {
	ctx, cancel := context.WithTimeout(ctx, h.o.HandshakeTimeout+30*time.Second)
	defer cancel()
	prompt, err := json.Marshal(witnessPrompts[rand.IntN(len(witnessPrompts))])
	if err != nil {
		return err
	}
	// As a client writes a message (role, then content), and as the
	// gateway re-encodes the request (its fields sorted).
	fields := map[string]any{
		"model":      oa.Models[rand.IntN(len(oa.Models))],
		"messages":   json.RawMessage(`[{"role":"user","content":` + string(prompt) + `}]`),
		"max_tokens": 1,
	}
	if !oa.Exact {
		// The gateway asks a replica of a service not declared bit-exact
		// for log-probabilities on every request (openaigw's
		// checkTopLogprobs alternatives per token), so the witness does.
		fields["logprobs"], fields["top_logprobs"] = true, 5
	}
	body, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return h.DialReplica(ctx, svc, provider, oa.Port, "")
		},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	host := fmt.Sprintf("p%d.%s.s%d.replica.gpunet.invalid", oa.Port, hex.EncodeToString(provider[:]), svc.ID)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+host+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", witnessUserAgent)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("chat completion answered %s", resp.Status)
	}
	return nil
}

// ErrReplicaDown is ProbeDown's answer for a replica that could not be
// reached for a reason that is its own.
var ErrReplicaDown = errors.New("relay: the replica is unreachable")

// ProbeDown checks, for a node that would report provider's replica of
// svc down (ledger.MsgReportReplicaDown), whether it is unreachable for a
// reason that is the replica's and not this node's. It runs the service's
// readiness check on the replica, reached as a user's request reaches it
// (the agent's session here, or a tunnel through the node its record
// names, carrying a witness pass for a private service), within the
// handshake timeout plus the check's (at most 30 s), and answers:
//
//   - nil: the replica answered;
//   - an error wrapping ErrReplicaDown: its agent is not connected at
//     this node while the record names this node as its relay (or names
//     none, so that no other node can route to it either), the agent
//     refused the stream or its session failed, the relay node answered
//     that it could not reach it (502, 503, 504), or the check failed
//     over a connection made to the replica;
//   - any other error: nothing can be said (the replica is not ready in
//     svc, this node has no route to its relay node or could not reach
//     that node, this node is busy or closing, ctx ended).
func (h *Hub) ProbeDown(ctx context.Context, svc *ledger.Service, provider address.Address) error {
	var rep *ledger.Replica
	for i := range svc.Replicas {
		if svc.Replicas[i].Provider == provider {
			rep = &svc.Replicas[i]
		}
	}
	if rep == nil || !rep.Ready || rep.ReadyAt == 0 {
		return fmt.Errorf("service %d provider %s: no ready replica to probe: %w", svc.ID, provider, ErrNoReplica)
	}
	viaPeer := !h.Connected(provider)
	switch {
	case viaPeer && normURL(rep.Relay) == h.self:
		// Its record says its agent is here, and it is not.
		return fmt.Errorf("service %d provider %s: its agent holds no session at this node, its relay: %w", svc.ID, provider, ErrReplicaDown)
	case viaPeer && rep.Relay == "":
		// Its provider names no node that holds its agent's session,
		// and this one does not hold it: no request can reach it.
		return fmt.Errorf("service %d provider %s: its record names no relay node and its agent holds no session here: %w", svc.ID, provider, ErrReplicaDown)
	}
	if viaPeer && !h.mayForward(rep.Relay) {
		return fmt.Errorf("service %d provider %s (relay %q): %w", svc.ID, provider, rep.Relay, ErrNoRoute)
	}
	rd := svc.Spec.Readiness
	ctx = context.WithValue(ctx, witnessProbeKey{}, true)
	ctx, cancel := context.WithTimeout(ctx, h.o.HandshakeTimeout+time.Duration(min(rd.TimeoutSeconds, 30))*time.Second)
	defer cancel()
	var dialErr error
	_, err := CheckReadiness(ctx, func(ctx context.Context) (net.Conn, error) {
		c, err := h.DialReplica(ctx, svc, provider, rd.Port, "")
		dialErr = err
		return c, err
	}, rd.Port, rd.Path, witnessUserAgent)
	var up *UpgradeError
	switch {
	case err == nil:
		return nil
	case dialErr == nil:
		// Reached, and the check failed.
		return fmt.Errorf("service %d provider %s: %w: %w", svc.ID, provider, err, ErrReplicaDown)
	case errors.Is(dialErr, ErrBusy), errors.Is(dialErr, ErrClosed), ctx.Err() != nil:
		return dialErr
	case viaPeer && errors.As(dialErr, &up):
		if up.Status == http.StatusBadGateway || up.Status == http.StatusServiceUnavailable || up.Status == http.StatusGatewayTimeout {
			return fmt.Errorf("service %d provider %s: %w: %w", svc.ID, provider, dialErr, ErrReplicaDown)
		}
		return dialErr // refused for another reason (a pass not taken): not the replica's doing
	case viaPeer:
		return dialErr // the relay node itself could not be reached
	}
	// Through this node's session: the agent refused the stream, or the
	// session failed.
	return fmt.Errorf("service %d provider %s: %w: %w", svc.ID, provider, dialErr, ErrReplicaDown)
}
