package clusternet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.zx2c4.com/wireguard/conn"
)

// Relay opens streams through the gang's relay (the nodes that providers
// behind NAT keep a session with, internal/relay) to other members, for
// the packets no direct UDP path carries.
type Relay interface {
	// Dial opens a stream to the member of rank. The Bind writes the
	// stream's header and frames (stream.go) and never reads from it; the
	// other member's agent hands the stream to its Net's ServeStream.
	Dial(ctx context.Context, rank int) (net.Conn, error)
}

// Bounds of the relay path.
const (
	// sendQueue bounds the packets queued for one peer's relay stream;
	// past it packets are dropped, as a full UDP socket buffer drops
	// them (WireGuard and TCP above it retransmit).
	sendQueue = 1024
	// recvQueue bounds the packets read from all relay streams and not
	// yet taken by WireGuard; a full queue holds the streams' readers
	// back (flow control reaches the senders through the streams).
	recvQueue = 1024
	// directTimeout: a peer heard from directly within this long is sent
	// to directly only; otherwise the relay carries copies too.
	directTimeout = 10 * time.Second
	// streamHandshake bounds reading a relay stream's header.
	streamHandshake = 10 * time.Second
	// writeTimeout bounds one write to a relay stream.
	writeTimeout = 10 * time.Second
	// smallPacket sizes the pooled receive buffers (a WireGuard message
	// for the default MTU fits).
	smallPacket = 2048
)

// bind is the conn.Bind of a member's WireGuard device: UDP straight to a
// peer's Endpoint when it has one and answers, and the relay otherwise
// (and while a direct path is unproven). Every peer has one endpoint
// object (rank:N) whatever path its packets take, so that WireGuard's
// roaming never flips a peer between paths.
type bind struct {
	self   int
	direct conn.Bind
	hostNS string // where the UDP sockets are made; "": this process's
	relay  Relay
	log    *slog.Logger

	eps    []*peerEndpoint
	byAddr map[netip.AddrPort]int

	recv chan relayPacket
	pool sync.Pool

	mu       sync.Mutex
	closed   chan struct{} // of the current Open; nil while not open
	senders  map[int]*sender
	accepted map[int]net.Conn
	dialed   map[net.Conn]struct{}
	stopped  bool
	stop     chan struct{} // closed by shutdown
	wg       sync.WaitGroup

	// Counters, for tests and metrics.
	relaySent, relayRecv, relayDropped, directRecv atomic.Uint64
}

type relayPacket struct {
	ep   *peerEndpoint
	data []byte
	arr  *[smallPacket]byte // data's array when it came from the pool
}

func newBind(c Config, hostNS string, relay Relay, log *slog.Logger) (*bind, error) {
	b := &bind{
		self:     c.Rank,
		direct:   conn.NewStdNetBind(),
		hostNS:   hostNS,
		relay:    relay,
		log:      log,
		byAddr:   map[netip.AddrPort]int{},
		recv:     make(chan relayPacket, recvQueue),
		senders:  map[int]*sender{},
		accepted: map[int]net.Conn{},
		dialed:   map[net.Conn]struct{}{},
		stop:     make(chan struct{}),
	}
	b.pool.New = func() any { return new([smallPacket]byte) }
	for i, m := range c.Members {
		pe := &peerEndpoint{rank: i, b: b}
		if ep := m.Endpoint; ep.IsValid() {
			ep = netip.AddrPortFrom(ep.Addr().Unmap(), ep.Port())
			std, err := b.direct.ParseEndpoint(ep.String())
			if err != nil {
				return nil, fmt.Errorf("clusternet: member %d endpoint %s: %w", i, ep, err)
			}
			pe.direct, pe.std = ep, std
			b.byAddr[ep] = i
		}
		b.eps = append(b.eps, pe)
	}
	return b, nil
}

