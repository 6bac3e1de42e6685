package relay

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Directory is what a Hub reads of the node's committed ledger state.
type Directory interface {
	// Service reads a service; ok is false when there is none.
	Service(id uint64) (svc *ledger.Service, ok bool, err error)
	// IsProvider reports whether a is a registered provider.
	IsProvider(a address.Address) bool
}

// HubOptions configure a Hub. Zero bounds take the defaults named.
type HubOptions struct {
	Directory Directory
	// Self is this node's advertised API URL: with ChainID, the identity
	// agents sign for (AgentSignBytes), which they must be configured with
	// and put in their heartbeats' Relay; and a URL the node never
	// forwards to.
	Self string
	// IsPeer reports whether the node may forward to the node at apiURL
	// (the peer book). nil: never forward.
	IsPeer  func(apiURL string) bool
	ChainID string
	Log     *slog.Logger
	Clock   func() time.Time // nil: time.Now
	// WitnessKey, when set, signs the witness passes of this node's
	// witness probes (WitnessProbe) on node-to-node tunnels; IsWitness
	// reports whether a consensus key is a witness in this node's ledger,
	// so that another node's pass opens a tunnel here (witness.go). nil:
	// no passes sent, none taken.
	WitnessKey ed25519.PrivateKey
	IsWitness  func(pub []byte) bool
	// OnDialFailed, when set, is told each time a dial of a replica
	// (DialReplica: a request of this node's gateways, another node's
	// tunnel, a probe) fails for a reason that may be the replica's, so
	// that the node can confirm it (ProbeDown) and report it. It must
	// return at once.
	OnDialFailed func(service uint64, provider address.Address)
	// OnSessionEnded, when set, is told when a provider's agent session
	// here ends without another taking its place (its agent died, or
	// its link): its replicas that name this node as their relay cannot
	// be reached now.
	OnSessionEnded func(provider address.Address)

	MaxSessions int // agent sessions at once; default 4096
	MaxStreams  int // open streams per session; default 1024
	// MaxTunnels bounds the raw tunnels (tcp upgrades and node-to-node
	// tunnels) open at once per service at this node; default 256.
	MaxTunnels int
	// HandshakeTimeout bounds dialling a replica: a stream's OK, a
	// node-to-node tunnel's 101; default 10 s.
	HandshakeTimeout time.Duration
	// IdleTimeout closes a raw tunnel that moved no byte either way for
	// this long; default 5 min.
	IdleTimeout time.Duration
	// KeepAlive: the node pings an agent it has heard nothing from for
	// this long and drops one it has heard nothing from for twice as
	// long (a dead agent is noticed within about 2.5×KeepAlive); default
	// 4 s.
	KeepAlive time.Duration
	// ResponseTimeout bounds the wait for a replica's response headers
	// on /svc; default 5 min (a completion may think long before its
	// first byte).
	ResponseTimeout time.Duration
	// MaxNonces bounds the handshake nonces issued and not yet used or
	// expired (NoncePath); past it the oldest is forgotten. Default 4096.
	MaxNonces int
	// MaxNoncesPerClient bounds those of one client address (an IPv6
	// /64); past it the client gets 429. Default 16.
	MaxNoncesPerClient int
	// NonceTTL is how long a nonce may be used in a handshake; default
	// 30 s.
	NonceTTL time.Duration
	// MaxGangStreams bounds the gang streams open at once through this
	// node for one gang job (gang.go); default 1024. Each member has at
	// most 2 × (members − 1).
	MaxGangStreams int
	// Peers lists the API URLs of the nodes this node knows (the peer
	// book), which it asks for a gang member whose agent is connected
	// elsewhere (gang_hop.go); nil: gang streams stay at this node.
	Peers func() []string
	// MaxGangHopsPerNode bounds the gang streams open at once between
	// this node and one other node, either way (gang_hop.go); default
	// 1024.
	MaxGangHopsPerNode int
}

// Defaults of HubOptions.
const (
	DefaultMaxSessions      = 4096
	DefaultMaxStreams       = 1024
	DefaultMaxTunnels       = 256
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultIdleTimeout      = 5 * time.Minute
	DefaultKeepAlive        = 4 * time.Second
	DefaultResponseTimeout  = 5 * time.Minute
)

