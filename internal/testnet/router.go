package testnet

import (
	"io"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// The router is a userspace netem: it reads the IP packets every host
// sends into its TUN interface and writes each into the TUN interface of
// the host whose address is the packet's destination, after the link's
// delay plus a random jitter. Each ordered pair of hosts is a link with its
// own bounded FIFO queue: a packet never departs before the one ahead of it
// on that link (so jitter delays, but never reorders, as on a real wire),
// and a packet arriving at a full queue is dropped and counted.

// port is one host's end of the router: its TUN interface.
type port struct {
	addr netip.Addr
	tun  io.ReadWriteCloser
	// direct ports' links carry packets without delay (a client next to
	// its node).
	direct bool
}

// packet is one IP packet in a link's queue.
type packet struct {
	data []byte
	due  time.Time // when it may depart: arrival + delay + jitter
}

// link carries packets from one host to another.
type link struct {
	q   chan packet
	dst *port
}

// Stats count what the router did since it started.
type Stats struct {
	// Forwarded packets were written to their destination's interface.
	Forwarded int64 `json:"forwarded"`
	// Dropped packets found their link's queue full.
	Dropped int64 `json:"dropped"`
	// Unroutable packets were not IPv4 or had no host at their
	// destination address.
	Unroutable int64 `json:"unroutable"`
}

type router struct {
	delay, jitter time.Duration
	queueLen      int

	mu     sync.RWMutex
	ports  map[netip.Addr]*port
	links  map[[2]netip.Addr]*link
	closed bool

	wg                             sync.WaitGroup
	done                           chan struct{}
	forwarded, dropped, unroutable atomic.Int64
	rngMu                          sync.Mutex
	rng                            *rand.Rand
}

func newRouter(delay, jitter time.Duration, queueLen int) *router {
	return &router{
		delay: delay, jitter: jitter, queueLen: queueLen,
		ports: map[netip.Addr]*port{}, links: map[[2]netip.Addr]*link{},
		done: make(chan struct{}),
		rng:  rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}
}

// attach starts forwarding what the host at addr sends through tun; with
// direct, its packets and those to it are not delayed.
func (r *router) attach(addr netip.Addr, tun io.ReadWriteCloser, direct bool) {
	p := &port{addr: addr, tun: tun, direct: direct}
	r.mu.Lock()
	r.ports[addr] = p
	r.mu.Unlock()
	r.wg.Go(func() { r.read(p) })
}

// read forwards the packets p's host sends until its interface is closed.
func (r *router) read(p *port) {
	buf := make([]byte, 65536)
	for {
		n, err := p.tun.Read(buf)
		if err != nil {
			return
		}
		dst, ok := ipv4Dst(buf[:n])
		if !ok {
			r.unroutable.Add(1)
			continue
		}
		l := r.link(p.addr, dst)
		if l == nil {
			r.unroutable.Add(1)
			continue
		}
		due := time.Now()
		if !p.direct && !l.dst.direct {
			due = due.Add(r.sampleDelay())
		}
		pkt := packet{data: append([]byte(nil), buf[:n]...), due: due}
		select {
		case l.q <- pkt:
		default:
			r.dropped.Add(1)
		}
	}
}

// sampleDelay returns delay plus a jitter uniform in [-jitter, +jitter],
// never below zero.
func (r *router) sampleDelay() time.Duration {
	d := r.delay
	if r.jitter > 0 {
		r.rngMu.Lock()
		d += time.Duration(r.rng.Int64N(int64(2*r.jitter)+1)) - r.jitter
		r.rngMu.Unlock()
	}
	return max(d, 0)
}

// link returns the link from src to dst, starting it on first use; nil
// when no host has address dst.
func (r *router) link(src, dst netip.Addr) *link {
	key := [2]netip.Addr{src, dst}
	r.mu.RLock()
	l, ok := r.links[key]
	r.mu.RUnlock()
	if ok {
		return l
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if l, ok := r.links[key]; ok {
		return l
	}
	d, ok := r.ports[dst]
	if !ok || r.closed {
		return nil
	}
	l = &link{q: make(chan packet, r.queueLen), dst: d}
	r.links[key] = l
	r.wg.Go(func() { r.carry(l) })
	return l
}

// carry delivers a link's packets in order, each at its due time or, if
// the packet ahead departed later than that, right after it.
func (r *router) carry(l *link) {
	t := time.NewTimer(0)
	<-t.C
	for {
		var p packet
		select {
		case p = <-l.q:
		case <-r.done:
			return
		}
		if wait := time.Until(p.due); wait > 0 {
			t.Reset(wait)
			select {
			case <-t.C:
			case <-r.done:
				return
			}
		}
		if _, err := l.dst.tun.Write(p.data); err != nil {
			// The destination is going away (or refused the packet,
			// as a full interface queue would): a lost packet.
			r.dropped.Add(1)
			continue
		}
		r.forwarded.Add(1)
	}
}

// stats returns the counters.
func (r *router) stats() Stats {
	return Stats{Forwarded: r.forwarded.Load(), Dropped: r.dropped.Load(), Unroutable: r.unroutable.Load()}
}

// close stops the router and closes every interface.
func (r *router) close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	close(r.done)
	for _, p := range r.ports {
		p.tun.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// ipv4Dst returns the destination of an IPv4 packet.
func ipv4Dst(b []byte) (netip.Addr, bool) {
	if len(b) < 20 || b[0]>>4 != 4 {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4([4]byte(b[16:20])), true
}
