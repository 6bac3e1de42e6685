package relay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// TunnelPath is the node-to-node tunnel's route.
const TunnelPath = "/v1/relay/tunnel"

// TunnelHandler serves GET /v1/relay/tunnel?service=&provider=&port=: a
// raw byte tunnel, for another node, to a replica whose provider's agent
// holds its session here. It requires X-Gpunet-Hop and Upgrade: gpunet-tcp,
// checks the client's key (X-Gpunet-Key) against this node's ledger, and
// never forwards further.
func (h *Hub) TunnelHandler() http.Handler {
	return http.HandlerFunc(h.serveTunnel)
}

func (h *Hub) serveTunnel(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeError(w, apiwire.CodeMethodNotAllowed, "use GET with Upgrade: "+ProtoTCP)
		return
	}
	if r.Header.Get(HeaderHop) == "" {
		writeError(w, apiwire.CodeForbidden, "node-to-node tunnels only: "+HeaderHop+" is required (clients use /svc/{id}/{port})")
		return
	}
	if !upgradeRequested(r, ProtoTCP) {
		writeError(w, apiwire.CodeInvalidArgument, "Connection: Upgrade and Upgrade: "+ProtoTCP+" required")
		return
	}
	if r.URL.Query().Has("gang") {
		h.serveGangTunnel(w, r)
		return
	}
	q := r.URL.Query()
	id, err1 := strconv.ParseUint(q.Get("service"), 10, 64)
	port, err2 := strconv.ParseUint(q.Get("port"), 10, 64)
	provider, err3 := address.Parse(q.Get("provider"))
	if err := errors.Join(err1, err2, err3); err != nil {
		writeError(w, apiwire.CodeInvalidArgument, "service, port and provider are required: "+err.Error())
		return
	}
	svc, ok := h.lookup(w, id)
	if !ok {
		return
	}
	if svc.Spec.Port(port) == nil {
		writeError(w, apiwire.CodeNotFound, fmt.Sprintf("service %d declares no port %d", id, port))
		return
	}
	if _, ok := Authorized(svc, r); !ok && !h.witnessPass(r, id, provider, port) {
		writeUnauthorized(w, id)
		return
	}
	h.serveRaw(noForward(r.Context()), w, r, svc, port, []address.Address{provider})
}

// serveRaw dials the first of providers' replicas that answers and turns
// r's connection into a raw tunnel to it (101 Switching Protocols to
// gpunet-tcp). At most MaxTunnels per service are open at once.
func (h *Hub) serveRaw(ctx context.Context, w http.ResponseWriter, r *http.Request, svc *ledger.Service, port uint64, providers []address.Address) {
	release, ok := h.takeTunnel(svc.ID)
	if !ok {
		w.Header().Set("Retry-After", "10")
		writeError(w, apiwire.CodeTooManyRequests, fmt.Sprintf("service %d has %d tunnels open at this node", svc.ID, h.o.MaxTunnels))
		return
	}
	defer release()
	credential, _ := Authorized(svc, r)
	var back net.Conn
	var err error
	for _, p := range providers {
		if back, err = h.DialReplica(ctx, svc, p, port, credential); err == nil {
			break
		}
		h.log.Debug("relay: dial replica failed", "service", svc.ID, "provider", p, "err", err)
	}
	if back == nil {
		dialFailed(w, svc.ID, err)
		return
	}
	h.spliceTunnel(w, back)
}

// spliceTunnel takes over w's connection as a raw tunnel (ProtoTCP) and
// joins it to back until either side ends or both idle past the hub's
// IdleTimeout; back is closed if the connection cannot be taken.
func (h *Hub) spliceTunnel(w http.ResponseWriter, back net.Conn) {
	front, err := hijack(w, ProtoTCP, nil)
	if err != nil {
		back.Close()
		return
	}
	if !h.track(front) {
		front.Close()
		back.Close()
		return
	}
	defer h.untrack(front)
	splice(front, back, h.o.IdleTimeout)
}

