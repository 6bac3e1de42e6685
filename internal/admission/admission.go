// Package admission bounds the connections a node's HTTP API holds, so that
// anonymous clients, however slow and however many, cannot take the
// connections that providers and key holders need.
//
// A Listener caps the connections open at once (Max) and from one client
// address (PerAddr), and sorts them by what their current request proved:
//
//   - pending: accepted, or idle between requests, and not yet past its
//     request's headers. Nothing is known of it yet, so it holds no pool's
//     slot, and it is the first to go: when Max are open, a new connection
//     closes a pending one, taken from the address with the most pending
//     connections (the oldest of them). An honest client has one pending
//     connection for the moment its headers take; to close it, an attacker
//     would need at least as many addresses as there are pending
//     connections.
//   - anonymous: its request's headers carried no credential the server
//     checked. At most Max-Reserve connections hold an anonymous slot at
//     once. When they all do, a new anonymous request takes the slot of the
//     oldest anonymous connection of the address holding the most, if that
//     address holds at least two more than the newcomer's; otherwise it is
//     refused (the server answers 503 and closes the connection). So
//     anonymous clients share their part by address, and however many
//     connections they open they never hold the Reserve.
//   - trusted: its request carried a credential the server checked on its
//     headers alone (see Admit), or came from an address the node trusts
//     (Limits.TrustedAddr) or that holds a connection proved by a
//     provider's signature (VouchOnHijack). Trusted requests may take every
//     connection.
//
// A trusted client thus always finds a connection while fewer than Reserve
// trusted requests are in flight: anonymous ones hold at most Max-Reserve,
// and the rest are pending and give way. The class is decided after the
// headers and before any byte of the body, which is what the API's route
// deadlines then bound (internal/apiserver).
package admission

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// Class is what a request's headers prove about its client.
type Class uint8

const (
	// Anonymous requests prove nothing: they share the connections
	// outside the reserve.
	Anonymous Class = iota
	// Trusted requests may take any connection, the reserve included.
	Trusted
)

// Limits configure a Listener.
type Limits struct {
	// Max bounds the connections open at once. When Max are open and none
	// is pending, Accept waits: further clients queue in the kernel's
	// backlog and hold no descriptor of this process.
	Max int
	// Reserve is how many of the Max connections anonymous requests never
	// hold (0 < Reserve < Max).
	Reserve int
	// PerAddr bounds the connections from one client address (an IPv4
	// address, or an IPv6 /64, which one host usually holds whole); past
	// it a connection is answered 429 and closed. 0: no bound.
	PerAddr int
	// TrustedAddr, when set, reports whether every request from addr is
	// trusted (the node's own host, its configured peers). Such an
	// address has no per-address bound.
	TrustedAddr func(addr netip.Addr) bool
}

// Stats are a Listener's counts.
type Stats struct {
	Open, Peak int // connections open now, and the most ever open at once
	Pending    int // open and not in a request
	Anonymous  int // holding an anonymous slot
	// RefusedAddr counts connections refused for their address's bound;
	// EvictedPending, pending connections closed to make room;
	// EvictedAnonymous, anonymous connections closed for a newcomer of a
	// lighter address; RefusedAnonymous, requests refused because the
	// anonymous slots were full.
	RefusedAddr, EvictedPending, EvictedAnonymous, RefusedAnonymous uint64
}

// connState is where a connection stands.
type connState uint8

const (
	statePending  connState = iota
	stateActive             // in a request
	stateHijacked           // taken over by a handler; keeps its class
	stateReleased           // closed or evicted: counted nowhere
)

// A Listener is a net.Listener that admits connections under Limits. An
// http.Server serving it must set ConnState to the Listener's ConnState
// and ConnContext to ConnContext, and call Admit for each request once
// its headers are read.
type Listener struct {
	net.Listener
	lim      Limits
	refusing chan struct{} // bounds the goroutines answering refused connections

	mu      sync.Mutex
	cond    *sync.Cond
	closed  bool
	seq     uint64 // orders connections by when they became pending or anonymous
	open    int
	pending map[*conn]struct{}
	anon    map[*conn]struct{}
	addrs   map[netip.Prefix]*addrCount
	stats   Stats
}

// addrCount is what one client address holds.
type addrCount struct {
	open, pending, anon int
	vouched             int // open connections proved by a provider's signature
}

// NewListener returns l admitting connections under lim. It panics if lim
// is not sound (Max < 2, or Reserve not between 1 and Max-1).
func NewListener(l net.Listener, lim Limits) *Listener {
	if lim.Max < 2 || lim.Reserve < 1 || lim.Reserve >= lim.Max || lim.PerAddr < 0 {
		panic(fmt.Sprintf("admission: limits %+v: want Max ≥ 2 and 0 < Reserve < Max", lim))
	}
	al := &Listener{Listener: l, lim: lim, refusing: make(chan struct{}, 32),
		pending: map[*conn]struct{}{}, anon: map[*conn]struct{}{}, addrs: map[netip.Prefix]*addrCount{}}
	al.cond = sync.NewCond(&al.mu)
	return al
}

