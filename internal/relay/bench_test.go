package relay

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

// benchNet is a backend (a small JSON answer on 8000, an SSE stream on
// 8001), node A holding the provider's agent and node B forwarding to A.
type benchNet struct {
	backend, sse string
	a, b         *node
}

var benchSSEPayload = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"

func newBenchNet(b *testing.B) *benchNet {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	b.Cleanup(backend.Close)
	sse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for range 3 {
			io.WriteString(w, benchSSEPayload)
			w.(http.Flusher).Flush()
			time.Sleep(time.Millisecond)
		}
	}))
	b.Cleanup(sse.Close)
	d := newDir()
	a := startNode(b, d, nil)
	nb := startNode(b, d, func(o *HubOptions) { o.IsPeer = func(u string) bool { return u == a.url } })
	p := newProvider(1, map[uint64]string{8000: hostOf(backend.URL), 8001: hostOf(sse.URL)})
	d.providers[p.addr] = true
	s := service(1, a.url, p)
	s.Public = true
	s.Spec.Ports = append(s.Spec.Ports, service(0, "", nil...).Spec.Ports[0])
	s.Spec.Ports[len(s.Spec.Ports)-1].Port = 8001
	d.put(s)
	p.run(b, a.url)
	waitConnected(b, a.hub, p.addr)
	return &benchNet{backend: backend.URL, sse: sse.URL, a: a, b: nb}
}

// targets are the three ways to the same backend.
func (n *benchNet) targets(path string, port int) []struct{ name, url string } {
	direct := n.backend
	if port == 8001 {
		direct = n.sse
	}
	return []struct{ name, url string }{
		{"direct", direct + path},
		{"one-hub", fmt.Sprintf("%s/svc/1/%d%s", n.a.url, port, path)},
		{"two-hubs", fmt.Sprintf("%s/svc/1/%d%s", n.b.url, port, path)},
	}
}

// percentile of sorted durations, in milliseconds.
func percentile(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	i := int(float64(len(ds)-1) * p)
	return float64(ds[i]) / float64(time.Millisecond)
}

// BenchmarkLatency: one small GET at a time, on kept-alive connections,
// straight to the backend, through the node holding the agent, and
// through a second node that tunnels to it. It reports p50 and p99 and
// what the relay adds to the direct p50 of the same run.
func BenchmarkLatency(b *testing.B) {
	n := newBenchNet(b)
	var directP50 float64
	for _, tg := range n.targets("/v1/ping", 8000) {
		b.Run(tg.name, func(b *testing.B) {
			c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			defer c.CloseIdleConnections()
			get := func() {
				resp, err := c.Get(tg.url)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("%s: %d", tg.url, resp.StatusCode)
				}
			}
			get() // warm the pools
			var ds []time.Duration
			for b.Loop() {
				t := time.Now()
				get()
				ds = append(ds, time.Since(t))
			}
			slices.Sort(ds)
			p50 := percentile(ds, 0.5)
			b.ReportMetric(p50, "p50_ms")
			b.ReportMetric(percentile(ds, 0.99), "p99_ms")
			if tg.name == "direct" {
				directP50 = p50
			} else if directP50 > 0 {
				b.ReportMetric(p50-directP50, "added_p50_ms")
			}
		})
	}
}

// BenchmarkSSEFirstChunk: the time from sending a request to reading the
// first event of a stream, direct and through one and two nodes.
func BenchmarkSSEFirstChunk(b *testing.B) {
	n := newBenchNet(b)
	for _, tg := range n.targets("/v1/chat/completions", 8001) {
		b.Run(tg.name, func(b *testing.B) {
			c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			defer c.CloseIdleConnections()
			var ds []time.Duration
			for b.Loop() {
				t := time.Now()
				resp, err := c.Get(tg.url)
				if err != nil {
					b.Fatal(err)
				}
				line, err := bufio.NewReader(resp.Body).ReadString('\n')
				ds = append(ds, time.Since(t))
				if err != nil || line+"\n" != benchSSEPayload {
					b.Fatalf("first event %q, %v", line, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			slices.Sort(ds)
			b.ReportMetric(percentile(ds, 0.5), "p50_ms")
			b.ReportMetric(percentile(ds, 0.99), "p99_ms")
		})
	}
}

// BenchmarkThroughput: small requests from parallel clients (GOMAXPROCS×4
// goroutines) through one node, and straight to the backend for scale.
func BenchmarkThroughput(b *testing.B) {
	n := newBenchNet(b)
	for _, tg := range n.targets("/v1/ping", 8000)[:2] {
		b.Run(tg.name, func(b *testing.B) {
			tr := &http.Transport{MaxIdleConnsPerHost: 256}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr}
			b.SetParallelism(4)
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := c.Get(tg.url)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
		})
	}
}
