package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// ServicePrefix starts every public service address: /svc/{id}/{port}/….
const ServicePrefix = "/svc/"

// ServiceHandler serves /svc/{id}/{port}/…: the HTTP port of a service,
// with the prefix stripped, X-Forwarded-For/Proto/Host/Prefix set and the
// gpunet key removed; and, with Upgrade: gpunet-tcp on /svc/{id}/{port},
// a raw byte tunnel to any declared port. It answers 404 for an unknown
// or ended service or an undeclared port, 400 for HTTP to a tcp port, 401
// without a key the service accepts, 503 (Retry-After) when no replica can
// be reached. Responses stream: each chunk is flushed as it comes.
func (h *Hub) ServiceHandler() http.Handler {
	return http.HandlerFunc(h.serveService)
}

// KeyHolder reports whether r, a request for /svc/{id}/{port}/…, carries
// one of service id's keys. It reads the headers and the ledger only, so a
// node asks it before any byte of the body, to admit key holders to the
// connections it keeps for trusted clients (internal/admission); a public
// service's anonymous clients are not key holders.
func (h *Hub) KeyHolder(r *http.Request) bool {
	keys := requestKeys(r)
	id, _, _, ok := parseServicePath(r.URL.Path)
	if !ok || len(keys) == 0 {
		return false
	}
	svc, ok, err := h.o.Directory.Service(id)
	if err != nil || !ok || svc.Done() {
		return false
	}
	for _, key := range keys {
		if keyMatches(svc, key) {
			return true
		}
	}
	return false
}

// parseServicePath splits /svc/{id}/{port}/rest; rest keeps its leading
// slash and is empty for /svc/{id}/{port}.
func parseServicePath(p string) (id, port uint64, rest string, ok bool) {
	s, ok := strings.CutPrefix(p, ServicePrefix)
	if !ok {
		return 0, 0, "", false
	}
	idStr, s, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, "", false
	}
	portStr, rest, _ := strings.Cut(s, "/")
	if rest != "" || strings.HasSuffix(s, "/") {
		rest = "/" + rest
	}
	id, err1 := strconv.ParseUint(idStr, 10, 64)
	port, err2 := strconv.ParseUint(portStr, 10, 64)
	if err1 != nil || err2 != nil || port == 0 || port > 65535 {
		return 0, 0, "", false
	}
	return id, port, rest, true
}

func (h *Hub) serveService(w http.ResponseWriter, r *http.Request) {
	id, port, rest, ok := parseServicePath(r.URL.Path)
	if !ok {
		writeError(w, apiwire.CodeNotFound, "a service's address is /svc/{id}/{port}/…")
		return
	}
	svc, ok := h.lookup(w, id)
	if !ok {
		return
	}
	sp := svc.Spec.Port(port)
	if sp == nil {
		writeError(w, apiwire.CodeNotFound, fmt.Sprintf("service %d declares no port %d", id, port))
		return
	}
	credential, ok := Authorized(svc, r)
	if !ok {
		writeUnauthorized(w, id)
		return
	}
	ctx := r.Context()
	if hasHop(r) {
		ctx = noForward(ctx)
	}
	tcp := upgradeRequested(r, ProtoTCP)
	if tcp && rest != "" && rest != "/" {
		writeError(w, apiwire.CodeInvalidArgument, fmt.Sprintf("a tcp tunnel is opened on /svc/%d/%d itself", id, port))
		return
	}
	if !tcp && sp.Protocol == ledger.PortTCP {
		writeError(w, apiwire.CodeInvalidArgument, fmt.Sprintf("port %d of service %d is tcp: open a tunnel (Upgrade: %s, gpunet service connect)", port, id, ProtoTCP))
		return
	}
	cands := h.candidates(ctx, svc)
	if len(cands) == 0 {
		w.Header().Set("Retry-After", "5")
		writeError(w, apiwire.CodeUnavailable, fmt.Sprintf("service %d has no ready replica reachable from this node", id))
		return
	}
	if tcp {
		h.serveRaw(ctx, w, r, svc, port, cands)
		return
	}
	h.proxyHTTP(ctx, w, r, svc, port, rest, credential, cands)
}