// Stats returns the listener's counts now.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.Open, s.Pending, s.Anonymous = l.open, len(l.pending), len(l.anon)
	return s
}

// Accept waits for a connection there is room for. When Max are open it
// closes a pending one to make room, or, when none is pending, waits for
// one to close before it takes the next from the kernel.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		l.mu.Lock()
		for !l.closed && l.open >= l.lim.Max && len(l.pending) == 0 {
			l.cond.Wait()
		}
		closed := l.closed
		l.mu.Unlock()
		if closed {
			return nil, net.ErrClosed
		}
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteAddr(nc)
		c := &conn{Conn: nc, l: l, ip: ip, addr: addrKey(ip), trusted: ip.IsValid() && l.lim.TrustedAddr != nil && l.lim.TrustedAddr(ip)}

		l.mu.Lock()
		a := l.addr(c.addr)
		if !c.trusted && l.lim.PerAddr > 0 && a.open >= l.lim.PerAddr {
			l.stats.RefusedAddr++
			l.forget(c.addr, a)
			l.mu.Unlock()
			l.refuse(nc)
			continue
		}
		a.open++ // held while waiting, so that the count is not dropped
		var evicted []*conn
		for !l.closed && l.open >= l.lim.Max {
			if v := l.pendingVictim(); v != nil {
				l.release(v)
				l.stats.EvictedPending++
				evicted = append(evicted, v)
				continue
			}
			l.cond.Wait() // every pending one became active meanwhile
		}
		if l.closed {
			a.open--
			l.forget(c.addr, a)
			l.mu.Unlock()
			nc.Close()
			closeAll(evicted)
			return nil, net.ErrClosed
		}
		l.open++
		l.stats.Peak = max(l.stats.Peak, l.open)
		l.setPending(c, a)
		l.mu.Unlock()
		closeAll(evicted)
		return c, nil
	}
}

func closeAll(cs []*conn) {
	for _, c := range cs {
		c.Conn.Close()
	}
}

// Close stops accepting; the connections open stay open.
func (l *Listener) Close() error {
	l.mu.Lock()
	l.closed = true
	l.cond.Broadcast()
	l.mu.Unlock()
	return l.Listener.Close()
}

// ConnState is the http.Server's ConnState hook: it follows each
// connection back to pending when it goes idle, and marks one taken over
// by its handler (which keeps the class its request was admitted with).
func (l *Listener) ConnState(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*conn)
	if !ok || c.l != l {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.state == stateReleased {
		return
	}
	a := l.addrs[c.addr]
	switch st {
	case http.StateIdle:
		l.dropAnon(c, a)
		c.vouchOnHijack = false
		if c.state != statePending {
			l.setPending(c, a)
		}
	case http.StateHijacked:
		if c.state == statePending {
			l.leavePending(c, a)
		}
		c.state = stateHijacked
		if c.vouchOnHijack && !c.vouched {
			c.vouched = true
			a.vouched++
			l.dropAnon(c, a) // proved: it is trusted now
		}
	}
}

// ConnContext is the http.Server's ConnContext hook: it lets Admit and
// VouchOnHijack find a request's connection.
func ConnContext(ctx context.Context, nc net.Conn) context.Context {
	if c, ok := nc.(*conn); ok {
		return context.WithValue(ctx, connKey{}, c)
	}
	return ctx
}

type connKey struct{}

func connOf(r *http.Request) *conn {
	c, _ := r.Context().Value(connKey{}).(*conn)
	return c
}

// Admit admits r, whose headers have been read and none of whose body
// has, as class (Trusted when its address is trusted or vouched for,
// whatever class says). It reports false when r must be refused: the
// anonymous slots are full and r's address holds as many as any other.
// The caller then answers at once and closes the connection. A request
// not served through a Listener is always admitted.
func Admit(r *http.Request, class Class) bool {
	c := connOf(r)
	if c == nil {
		return true
	}
	return c.l.admit(c, class)
}

// VouchOnHijack says that r's handler takes its connection over only
// after it has verified a registered provider's signature (the relay
// agent's session): if it does, the connection and every request from its
// address are trusted for as long as the connection stays open.
func VouchOnHijack(r *http.Request) {
	c := connOf(r)
	if c == nil {
		return
	}
	c.l.mu.Lock()
	c.vouchOnHijack = true
	c.l.mu.Unlock()
}

