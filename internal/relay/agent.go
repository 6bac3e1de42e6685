package relay

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/gpunet/gpunet/internal/address"
)

// AgentPath is the route of agents' sessions.
const AgentPath = "/v1/relay/agent"

// AgentOptions configure an Agent.
type AgentOptions struct {
	// Nodes are the advertised API URLs of the nodes the agent may hold
	// its session with (NodeURL's form); it holds one at a time, trying
	// them in turn, and reconnects with a backoff of 1 s doubling to
	// 30 s. A URL is the node's identity in the handshake: the agent
	// signs for the URL it dials and no other, and a node accepts only
	// its own advertised URL.
	Nodes []string
	// Key is the provider's key: it signs the handshake.
	Key ed25519.PrivateKey
	// Dial connects to port of the provider's replica of service. The
	// agent calls it for each stream a node opens; it should refuse a
	// port the service does not declare and a replica that is not its own
	// or not ready.
	Dial func(ctx context.Context, service, port uint64) (net.Conn, error)
	// AcceptGang is asked for each gang stream a node opens to the
	// provider's member of rank s.Rank of gang s.Job in placement
	// s.Placement, from the member of rank s.From (the node checked both
	// against its ledger: gang.go). It returns serve, which the agent
	// calls with the stream (after answering OK) and which reads it until
	// it ends; or an error, to refuse a member this provider does not run
	// now. The stream goes to serve itself, not through a splice: a gang
	// stream carries every packet of a member that no direct path
	// reaches. nil: gang streams are refused.
	AcceptGang func(s GangStream) (serve func(net.Conn), err error)
	Log        *slog.Logger
	// ChainID is the chain the agent works on, signed into every
	// handshake; required. The agent never takes a chain from a node.
	ChainID string
	// KeepAlive: the agent pings a node it has heard nothing from for
	// this long and drops one silent for twice as long; default 4 s.
	KeepAlive time.Duration
	// MaxStreams bounds the streams served at once; default 1024.
	MaxStreams int
	// IdleTimeout closes a stream that moved no byte for this long;
	// default 5 min.
	IdleTimeout time.Duration
}

// Agent is a provider's side of the relay: one session with one node,
// over which that node reaches the provider's replicas.
type Agent struct {
	o     AgentOptions
	log   *slog.Logger
	addr  address.Address
	http  *http.Client // for nonces
	mu    sync.Mutex
	relay string
	mux   *yamux.Session // the session with relay; nil when none
}