// downFor is how long a replica a dial failed to reach is tried after the
// others: long enough to cover the ledger's drop of a dead replica at a
// short heartbeat timeout, short enough that a replica back from a blip is
// soon used again.
const downFor = 10 * time.Second

// markDown records that a dial of provider's replica of service failed
// (down) or succeeded.
func (h *Hub) markDown(service uint64, provider address.Address, down bool) {
	k := replicaKey{service, provider}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !down {
		delete(h.down, k)
		return
	}
	if len(h.down) >= maxDown {
		now := h.now()
		for k, at := range h.down {
			if now.Sub(at) >= downFor {
				delete(h.down, k)
			}
		}
		if len(h.down) >= maxDown {
			return // bounded; the retry still routes around it
		}
	}
	h.down[k] = h.now()
}

// maxDown bounds the replicas remembered as down.
const maxDown = 4096

// candidates lists the providers of svc's routable replicas that this node
// can reach, best first: those not seen down lately (a dial to them failed
// within downFor), then those whose agent is connected here, then the
// least loaded by this node's requests, ties taken in round-robin order.
// A replica seen down is still listed, last: the ledger's record is the
// authority, and a dial failure may have been a blip.
func (h *Hub) candidates(ctx context.Context, svc *ledger.Service) []address.Address {
	forward := ctx.Value(noForwardKey) == nil
	type cand struct {
		p        address.Address
		down     bool
		local    bool
		inflight int
	}
	var cs []cand
	h.mu.Lock()
	now := h.now()
	for _, rep := range svc.Replicas {
		if !rep.Ready || rep.ReadyAt == 0 {
			continue
		}
		s := h.sessions[rep.Provider]
		local := s != nil && !s.mux.IsClosed()
		if !local && !(forward && h.mayForward(rep.Relay)) {
			continue
		}
		k := replicaKey{svc.ID, rep.Provider}
		at, down := h.down[k]
		if down && now.Sub(at) >= downFor {
			delete(h.down, k)
			down = false
		}
		cs = append(cs, cand{rep.Provider, down, local, h.inflight[k]})
	}
	start := h.rr[svc.ID]
	h.rr[svc.ID]++
	h.mu.Unlock()
	if len(cs) == 0 {
		return nil
	}
	k := int(start % uint64(len(cs)))
	cs = append(cs[k:], cs[:k]...)
	slices.SortStableFunc(cs, func(a, b cand) int {
		if a.down != b.down {
			if b.down {
				return -1
			}
			return 1
		}
		if a.local != b.local {
			if a.local {
				return -1
			}
			return 1
		}
		return a.inflight - b.inflight
	})
	out := make([]address.Address, len(cs))
	for i, c := range cs {
		out[i] = c.p
	}
	return out
}

// proxyReq is what the shared reverse proxy and transport learn of one
// attempt, through the request's context.
type proxyReq struct {
	svc        *ledger.Service
	port       uint64
	provider   address.Address
	credential string
	rest       string
	restRaw    string
	prefix     string
	local      bool // no forwarding (a request from another node)
	body       *guardBody
	last       bool  // no other replica to try after this one
	err        error // the attempt's failure
}

type proxyKey struct{}

// dialError marks a failure to reach the replica: nothing was sent, so
// another replica may be tried.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// guardBody keeps the request body open across attempts (a transport
// closes the body it was given even when it never read it) and tells
// whether any of it was consumed.
type guardBody struct {
	rc   io.ReadCloser
	read atomic.Bool
}

func (g *guardBody) Read(p []byte) (int, error) {
	n, err := g.rc.Read(p)
	if n > 0 {
		g.read.Store(true)
	}
	return n, err
}

func (g *guardBody) Close() error { return nil }

