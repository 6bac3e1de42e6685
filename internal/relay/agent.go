package relay

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
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
	// Nodes are API base URLs; the agent holds a session with one at a
	// time, trying them in turn, and reconnects with a backoff of 1 s
	// doubling to 30 s.
	Nodes []string
	// Key is the provider's key: it signs the handshake.
	Key ed25519.PrivateKey
	// Dial connects to port of the provider's replica of service. The
	// agent calls it for each stream a node opens; it should refuse a
	// port the service does not declare and a replica that is not its own
	// or not ready.
	Dial func(ctx context.Context, service, port uint64) (net.Conn, error)
	Log  *slog.Logger
	// ChainID is the nodes' chain, signed into the handshake; empty: the
	// agent learns it from the node's first refusal.
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
	mu    sync.Mutex
	relay string
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
	a := &Agent{o: o, log: o.Log}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if len(o.Key) == ed25519.PrivateKeySize {
		a.addr = address.FromPubKey(o.Key.Public().(ed25519.PublicKey))
	}
	return a
}

// Relay is the advertised API URL of the node the agent holds its session
// with ("" when it holds none): what the provider's heartbeats report.
func (a *Agent) Relay() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.relay
}

func (a *Agent) setRelay(u string) {
	a.mu.Lock()
	a.relay = u
	a.mu.Unlock()
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
	backoff := minBackoff
	for i := 0; ; {
		node := a.o.Nodes[i%len(a.o.Nodes)]
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
	conn, relay, err := a.connect(ctx, node)
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
	a.setRelay(relay)
	a.log.Info("relay: connected", "node", node, "relay", relay)
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

// connect signs and sends the handshake; a node that refuses a signature
// made for another of its URLs or another chain says which it is, and the
// agent signs again once for those.
func (a *Agent) connect(ctx context.Context, node string) (net.Conn, string, error) {
	chain, self := a.o.ChainID, node
	for try := 0; ; try++ {
		t := time.Now().Unix()
		pub := a.o.Key.Public().(ed25519.PublicKey)
		hdr := http.Header{
			HeaderProvider:  {a.addr.String()},
			HeaderPubkey:    {hex.EncodeToString(pub)},
			HeaderTime:      {strconv.FormatInt(t, 10)},
			HeaderSignature: {hex.EncodeToString(ed25519.Sign(a.o.Key, AgentSignBytes(chain, self, t)))},
		}
		conn, resp, err := dialUpgrade(ctx, normURL(node)+AgentPath, ProtoAgent, hdr, DefaultHandshakeTimeout)
		if err == nil {
			relay := resp.Header.Get(HeaderRelay)
			if relay == "" {
				relay = node
			}
			return conn, relay, nil
		}
		var ue *UpgradeError
		if try == 0 && errors.As(err, &ue) && ue.Status == http.StatusForbidden && resp != nil {
			nSelf, nChain := resp.Header.Get(HeaderRelay), resp.Header.Get(HeaderChain)
			if (nSelf != "" && normURL(nSelf) != normURL(self)) || nChain != chain {
				self, chain = nSelf, nChain
				continue
			}
		}
		return nil, "", err
	}
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
	var h header
	dec := json.NewDecoder(strings.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil || h.Port == 0 || h.Port > 65535 {
		refuse(st, "bad stream header")
		return
	}
	dctx, cancel := context.WithTimeout(ctx, DefaultHandshakeTimeout)
	back, err := a.o.Dial(dctx, h.Service, h.Port)
	cancel()
	if err != nil {
		a.log.Debug("relay: dial refused", "service", h.Service, "port", h.Port, "err", err)
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
