package daemon

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpunet/gpunet/internal/admission"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/openaigw"
)

// Admission (internal/admission, docs/bounds.md): the API's listener caps
// its connections in all and per client address, and keeps a quarter of
// them for trusted requests: the node's API token, a service's key (on
// /svc and /openai), the node's own host and its configured peers, and an
// address that holds a provider's verified relay session. Anonymous
// clients, however slow and however many, share the rest.

// apiReserve is how many of total connections anonymous requests never
// hold.
func apiReserve(total int) int { return max(total/4, 1) }

// apiLimits are the admission limits of a node whose open-file limit is
// nofile, trusting the addresses of trusted.
func apiLimits(nofile uint64, trusted *trustedAddrs) admission.Limits {
	total, perIP := apiConnLimits(nofile)
	return admission.Limits{Max: total, Reserve: apiReserve(total), PerAddr: perIP, TrustedAddr: trusted.has}
}

// trustedAddrs are the client addresses every request from which is
// trusted: the node's own host (127.0.0.1, ::1) and the hosts of its
// configured peer_apis (learned peers are not: anyone can run a node).
type trustedAddrs struct {
	peers atomic.Pointer[map[netip.Addr]bool]
}

func (t *trustedAddrs) has(a netip.Addr) bool {
	if a == netip.IPv6Loopback() || a == netip.AddrFrom4([4]byte{127, 0, 0, 1}) {
		return true
	}
	m := t.peers.Load()
	return m != nil && (*m)[a]
}

// resolvePeerTimeout bounds resolving one configured peer's host name.
const resolvePeerTimeout = 5 * time.Second

// trustPeers returns the trusted addresses of a node whose configured
// peers are peerAPIs: their IP literals at once, their host names as they
// resolve, in the background, once (a peer that moves is trusted again
// when the node restarts).
func trustPeers(ctx context.Context, peerAPIs []string, log *slog.Logger) *trustedAddrs {
	t := &trustedAddrs{}
	m := map[netip.Addr]bool{}
	var names []string
	for _, p := range peerAPIs {
		u, err := url.Parse(p)
		if err != nil || u.Hostname() == "" {
			continue
		}
		if a, err := netip.ParseAddr(u.Hostname()); err == nil {
			m[a.Unmap()] = true
		} else {
			names = append(names, u.Hostname())
		}
	}
	t.peers.Store(&m)
	if len(names) == 0 {
		return t
	}
	go func() {
		var mu sync.Mutex
		var wg sync.WaitGroup
		resolved := map[netip.Addr]bool{}
		for _, name := range names {
			wg.Go(func() {
				rctx, cancel := context.WithTimeout(ctx, resolvePeerTimeout)
				defer cancel()
				addrs, err := net.DefaultResolver.LookupNetIP(rctx, "ip", name)
				if err != nil {
					log.Warn("could not resolve a configured peer; its requests are not trusted", "peer", name, "err", err)
					return
				}
				mu.Lock()
				for _, a := range addrs {
					resolved[a.Unmap()] = true
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		for a := range m {
			resolved[a] = true
		}
		t.peers.Store(&resolved)
	}()
	return t
}

// admissionCollector exports an admission listener's counts, read at each
// scrape.
type admissionCollector struct {
	l                *admission.Listener
	conns            *prometheus.Desc
	refused, evicted *prometheus.Desc
}

func newAdmissionCollector(l *admission.Listener) *admissionCollector {
	return &admissionCollector{l: l,
		conns: prometheus.NewDesc("gpunet_api_connections", "The API's open connections: open (all), pending (not in a request), anonymous (holding an anonymous slot).", []string{"state"}, nil),
		refused: prometheus.NewDesc("gpunet_api_connections_refused_total",
			"Connections refused: per_address (past the per-address bound, 429), anonymous_full (an anonymous request when the anonymous slots were full, 503).", []string{"reason"}, nil),
		evicted: prometheus.NewDesc("gpunet_api_connections_evicted_total",
			"Connections closed to make room: pending (for a newcomer when all were open), anonymous (for an anonymous newcomer of a lighter address).", []string{"class"}, nil),
	}
}

func (c *admissionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.conns
	ch <- c.refused
	ch <- c.evicted
}

func (c *admissionCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.l.Stats()
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.Open), "open")
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.Pending), "pending")
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.Anonymous), "anonymous")
	ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(s.RefusedAddr), "per_address")
	ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(s.RefusedAnonymous), "anonymous_full")
	ch <- prometheus.MustNewConstMetric(c.evicted, prometheus.CounterValue, float64(s.EvictedPending), "pending")
	ch <- prometheus.MustNewConstMetric(c.evicted, prometheus.CounterValue, float64(s.EvictedAnonymous), "anonymous")
}

// gatewayDirectory is what the OpenAI gateway reads of the ledger: the
// services, and who may use them, rebuilt once a block.
type gatewayDirectory struct {
	serviceDirectory
	access *accessCache
}

func (d gatewayDirectory) Access() (*openaigw.Access, error) { return d.access.get() }

// accessCache is the gateway's Access at the latest height it was asked
// at: the gateway asks for every request, before it reads the body.
type accessCache struct {
	view func() (ledger.KV, func())

	mu     sync.Mutex
	height uint64
	acc    *openaigw.Access
}

func (c *accessCache) get() (*openaigw.Access, error) {
	kv, release := c.view()
	defer release()
	h := ledger.Height(kv)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.acc != nil && c.height == h {
		return c.acc, nil
	}
	acc := &openaigw.Access{Keys: map[ledger.Hash]struct{}{}}
	var err error
	ledger.ActiveServices(kv, func(id uint64) bool {
		var sv *ledger.Service
		var ok bool
		if sv, ok, err = ledger.GetService(kv, id); err != nil {
			return false
		}
		if ok && !sv.Done() && sv.Spec.OpenAI != nil {
			acc.Public = acc.Public || sv.Public
			for _, kh := range sv.KeyHashes {
				acc.Keys[kh] = struct{}{}
			}
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	c.height, c.acc = h, acc
	return acc, nil
}