func (h *Hub) proxyHTTP(ctx context.Context, w http.ResponseWriter, r *http.Request, svc *ledger.Service, port uint64, rest, credential string, cands []address.Address) {
	prefix := fmt.Sprintf("/svc/%d/%d", svc.ID, port)
	restRaw := rest
	if esc := r.URL.EscapedPath(); strings.HasPrefix(esc, prefix) {
		restRaw = esc[len(prefix):]
	}
	if rest == "" {
		rest, restRaw = "/", "/"
	}
	var body *guardBody
	if r.Body != nil && r.Body != http.NoBody {
		body = &guardBody{rc: r.Body}
	}
	for i, p := range cands {
		pr := &proxyReq{
			svc: svc, port: port, provider: p, credential: credential,
			rest: rest, restRaw: restRaw, prefix: prefix,
			local: ctx.Value(noForwardKey) != nil,
			body:  body, last: i == len(cands)-1,
		}
		req := r.WithContext(context.WithValue(ctx, proxyKey{}, pr))
		if body != nil {
			req.Body = body
		}
		k := replicaKey{svc.ID, p}
		h.mu.Lock()
		h.inflight[k]++
		h.mu.Unlock()
		h.proxy.ServeHTTP(w, req)
		h.mu.Lock()
		if h.inflight[k]--; h.inflight[k] <= 0 {
			delete(h.inflight, k)
		}
		h.mu.Unlock()
		if pr.err == nil || !pr.retryable(ctx) {
			return
		}
		h.log.Debug("relay: replica unreachable, trying the next", "service", svc.ID, "provider", p, "err", pr.err)
	}
}

func (pr *proxyReq) retryable(ctx context.Context) bool {
	var de *dialError
	return !pr.last && ctx.Err() == nil && errors.As(pr.err, &de) && (pr.body == nil || !pr.body.read.Load())
}

// host names a (service, provider, port) for the transport's pool; hop
// requests (local only) pool apart.
func (pr *proxyReq) host() string {
	h := fmt.Sprintf("s%d-p%d-%s", pr.svc.ID, pr.port, pr.provider)
	if pr.local {
		h += "-l"
	}
	return h + ".relay.invalid"
}

// newProxy returns the reverse proxy of every /svc request.
func (h *Hub) newProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(p *httputil.ProxyRequest) {
			pr := p.In.Context().Value(proxyKey{}).(*proxyReq)
			p.Out.URL.Scheme = "http"
			p.Out.URL.Host = pr.host()
			p.Out.URL.Path = pr.rest
			p.Out.URL.RawPath = pr.restRaw
			p.Out.Host = p.In.Host
			p.SetXForwarded()
			p.Out.Header.Set("X-Forwarded-Prefix", pr.prefix)
			p.Out.Header.Del(HeaderKey)
			p.Out.Header.Del(HeaderHop)
			if tok, ok := bearer(p.In); ok && isGpunetKey(pr.svc, tok) {
				p.Out.Header.Del("Authorization")
			}
		},
		Transport:     h.transport,
		FlushInterval: -1,
		ErrorLog:      slog.NewLogLogger(h.log.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			pr := r.Context().Value(proxyKey{}).(*proxyReq)
			pr.err = err
			if pr.retryable(r.Context()) {
				return
			}
			if r.Context().Err() != nil {
				return // the client went away
			}
			var de *dialError
			switch {
			case errors.As(err, &de):
				dialFailed(w, pr.svc.ID, de.err)
			case isTimeout(err):
				writeError(w, apiwire.CodeTimeout, fmt.Sprintf("service %d: the replica did not answer in time", pr.svc.ID))
			default:
				w.Header().Set("Retry-After", "5")
				writeError(w, apiwire.CodeUnavailable, fmt.Sprintf("service %d: the replica failed: %v", pr.svc.ID, err))
			}
		},
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) || strings.Contains(err.Error(), "timeout awaiting response headers")
}

// newTransport is the pool of connections to replicas: keyed by
// (service, provider, port), dialled with DialReplica, bounded in idle
// connections per replica and in all.
func (h *Hub) newTransport() *http.Transport {
	return &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			pr, ok := ctx.Value(proxyKey{}).(*proxyReq)
			if !ok {
				return nil, errors.New("relay: dial without a service request")
			}
			c, err := h.DialReplica(ctx, pr.svc, pr.provider, pr.port, pr.credential)
			if err != nil {
				return nil, &dialError{err}
			}
			return c, nil
		},
		MaxIdleConns:           1024,
		MaxIdleConnsPerHost:    32,
		IdleConnTimeout:        90 * time.Second,
		ResponseHeaderTimeout:  h.o.ResponseTimeout,
		ExpectContinueTimeout:  time.Second,
		DisableCompression:     true,
		MaxResponseHeaderBytes: 64 << 10,
	}
}