// dialFailed answers for a replica that could not be reached.
func dialFailed(w http.ResponseWriter, id uint64, err error) {
	switch {
	case errors.Is(err, ErrBusy):
		w.Header().Set("Retry-After", "10")
		writeError(w, apiwire.CodeTooManyRequests, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		writeError(w, apiwire.CodeTimeout, fmt.Sprintf("service %d: no replica answered in time", id))
	default:
		w.Header().Set("Retry-After", "5")
		msg := fmt.Sprintf("service %d: no replica could be reached", id)
		if err != nil {
			msg += ": " + err.Error()
		}
		writeError(w, apiwire.CodeUnavailable, msg)
	}
}

func (h *Hub) takeTunnel(id uint64) (release func(), ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.tunnels[id] >= h.o.MaxTunnels {
		return nil, false
	}
	h.tunnels[id]++
	return func() {
		h.mu.Lock()
		if h.tunnels[id]--; h.tunnels[id] <= 0 {
			delete(h.tunnels, id)
		}
		h.mu.Unlock()
	}, true
}

// track records a hijacked conn so that Close ends it.
func (h *Hub) track(c net.Conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.conns[c] = struct{}{}
	return true
}

func (h *Hub) untrack(c net.Conn) {
	h.mu.Lock()
	delete(h.conns, c)
	h.mu.Unlock()
}

// lookup reads an active service or answers 404 (or 503 when the ledger
// cannot be read).
func (h *Hub) lookup(w http.ResponseWriter, id uint64) (*ledger.Service, bool) {
	svc, ok, err := h.o.Directory.Service(id)
	if err != nil {
		h.log.Error("relay: reading a service", "service", id, "err", err)
		w.Header().Set("Retry-After", "5")
		writeError(w, apiwire.CodeUnavailable, "cannot read the service now")
		return nil, false
	}
	if !ok || svc.Done() {
		writeError(w, apiwire.CodeNotFound, fmt.Sprintf("no active service %d", id))
		return nil, false
	}
	return svc, true
}

func writeUnauthorized(w http.ResponseWriter, id uint64) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="gpunet service"`)
	writeError(w, apiwire.CodeUnauthorized, fmt.Sprintf("service %d is private: send one of its keys as %s or Authorization: Bearer", id, HeaderKey))
}

// dialTunnel opens a raw tunnel through the node at relay.
func (h *Hub) dialTunnel(ctx context.Context, relay string, id uint64, provider address.Address, port uint64, credential string) (net.Conn, error) {
	u := normURL(relay) + TunnelPath + "?" + url.Values{
		"service":  {strconv.FormatUint(id, 10)},
		"provider": {provider.String()},
		"port":     {strconv.FormatUint(port, 10)},
	}.Encode()
	hdr := http.Header{HeaderHop: {"1"}}
	if credential != "" {
		hdr.Set(HeaderKey, credential)
	}
	if credential == "" && isWitnessProbe(ctx) && h.o.WitnessKey != nil {
		hdr.Set(HeaderWitness, signWitnessPass(h.o.WitnessKey, h.o.ChainID, relay, id, provider, port, h.now()))
	}
	c, _, err := dialUpgrade(ctx, u, ProtoTCP, hdr, h.o.HandshakeTimeout)
	if err != nil {
		return nil, fmt.Errorf("via %s: %w", relay, err)
	}
	return c, nil
}

// DialTCP opens a raw byte tunnel to port of service id through the node
// at nodeURL (Upgrade: gpunet-tcp on /svc/{id}/{port}), sending key when
// it is not empty. This is what `gpunet service connect` does per
// connection; a refusal is an *UpgradeError with the node's status.
func DialTCP(ctx context.Context, nodeURL string, id, port uint64, key string) (net.Conn, error) {
	hdr := http.Header{}
	if key != "" {
		hdr.Set(HeaderKey, key)
	}
	u := normURL(nodeURL) + "/svc/" + strconv.FormatUint(id, 10) + "/" + strconv.FormatUint(port, 10)
	c, _, err := dialUpgrade(ctx, u, ProtoTCP, hdr, 3*DefaultHandshakeTimeout)
	return c, err
}

// hasHop reports whether r came from another node.
func hasHop(r *http.Request) bool { return strings.TrimSpace(r.Header.Get(HeaderHop)) != "" }