// Open opens the direct UDP sockets (in hostNS) and returns their receive
// functions and the relay's.
func (b *bind) Open(port uint16) ([]conn.ReceiveFunc, uint16, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed != nil {
		return nil, 0, conn.ErrBindAlreadyOpen
	}
	var fns []conn.ReceiveFunc
	var actual uint16
	err := inNetns(b.hostNS, func() (err error) {
		fns, actual, err = b.direct.Open(port)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	closed := make(chan struct{})
	b.closed = closed
	out := make([]conn.ReceiveFunc, 0, len(fns)+1)
	for _, fn := range fns {
		out = append(out, b.wrapDirect(fn))
	}
	out = append(out, func(packets [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
		return b.receiveRelay(closed, packets, sizes, eps)
	})
	return out, actual, nil
}

// wrapDirect tags packets from a member's known endpoint with that
// member's endpoint and notes that the direct path works.
func (b *bind) wrapDirect(fn conn.ReceiveFunc) conn.ReceiveFunc {
	return func(packets [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
		n, err := fn(packets, sizes, eps)
		now := time.Now().UnixNano()
		for i := range n {
			std, ok := eps[i].(*conn.StdNetEndpoint)
			if !ok {
				continue
			}
			ap := netip.AddrPortFrom(std.Addr().Unmap(), std.Port())
			if r, ok := b.byAddr[ap]; ok {
				b.eps[r].lastDirect.Store(now)
				eps[i] = b.eps[r]
				b.directRecv.Add(1)
			}
		}
		return n, err
	}
}

// receiveRelay hands WireGuard the packets the relay streams brought.
func (b *bind) receiveRelay(closed chan struct{}, packets [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
	var p relayPacket
	select {
	case p = <-b.recv:
	case <-closed:
		return 0, net.ErrClosed
	}
	n := 0
	for {
		sizes[n] = copy(packets[n], p.data)
		eps[n] = p.ep
		b.put(p)
		n++
		if n == len(packets) {
			return n, nil
		}
		select {
		case p = <-b.recv:
		default:
			return n, nil
		}
	}
}

// Close closes the direct sockets and ends the receive functions of the
// last Open. The relay streams stay: they belong to the Net.
func (b *bind) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed == nil {
		return nil
	}
	close(b.closed)
	b.closed = nil
	return b.direct.Close()
}

func (b *bind) SetMark(mark uint32) error { return b.direct.SetMark(mark) }
func (b *bind) BatchSize() int            { return b.direct.BatchSize() }

// ParseEndpoint reads "rank:N" (the member of rank N, by whichever path
// works) or an address and port (direct UDP only).
func (b *bind) ParseEndpoint(s string) (conn.Endpoint, error) {
	if r, ok := strings.CutPrefix(s, "rank:"); ok {
		i, err := strconv.Atoi(r)
		if err != nil || i < 0 || i >= len(b.eps) {
			return nil, fmt.Errorf("clusternet: endpoint %q: no such rank", s)
		}
		return b.eps[i], nil
	}
	return b.direct.ParseEndpoint(s)
}

// Send sends bufs to ep: directly when the peer has an endpoint, and
// through the relay when it has none, when the direct send fails, or when
// nothing came from it directly within directTimeout.
func (b *bind) Send(bufs [][]byte, ep conn.Endpoint) error {
	pe, ok := ep.(*peerEndpoint)
	if !ok {
		return b.direct.Send(bufs, ep)
	}
	var err error
	if pe.std != nil {
		err = b.direct.Send(bufs, pe.std)
	}
	if b.relay == nil || pe.rank == b.self {
		return err
	}
	if pe.std == nil || err != nil || time.Since(time.Unix(0, pe.lastDirect.Load())) > directTimeout {
		b.sender(pe.rank).enqueue(bufs)
		return nil
	}
	return nil
}

// sender returns the relay sender to rank, starting it on first use.
func (b *bind) sender(rank int) *sender {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.senders[rank]
	if s == nil {
		s = &sender{b: b, rank: rank, q: make(chan relayPacket, sendQueue)}
		b.senders[rank] = s
		if !b.stopped {
			b.wg.Add(1)
			go s.run()
		}
	}
	return s
}

// serveStream reads a relay stream from another member until it ends or
// the Net closes. A member has one stream in at a time: a new one from
// the same rank replaces the old. from, when not -1, is the rank the
// relay vouches for: a header that claims another is refused.
func (b *bind) serveStream(c net.Conn, from int) error {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(streamHandshake))
	r := bufio.NewReaderSize(c, 64<<10)
	rank, err := readStreamHeader(r, len(b.eps))
	if err != nil {
		return err
	}
	if rank == b.self {
		return fmt.Errorf("clusternet: relay stream claims to come from this member's own rank %d", rank)
	}
	if from >= 0 && rank != from {
		return fmt.Errorf("clusternet: relay stream claims to come from rank %d; the relay says it comes from rank %d", rank, from)
	}
	c.SetReadDeadline(time.Time{})
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return net.ErrClosed
	}
	if old := b.accepted[rank]; old != nil {
		old.Close()
	}
	b.accepted[rank] = c
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		if b.accepted[rank] == c {
			delete(b.accepted, rank)
		}
		b.mu.Unlock()
	}()
	ep := b.eps[rank]
	big := make([]byte, MaxPacket)
	for {
		n, err := readFrame(r, big)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		p := relayPacket{ep: ep}
		if n <= smallPacket {
			p.arr = b.pool.Get().(*[smallPacket]byte)
			p.data = p.arr[:n]
		} else {
			p.data = make([]byte, n)
		}
		copy(p.data, big[:n])
		select {
		case b.recv <- p:
			b.relayRecv.Add(1)
		case <-b.stop:
			return nil
		}
	}
}

// put returns p's buffer to the pool when it came from there.
func (b *bind) put(p relayPacket) {
	if p.arr != nil {
		b.pool.Put(p.arr)
	}
}

// track records a dialled stream so that shutdown closes it; false when
// the bind is shut down already.
func (b *bind) track(c net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return false
	}
	b.dialed[c] = struct{}{}
	return true
}