// Errors of DialReplica; callers map them to statuses.
var (
	ErrNoRoute    = errors.New("relay: no route to the replica (its provider's agent is not connected here and its relay node is not a peer)")
	ErrNoReplica  = errors.New("relay: the provider has no replica of the service")
	ErrNoPort     = errors.New("relay: the service declares no such port")
	ErrBusy       = errors.New("relay: too many streams or tunnels")
	ErrClosed     = errors.New("relay: hub closed")
	ErrRefused    = errors.New("relay: the agent refused the stream")
	ErrNotService = errors.New("relay: no such active service")
)

// A Hub is a node's side of the relay: it holds agents' sessions, serves
// /svc and the node-to-node tunnel, and dials replicas for the node's own
// gateways. Its methods are safe for concurrent use.
type Hub struct {
	o      HubOptions
	self   string // o.Self as agents sign it
	log    *slog.Logger
	now    func() time.Time
	nonces *nonceBook

	mu       sync.Mutex
	closed   bool
	pending  int // agent handshakes past their checks, not yet in sessions
	sessions map[address.Address]*session
	tunnels  map[uint64]int        // open raw tunnels per service
	conns    map[net.Conn]struct{} // hijacked conns, closed by Close
	inflight map[replicaKey]int    // /svc requests in flight per replica
	gangs    map[uint64]int        // open gang streams per gang job (gang.go)
	gangFrom map[gangCaller]int    // open gang streams per gang member
	rr       map[uint64]uint64     // round robin per service
	probing  map[uint64]bool       // services being probed (probe.go)
	passes   passBook              // witness passes used lately (witness.go)
	// gangPasses are the gang passes used lately, gangHops the gang
	// streams open per other node, gangHomes the node each provider's
	// agent was last found at (gang_hop.go).
	gangPasses gangPassBook
	gangHops   map[string]int
	gangHomes  map[address.Address]string
	// down are the replicas a dial failed to reach lately, and when:
	// tried after the others until downFor has passed or one is reached.
	down map[replicaKey]time.Time

	transport *http.Transport
	proxy     *httputil.ReverseProxy
}

type replicaKey struct {
	service  uint64
	provider address.Address
}

type session struct {
	provider address.Address
	mux      *yamux.Session
	streams  chan struct{} // a slot per open stream
	// gangAsks is a slot per gang stream the agent opened whose request
	// is still being read or checked (gang.go).
	gangAsks chan struct{}
}