// NewAgent returns an Agent; Run connects it.
func NewAgent(o AgentOptions) *Agent {
	if o.KeepAlive <= 0 {
		o.KeepAlive = DefaultKeepAlive
	}
	if o.MaxStreams <= 0 {
		o.MaxStreams = DefaultMaxStreams
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	a := &Agent{o: o, log: o.Log, http: &http.Client{
		Timeout: DefaultHandshakeTimeout,
		// One request per handshake, to the URL configured: never a
		// redirect elsewhere, no proxy (the upgrade uses none either).
		Transport:     &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if len(o.Key) == ed25519.PrivateKeySize {
		a.addr = address.FromPubKey(o.Key.Public().(ed25519.PublicKey))
	}
	return a
}

// Relay is the advertised API URL of the node the agent holds its session
// with ("" when it holds none): the URL it is configured with, which the
// node accepted as its own; what the provider's heartbeats report.
func (a *Agent) Relay() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.relay
}

func (a *Agent) setRelay(u string) {
	a.mu.Lock()
	a.relay = u
	if u == "" {
		a.mux = nil
	}
	a.mu.Unlock()
}

func (a *Agent) setSession(u string, mux *yamux.Session) {
	a.mu.Lock()
	a.relay, a.mux = u, mux
	a.mu.Unlock()
}

// ErrNoSession is DialGang's error while the agent holds no session.
var ErrNoSession = errors.New("relay agent: no session with a node now")

// DialGang opens a gang stream, through the node the agent holds its
// session with, to the member of rank of gang job in its placement
// (ledger.Job.Attempts), for this provider's member of that gang: the
// node checks both against its ledger and hands the stream to rank's
// provider's agent (gang.go). A refusal's error says the node's reason
// and wraps ErrRefused; ErrNoSession while there is no session.
func (a *Agent) DialGang(ctx context.Context, job, placement uint64, rank int) (net.Conn, error) {
	a.mu.Lock()
	mux, node := a.mux, a.relay
	a.mu.Unlock()
	if mux == nil || mux.IsClosed() {
		return nil, ErrNoSession
	}
	st, err := mux.OpenStream()
	if err != nil {
		return nil, fmt.Errorf("relay agent: open a gang stream: %w", err)
	}
	deadline := time.Now().Add(2 * DefaultHandshakeTimeout) // the node's check, then its own stream's handshake
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	st.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { st.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (net.Conn, error) {
		stop()
		st.Close()
		return nil, ctxErr(ctx, err)
	}
	// The pass lets the node carry the stream to another node, when the
	// member of rank holds its session there (gang_hop.go).
	q := gangRequest{Gang: job, Placement: placement, Rank: uint64(rank)}
	if len(a.o.Key) == ed25519.PrivateKeySize {
		q.Pass = signGangPass(a.o.Key, a.o.ChainID, node, job, placement, uint64(rank), time.Now())
	}
	line, _ := json.Marshal(q)
	if _, err := st.Write(append(line, '\n')); err != nil {
		return fail(fmt.Errorf("relay agent: gang request: %w", err))
	}
	ans, err := readLine(st, MaxLine)
	if err != nil {
		return fail(fmt.Errorf("relay agent: reading the node's answer to a gang request: %w", err))
	}
	if ans != "OK" {
		return fail(fmt.Errorf("gang %d rank %d: %s: %w", job, rank, strings.TrimPrefix(ans, "ERR "), ErrRefused))
	}
	if !stop() {
		return fail(ctx.Err())
	}
	st.SetDeadline(time.Time{})
	return st, nil
}

// Backoff bounds of an agent's reconnects.
const (
	minBackoff = time.Second
	maxBackoff = 30 * time.Second
)

// Run holds a session with one of the nodes until ctx ends, reconnecting
// when it drops. It returns nil when ctx ends, and an error only for
// options it cannot work with.
func (a *Agent) Run(ctx context.Context) error {
	if len(a.o.Nodes) == 0 {
		return errors.New("relay agent: no nodes")
	}
	if len(a.o.Key) != ed25519.PrivateKeySize || a.o.Dial == nil {
		return errors.New("relay agent: Key and Dial are required")
	}
	if err := checkChainID(a.o.ChainID); err != nil {
		return fmt.Errorf("relay agent: %w", err)
	}
	nodes := make([]string, len(a.o.Nodes))
	for i, n := range a.o.Nodes {
		u, err := NodeURL(n)
		if err != nil {
			return fmt.Errorf("relay agent: %w", err)
		}
		nodes[i] = u
	}
	backoff := minBackoff
	for i := 0; ; {
		node := nodes[i%len(nodes)]
		served, err := a.session(ctx, node)
		a.setRelay("")
		if ctx.Err() != nil {
			return nil
		}
		if served {
			// It worked: the next try goes to the same node, soon.
			backoff = minBackoff
			a.log.Warn("relay: session with node ended", "node", node, "err", err)
		} else {
			a.log.Warn("relay: cannot connect to node", "node", node, "err", err)
			i++
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		if !served {
			backoff = min(2*backoff, maxBackoff)
		}
	}
}

// session connects to node and serves its streams until the session ends;
// served reports whether it was established.
func (a *Agent) session(ctx context.Context, node string) (served bool, err error) {
	conn, err := a.connect(ctx, node)
	if err != nil {
		return false, err
	}
	ac := newActivityConn(conn)
	mux, err := yamux.Server(ac, muxConfig(a.o.MaxStreams, a.log))
	if err != nil {
		conn.Close()
		return false, err
	}
	defer mux.Close()
	go watchdog(mux, ac, a.o.KeepAlive)
	stop := context.AfterFunc(ctx, func() { mux.Close() })
	defer stop()
	a.setSession(node, mux)
	a.log.Info("relay: connected", "node", node)
	sem := make(chan struct{}, a.o.MaxStreams)
	for {
		st, err := mux.AcceptStream()
		if err != nil {
			return true, err
		}
		select {
		case sem <- struct{}{}:
			go func() {
				defer func() { <-sem }()
				a.serveStream(ctx, st)
			}()
		default:
			go func() {
				st.SetWriteDeadline(time.Now().Add(5 * time.Second))
				fmt.Fprintf(st, "ERR busy: %d streams open\n", a.o.MaxStreams)
				st.Close()
			}()
		}
	}
}

// connect opens a session with the node at node (NodeURL's form): it
// gets a nonce from that node, signs the handshake for that URL, its own
// chain and the nonce, and upgrades. It signs nothing else: whatever a node
// answers (the identity in its nonce answer, a refusal) is never signed
// for, so no node can have it sign a handshake good at another.
func (a *Agent) connect(ctx context.Context, node string) (net.Conn, error) {
	nonce, err := a.nonce(ctx, node)
	if err != nil {
		return nil, err
	}
	pub := a.o.Key.Public().(ed25519.PublicKey)
	hdr := http.Header{
		HeaderProvider:  {a.addr.String()},
		HeaderPubkey:    {hex.EncodeToString(pub)},
		HeaderNonce:     {hex.EncodeToString(nonce)},
		HeaderSignature: {hex.EncodeToString(ed25519.Sign(a.o.Key, AgentSignBytes(a.o.ChainID, node, nonce)))},
	}
	conn, _, err := dialUpgrade(ctx, node+AgentPath, ProtoAgent, hdr, DefaultHandshakeTimeout)
	return conn, err
}

// nonce asks node for the nonce of a handshake. A node that says it is
// another URL or on another chain gets no signature: the agent's
// configuration is wrong, or the node is not the one configured.
func (a *Agent) nonce(ctx context.Context, node string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, node+NoncePath, nil)
	if err != nil {
		return nil, err
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("handshake nonce: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxNonceAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("handshake nonce: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("handshake nonce: %w", &UpgradeError{Status: resp.StatusCode, Body: strings.TrimSpace(string(body[:min(len(body), MaxLine)]))})
	}
	ans, nonce, err := parseNonceAnswer(body)
	if err != nil {
		return nil, fmt.Errorf("handshake nonce from %s: %w", node, err)
	}
	if normURL(ans.Node) != node || ans.Chain != a.o.ChainID {
		return nil, fmt.Errorf("the node at %s says it is %.300q on chain %.300q; this agent signs only for %s on chain %s: configure it with the node's advertised API URL (gpunet status shows it), or check that the node is on this chain",
			node, ans.Node, ans.Chain, node, a.o.ChainID)
	}
	return nonce, nil
}

// serveStream reads a stream's header, dials the replica's port and
// splices the two.
func (a *Agent) serveStream(ctx context.Context, st net.Conn) {
	st.SetReadDeadline(time.Now().Add(DefaultHandshakeTimeout))
	line, err := readLine(st, MaxLine)
	if err != nil {
		st.Close()
		return
	}
	g, err := parseGangHeader(line)
	if err == nil {
		a.serveGangStream(st, g)
		return
	}
	var back net.Conn
	dctx, cancel := context.WithTimeout(ctx, DefaultHandshakeTimeout)
	if errors.Is(err, errNotGang) {
		var h header
		if h, err = parseStreamHeader(line); err == nil {
			back, err = a.o.Dial(dctx, h.Service, h.Port)
		}
	}
	cancel()
	if err != nil {
		a.log.Debug("relay: stream refused", "header", line, "err", err)
		refuse(st, err.Error())
		return
	}
	st.SetDeadline(time.Now().Add(DefaultHandshakeTimeout))
	if _, err := st.Write([]byte("OK\n")); err != nil {
		st.Close()
		back.Close()
		return
	}
	st.SetDeadline(time.Time{})
	splice(st, back, a.o.IdleTimeout)
}

// serveGangStream hands a gang stream to the member it names, or refuses
// it.
func (a *Agent) serveGangStream(st net.Conn, g GangStream) {
	if a.o.AcceptGang == nil {
		refuse(st, "this provider runs no gang members")
		return
	}
	serve, err := a.o.AcceptGang(g)
	if err != nil {
		a.log.Debug("relay: gang stream refused", "job", g.Job, "rank", g.Rank, "from", g.From, "err", err)
		refuse(st, err.Error())
		return
	}
	st.SetDeadline(time.Now().Add(DefaultHandshakeTimeout))
	if _, err := st.Write([]byte("OK\n")); err != nil {
		st.Close()
		return
	}
	st.SetDeadline(time.Time{})
	serve(st)
	st.Close()
}

// refuse answers a stream with ERR and a one-line reason.
func refuse(st net.Conn, reason string) {
	reason = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, reason)
	if len(reason) > 512 {
		reason = reason[:512]
	}
	st.SetWriteDeadline(time.Now().Add(5 * time.Second))
	st.Write([]byte("ERR " + reason + "\n"))
	st.Close()
}

// parseStreamHeader reads a stream's first line, {"service":ID,"port":P},
// as the node wrote it: nothing else in it, and P a TCP port.
func parseStreamHeader(line string) (header, error) {
	var h header
	dec := json.NewDecoder(strings.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return h, fmt.Errorf("bad stream header: %w", err)
	}
	if rest := strings.TrimSpace(line[dec.InputOffset():]); rest != "" {
		return h, fmt.Errorf("bad stream header: %.40q after the JSON object", rest)
	}
	if h.Port == 0 || h.Port > 65535 {
		return h, fmt.Errorf("bad stream header: port %d is not 1 to 65535", h.Port)
	}
	return h, nil
}