func (l *Listener) admit(c *conn, class Class) bool {
	l.mu.Lock()
	if c.state == stateReleased {
		l.mu.Unlock()
		return false // evicted while its headers were read
	}
	a := l.addrs[c.addr]
	if c.state == statePending {
		l.leavePending(c, a)
	}
	c.state = stateActive
	if class == Trusted || c.trusted || a.vouched > 0 {
		l.mu.Unlock()
		return true
	}
	var victim *conn
	if len(l.anon) >= l.lim.Max-l.lim.Reserve {
		victim = l.anonVictim(a.anon)
		if victim == nil {
			l.stats.RefusedAnonymous++
			l.mu.Unlock()
			return false
		}
		l.release(victim)
		l.stats.EvictedAnonymous++
	}
	l.seq++
	c.since = l.seq
	l.anon[c] = struct{}{}
	a.anon++
	l.mu.Unlock()
	if victim != nil {
		victim.Conn.Close()
	}
	return true
}

// pendingVictim is the pending connection to close for a newcomer: of the
// address with the most pending connections, the oldest; connections from
// trusted addresses last.
func (l *Listener) pendingVictim() *conn {
	var best *conn
	var bestN int
	for c := range l.pending {
		n := l.addrs[c.addr].pending
		switch {
		case best == nil,
			best.trusted && !c.trusted,
			best.trusted == c.trusted && (n > bestN || n == bestN && c.since < best.since):
			best, bestN = c, n
		}
	}
	return best
}

// anonVictim is the anonymous connection a newcomer whose address holds
// mine slots may take the slot of: the oldest of the address holding the
// most, if that is at least mine+2; nil otherwise.
func (l *Listener) anonVictim(mine int) *conn {
	var best *conn
	var bestN int
	for c := range l.anon {
		n := l.addrs[c.addr].anon
		if best == nil || n > bestN || n == bestN && c.since < best.since {
			best, bestN = c, n
		}
	}
	if best == nil || bestN < mine+2 {
		return nil
	}
	return best
}

// addr returns the count of key, creating it. Call with l.mu held.
func (l *Listener) addr(key netip.Prefix) *addrCount {
	a := l.addrs[key]
	if a == nil {
		a = &addrCount{}
		l.addrs[key] = a
	}
	return a
}

// forget drops a's count once it holds nothing.
func (l *Listener) forget(key netip.Prefix, a *addrCount) {
	if a.open == 0 && a.pending == 0 && a.anon == 0 && a.vouched == 0 {
		delete(l.addrs, key)
	}
}

func (l *Listener) setPending(c *conn, a *addrCount) {
	l.seq++
	c.state, c.since = statePending, l.seq
	l.pending[c] = struct{}{}
	a.pending++
}

func (l *Listener) leavePending(c *conn, a *addrCount) {
	delete(l.pending, c)
	a.pending--
}

func (l *Listener) dropAnon(c *conn, a *addrCount) {
	if _, ok := l.anon[c]; ok {
		delete(l.anon, c)
		a.anon--
	}
}

// release takes c out of every count; the caller closes it.
func (l *Listener) release(c *conn) {
	if c.state == stateReleased {
		return
	}
	a := l.addrs[c.addr]
	if c.state == statePending {
		l.leavePending(c, a)
	}
	l.dropAnon(c, a)
	if c.vouched {
		a.vouched--
	}
	a.open--
	l.forget(c.addr, a)
	c.state = stateReleased
	l.open--
	l.cond.Broadcast()
}

// refuse answers a connection over its address's bound with a 429 naming
// the limit, in the background, and closes it. When too many refusals are
// already being answered it just closes.
func (l *Listener) refuse(c net.Conn) {
	select {
	case l.refusing <- struct{}{}:
	default:
		c.Close()
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		defer c.Close()
		body := fmt.Sprintf(`{"code":"too_many_requests","message":"this address has %d connections open to the node's API, its limit per client address; close some or retry later"}`+"\n", l.lim.PerAddr)
		c.SetWriteDeadline(time.Now().Add(time.Second))
		fmt.Fprintf(c, "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nContent-Length: %d\r\nRetry-After: 5\r\nConnection: close\r\n\r\n%s", len(body), body)
		// Give the client a moment to read the answer before the close
		// resets the connection over its unread request.
		if tc, ok := c.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	}()
}

// conn is an admitted connection. Its fields below Conn are guarded by
// l.mu.
type conn struct {
	net.Conn
	l       *Listener
	ip      netip.Addr
	addr    netip.Prefix
	trusted bool // from a trusted address

	state         connState
	since         uint64
	vouchOnHijack bool
	vouched       bool
}

// Close closes the connection and frees its place.
func (c *conn) Close() error {
	c.l.mu.Lock()
	c.l.release(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// CloseWrite half-closes a TCP connection, as net/http does before it
// closes one whose client may still be sending (so the answer is not lost
// to a reset).
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// remoteAddr is c's peer address, unmapped and without zone; the zero
// Addr when it is not an IP address.
func remoteAddr(c net.Conn) netip.Addr {
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap().WithZone("")
}

// addrKey is what a client address counts against: the address, or its
// /64 for IPv6.
func addrKey(ip netip.Addr) netip.Prefix {
	if !ip.IsValid() {
		return netip.Prefix{}
	}
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p
	}
	return netip.PrefixFrom(ip, 32)
}