// NewHub returns a Hub. It starts nothing until its handlers are served.
func NewHub(o HubOptions) *Hub {
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.MaxStreams <= 0 {
		o.MaxStreams = DefaultMaxStreams
	}
	if o.MaxTunnels <= 0 {
		o.MaxTunnels = DefaultMaxTunnels
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = DefaultKeepAlive
	}
	if o.ResponseTimeout <= 0 {
		o.ResponseTimeout = DefaultResponseTimeout
	}
	if o.MaxNonces <= 0 {
		o.MaxNonces = DefaultMaxNonces
	}
	if o.MaxNoncesPerClient <= 0 {
		o.MaxNoncesPerClient = DefaultMaxNoncesPerClient
	}
	if o.NonceTTL <= 0 {
		o.NonceTTL = DefaultNonceTTL
	}
	if o.MaxGangStreams <= 0 {
		o.MaxGangStreams = DefaultMaxGangStreams
	}
	if o.MaxGangHopsPerNode <= 0 {
		o.MaxGangHopsPerNode = DefaultMaxGangHopsPerNode
	}
	h := &Hub{
		o:         o,
		self:      normURL(o.Self),
		log:       o.Log,
		now:       o.Clock,
		nonces:    newNonceBook(o.MaxNonces, o.MaxNoncesPerClient, o.NonceTTL),
		sessions:  map[address.Address]*session{},
		tunnels:   map[uint64]int{},
		conns:     map[net.Conn]struct{}{},
		inflight:  map[replicaKey]int{},
		gangs:     map[uint64]int{},
		gangFrom:  map[gangCaller]int{},
		gangHops:  map[string]int{},
		gangHomes: map[address.Address]string{},
		rr:        map[uint64]uint64{},
		probing:   map[uint64]bool{},
		down:      map[replicaKey]time.Time{},
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	h.transport = h.newTransport()
	h.proxy = h.newProxy()
	return h
}

// muxConfig is the yamux configuration of both ends: an accept backlog as
// large as the stream bound, so that opening a stream never blocks, and
// no yamux keepalive: yamux counts a ping unanswered within its write
// timeout as death, and under load the answer waits behind data frames,
// so a busy provider on a slow uplink would be cut off. watchdog decides
// liveness by bytes received instead.
func muxConfig(streams int, log *slog.Logger) *yamux.Config {
	c := yamux.DefaultConfig()
	c.AcceptBacklog = streams
	c.EnableKeepAlive = false
	c.KeepAliveInterval = time.Hour // unused, but must be positive
	c.ConnectionWriteTimeout = 30 * time.Second
	c.StreamOpenTimeout = 0
	c.StreamCloseTimeout = time.Minute
	c.LogOutput = nil
	c.Logger = slog.NewLogLogger(log.Handler(), slog.LevelDebug)
	return c
}

// activityConn records when its last bytes arrived.
type activityConn struct {
	net.Conn
	last atomic.Int64 // unix nanoseconds
}

func newActivityConn(c net.Conn) *activityConn {
	a := &activityConn{Conn: c}
	a.last.Store(time.Now().UnixNano())
	return a
}

func (a *activityConn) Read(p []byte) (int, error) {
	n, err := a.Conn.Read(p)
	if n > 0 {
		a.last.Store(time.Now().UnixNano())
	}
	return n, err
}

// watchdog pings the peer when nothing arrived for interval and closes the
// session when nothing arrived for 2×interval: a peer that is alive answers
// pings or sends data (a busy one at least window updates), so a dead or
// frozen one is noticed within about 2.5×interval.
func watchdog(mux *yamux.Session, c *activityConn, interval time.Duration) {
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	for {
		select {
		case <-mux.CloseChan():
			return
		case <-t.C:
			idle := time.Since(time.Unix(0, c.last.Load()))
			if idle >= 2*interval {
				mux.Close()
				return
			}
			if idle >= interval {
				go mux.Ping() // its answer counts as bytes received
			}
		}
	}
}

// Connected reports whether provider's agent holds a session with this
// node.
func (h *Hub) Connected(provider address.Address) bool {
	h.mu.Lock()
	s := h.sessions[provider]
	h.mu.Unlock()
	return s != nil && !s.mux.IsClosed()
}

// Close ends every session and tunnel and refuses new ones.
func (h *Hub) Close() error {
	h.mu.Lock()
	h.closed = true
	sessions := h.sessions
	h.sessions = map[address.Address]*session{}
	conns := h.conns
	h.conns = map[net.Conn]struct{}{}
	h.mu.Unlock()
	for _, s := range sessions {
		s.mux.Close()
	}
	for c := range conns {
		c.Close()
	}
	h.transport.CloseIdleConnections()
	return nil
}

// AgentHandler serves GET /v1/relay/agent: a provider's agent opening its
// session with a handshake signed over a nonce from NonceHandler (see the
// package comment).
func (h *Hub) AgentHandler() http.Handler {
	return http.HandlerFunc(h.serveAgent)
}

func (h *Hub) serveAgent(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeError(w, apiwire.CodeMethodNotAllowed, "use GET with Upgrade: "+ProtoAgent)
		return
	}
	if !upgradeRequested(r, ProtoAgent) {
		w.Header().Set("Upgrade", ProtoAgent)
		writeError(w, apiwire.CodeInvalidArgument, "Connection: Upgrade and Upgrade: "+ProtoAgent+" required")
		return
	}
	provider, err := h.checkAgent(r)
	if err != nil {
		writeError(w, apiwire.CodeForbidden, err.Error())
		return
	}
	// A slot is held from here until the session is in the map, so that
	// handshakes at once cannot exceed the bound.
	h.mu.Lock()
	full := h.closed || (h.sessions[provider] == nil && len(h.sessions)+h.pending >= h.o.MaxSessions)
	if !full {
		h.pending++
	}
	h.mu.Unlock()
	if full {
		w.Header().Set("Retry-After", "30")
		writeError(w, apiwire.CodeUnavailable, "this node holds as many agent sessions as it may; try another node")
		return
	}
	registered := false
	defer func() {
		if !registered {
			h.mu.Lock()
			h.pending--
			h.mu.Unlock()
		}
	}()
	conn, err := hijack(w, ProtoAgent, nil)
	if err != nil {
		h.log.Warn("relay: agent hijack failed", "provider", provider, "err", err)
		return
	}
	ac := newActivityConn(conn)
	mux, err := yamux.Client(ac, muxConfig(h.o.MaxStreams, h.log))
	if err != nil {
		conn.Close()
		return
	}
	go watchdog(mux, ac, h.o.KeepAlive)
	s := &session{provider: provider, mux: mux, streams: make(chan struct{}, h.o.MaxStreams), gangAsks: make(chan struct{}, maxGangAsks)}
	h.mu.Lock()
	h.pending--
	registered = true
	if h.closed {
		h.mu.Unlock()
		mux.Close()
		return
	}
	old := h.sessions[provider]
	h.sessions[provider] = s
	h.mu.Unlock()
	if old != nil {
		old.mux.Close()
	}
	go h.acceptGangStreams(s)
	h.log.Info("relay: agent connected", "provider", provider, "remote", r.RemoteAddr)
	go func() {
		<-mux.CloseChan()
		h.mu.Lock()
		ended := h.sessions[provider] == s
		if ended {
			delete(h.sessions, provider)
		}
		h.mu.Unlock()
		h.log.Info("relay: agent session ended", "provider", provider)
		if ended && h.o.OnSessionEnded != nil {
			h.o.OnSessionEnded(provider)
		}
	}()
}