func (b *bind) untrack(c net.Conn) {
	b.mu.Lock()
	delete(b.dialed, c)
	b.mu.Unlock()
}

// shutdown ends the relay senders and streams.
func (b *bind) shutdown() {
	b.mu.Lock()
	if !b.stopped {
		b.stopped = true
		close(b.stop)
		for _, c := range b.accepted {
			c.Close()
		}
		for c := range b.dialed {
			c.Close()
		}
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// sender carries packets to one peer over a relay stream it dials and
// redials, with a bounded queue.
type sender struct {
	b    *bind
	rank int
	q    chan relayPacket
}

// enqueue copies bufs into the queue (pooled buffers: WireGuard reuses
// its own as soon as Send returns), dropping what does not fit.
func (s *sender) enqueue(bufs [][]byte) {
	for _, p := range bufs {
		if len(p) == 0 || len(p) > MaxPacket {
			continue
		}
		var rp relayPacket
		if len(p) <= smallPacket {
			rp.arr = s.b.pool.Get().(*[smallPacket]byte)
			rp.data = rp.arr[:len(p)]
			copy(rp.data, p)
		} else {
			rp.data = append([]byte(nil), p...)
		}
		select {
		case s.q <- rp:
		default:
			s.b.put(rp)
			s.b.relayDropped.Add(1)
		}
	}
}

func (s *sender) run() {
	defer s.b.wg.Done()
	backoff := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), streamHandshake)
		go func() {
			select {
			case <-s.b.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		c, err := s.b.relay.Dial(ctx, s.rank)
		cancel()
		if err == nil && s.b.track(c) {
			backoff = 100 * time.Millisecond
			err = s.pump(c)
			s.b.untrack(c)
		}
		if c != nil {
			c.Close()
		}
		select {
		case <-s.b.stop:
			return
		default:
		}
		s.b.log.Debug("clusternet: relay stream ended", "to", s.rank, "err", err)
		// What queued meanwhile stays queued (bounded): the first
		// handshake of a gang usually waits for the others' agents to
		// be ready, and is still good when the next dial works.
		select {
		case <-s.b.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// pump writes the stream's header and then the queued packets, flushing
// when the queue runs empty.
func (s *sender) pump(c net.Conn) error {
	w := bufio.NewWriterSize(c, 64<<10)
	c.SetWriteDeadline(time.Now().Add(writeTimeout))
	if err := writeStreamHeader(w, s.b.self); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for {
		var p relayPacket
		select {
		case p = <-s.q:
		case <-s.b.stop:
			return net.ErrClosed
		}
		c.SetWriteDeadline(time.Now().Add(writeTimeout))
		for {
			err := writeFrame(w, p.data)
			s.b.put(p)
			if err != nil {
				return err
			}
			s.b.relaySent.Add(1)
			select {
			case p = <-s.q:
				continue
			default:
			}
			break
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
}

// peerEndpoint is a member as WireGuard sees it: one endpoint whatever
// path carries its packets.
type peerEndpoint struct {
	rank       int
	b          *bind
	direct     netip.AddrPort // invalid: relay only
	std        conn.Endpoint  // direct's endpoint in the UDP bind
	lastDirect atomic.Int64   // unix ns of the last packet received directly
}

func (e *peerEndpoint) ClearSrc()           {}
func (e *peerEndpoint) SrcToString() string { return "" }
func (e *peerEndpoint) SrcIP() netip.Addr   { return netip.Addr{} }
func (e *peerEndpoint) DstIP() netip.Addr   { return e.direct.Addr() }

func (e *peerEndpoint) DstToString() string {
	if e.direct.IsValid() {
		return e.direct.String()
	}
	return "rank:" + strconv.Itoa(e.rank)
}

func (e *peerEndpoint) DstToBytes() []byte {
	if e.direct.IsValid() {
		b, _ := e.direct.MarshalBinary()
		return b
	}
	return []byte("rank:" + strconv.Itoa(e.rank))
}