// checkAgent verifies an agent's handshake: well formed, signed by the
// provider's key for this node's chain and advertised URL over a nonce
// this node issued, by a registered provider; then it takes the nonce, so
// the handshake cannot be used again. The errors name what is wrong, and
// what this node is, for the agent's operator: the agent never acts on
// them.
func (h *Hub) checkAgent(r *http.Request) (address.Address, error) {
	a, err := parseAgentHello(r.Header)
	if err != nil {
		return a.provider, err
	}
	if h.self == "" {
		return a.provider, errors.New("this node has no advertised API URL, so no agent can sign for it")
	}
	if !a.verify(h.o.ChainID, h.self) {
		return a.provider, fmt.Errorf("bad signature: this node is %q on chain %q; an agent must be configured with that URL and chain and sign relay.AgentSignBytes(chain, URL, nonce) over a nonce this node issued", h.self, h.o.ChainID)
	}
	if h.o.Directory == nil || !h.o.Directory.IsProvider(a.provider) {
		return a.provider, fmt.Errorf("%s is not a registered provider", a.provider)
	}
	if !h.nonces.take(a.nonce, h.now()) {
		return a.provider, fmt.Errorf("%s was not issued by this node, was used already, or expired (each nonce is good for one handshake within %v); POST %s for a new one", HeaderNonce, h.o.NonceTTL, NoncePath)
	}
	return a.provider, nil
}

// header is a stream's first line.
type header struct {
	Service uint64 `json:"service"`
	Port    uint64 `json:"port"`
}

type ctxKey int

const noForwardKey ctxKey = iota

// noForward marks ctx as serving a request that came from another node:
// DialReplica then uses local sessions only.
func noForward(ctx context.Context) context.Context {
	return context.WithValue(ctx, noForwardKey, true)
}

// DialReplica connects to port of provider's replica of svc: through this
// node's session with the provider's agent, else through the replica's
// Relay node when that is a peer (never Self, never for a request that
// came from another node), with credential as the client's key there. The
// port must be declared; its protocol does not matter. The returned conn
// is a raw byte stream to the replica's port; closing it ends the stream.
// Its errors wrap ErrNoRoute, ErrNoReplica, ErrNoPort, ErrBusy,
// ErrRefused or an *UpgradeError of the relay node.
func (h *Hub) DialReplica(ctx context.Context, svc *ledger.Service, provider address.Address, port uint64, credential string) (net.Conn, error) {
	c, err := h.dialReplica(ctx, svc, provider, port, credential)
	switch {
	case err == nil:
		h.markDown(svc.ID, provider, false)
	case ctx.Err() == nil && !errors.Is(err, ErrBusy) && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNoPort):
		// Unreachable now (its agent gone, the replica refusing, its
		// relay node without it): the next requests try the others
		// first.
		h.markDown(svc.ID, provider, true)
		if h.o.OnDialFailed != nil {
			h.o.OnDialFailed(svc.ID, provider)
		}
	}
	return c, err
}

func (h *Hub) dialReplica(ctx context.Context, svc *ledger.Service, provider address.Address, port uint64, credential string) (net.Conn, error) {
	if svc.Spec.Port(port) == nil {
		return nil, fmt.Errorf("service %d port %d: %w", svc.ID, port, ErrNoPort)
	}
	var rep *ledger.Replica
	for i := range svc.Replicas {
		if svc.Replicas[i].Provider == provider {
			rep = &svc.Replicas[i]
			break
		}
	}
	if rep == nil {
		return nil, fmt.Errorf("service %d provider %s: %w", svc.ID, provider, ErrNoReplica)
	}
	h.mu.Lock()
	s, closed := h.sessions[provider], h.closed
	h.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if s != nil && !s.mux.IsClosed() {
		return h.openStream(ctx, s, svc.ID, port)
	}
	if ctx.Value(noForwardKey) != nil || !h.mayForward(rep.Relay) {
		return nil, fmt.Errorf("service %d provider %s (relay %q): %w", svc.ID, provider, rep.Relay, ErrNoRoute)
	}
	return h.dialTunnel(ctx, rep.Relay, svc.ID, provider, port, credential)
}

func (h *Hub) mayForward(relay string) bool {
	return relay != "" && normURL(relay) != normURL(h.o.Self) && h.o.IsPeer != nil && h.o.IsPeer(relay)
}

// openStream opens a stream to the agent and asks it for port of its
// replica of service.
func (h *Hub) openStream(ctx context.Context, s *session, service, port uint64) (net.Conn, error) {
	line, _ := json.Marshal(header{Service: service, Port: port})
	return h.openStreamWith(ctx, s, line)
}

// openStreamWith opens a stream to the agent, writes line (a stream
// header, without its newline) and waits for the agent's OK.
func (h *Hub) openStreamWith(ctx context.Context, s *session, line []byte) (net.Conn, error) {
	select {
	case s.streams <- struct{}{}:
	default:
		return nil, fmt.Errorf("provider %s: %d streams open: %w", s.provider, cap(s.streams), ErrBusy)
	}
	release := func() { <-s.streams }
	st, err := s.mux.OpenStream()
	if err != nil {
		release()
		return nil, fmt.Errorf("provider %s: %w: %w", s.provider, err, ErrNoRoute)
	}
	deadline := time.Now().Add(h.o.HandshakeTimeout) // a real deadline, whatever Clock says
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	st.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { st.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (net.Conn, error) {
		stop()
		st.Close()
		release()
		return nil, ctxErr(ctx, err)
	}
	if _, err := st.Write(append(line, '\n')); err != nil {
		return fail(fmt.Errorf("provider %s: %w", s.provider, err))
	}
	ans, err := readLine(st, MaxLine)
	if err != nil {
		return fail(fmt.Errorf("provider %s: reading the agent's answer: %w", s.provider, err))
	}
	if ans != "OK" {
		return fail(fmt.Errorf("provider %s: %s: %w", s.provider, strings.TrimPrefix(ans, "ERR "), ErrRefused))
	}
	if !stop() {
		return fail(ctx.Err())
	}
	st.SetDeadline(time.Time{})
	return &onClose{Conn: st, fn: release}, nil
}

// writeError writes an error as the API does: an apiwire.ErrorBody whose
// code is the stable one of status.
func writeError(w http.ResponseWriter, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(apiwire.ErrorCodes[code])
	json.NewEncoder(w).Encode(apiwire.ErrorBody{Code: code, Message: msg})
}
