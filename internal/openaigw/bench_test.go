package openaigw

import (
	"bufio"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
)

// The gateway's own overhead: the same fake model server asked directly
// and through the gateway (validation, ranking, the dial through
// Options.Dial to loopback TCP, the relay of the answer). The relay's hops
// between nodes are benchmarked by package relay.
//
//	go test -run XXX -bench . -benchtime 2000x ./internal/openaigw/

// benchTargets returns the URLs of the model server's chat completions,
// directly and through a gateway.
func benchTargets(b *testing.B) (direct, gateway string) {
	b.Helper()
	p := provider(1)
	h := &harness{dir: &fakeDir{svcs: []*ledger.Service{service(1, "tinylm", true, 1, p)}}, backends: map[replicaKey]string{}}
	h.gw = New(Options{Directory: h.dir, Authorized: authorized, Dial: h.dial, Log: slog.New(slog.DiscardHandler)})
	b.Cleanup(h.gw.Close)
	model := httptest.NewServer(&fakeModel{Words: strings.Fields("a b c d e f g h")})
	b.Cleanup(model.Close)
	h.backends[replicaKey{1, p}] = model.Listener.Addr().String()
	gw := httptest.NewServer(h.gw)
	b.Cleanup(gw.Close)
	return model.URL + UpstreamPath, gw.URL + PathCompletions
}

var benchClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}

func benchPost(b *testing.B, url, body string) *http.Response {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := benchClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		b.Fatalf("status %d: %s", resp.StatusCode, msg)
	}
	return resp
}

// BenchmarkCompletion: one non-streamed completion after another (ns/op
// is the latency of one; req/s its inverse), and as many at once as
// GOMAXPROCS×4 clients send (req/s the throughput).
func BenchmarkCompletion(b *testing.B) {
	direct, gateway := benchTargets(b)
	for _, tc := range []struct{ name, url string }{{"direct", direct}, {"gateway", gateway}} {
		b.Run(tc.name, func(b *testing.B) {
			start := time.Now()
			for b.Loop() {
				resp := benchPost(b, tc.url, hello)
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
		})
		b.Run(tc.name+"-parallel", func(b *testing.B) {
			b.SetParallelism(4)
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp := benchPost(b, tc.url, hello)
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
		})
	}
}

// BenchmarkStreamFirstToken: a streamed completion of 8 tokens; µs/first
// is the time from sending the request to reading the first content
// chunk, ns/op the whole stream.
func BenchmarkStreamFirstToken(b *testing.B) {
	direct, gateway := benchTargets(b)
	body := `{"model":"tinylm","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"say hello"}]}`
	for _, tc := range []struct{ name, url string }{{"direct", direct}, {"gateway", gateway}} {
		b.Run(tc.name, func(b *testing.B) {
			var first time.Duration
			for b.Loop() {
				start := time.Now()
				resp := benchPost(b, tc.url, body)
				br := bufio.NewReader(resp.Body)
				seen := 0
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						break
					}
					if strings.HasPrefix(line, "data: ") {
						seen++
						if seen == 2 { // the role chunk, then the first content
							first += time.Since(start)
						}
					}
				}
				resp.Body.Close()
				if seen != 12 {
					b.Fatalf("%d events, want 12", seen)
				}
			}
			b.ReportMetric(float64(first.Microseconds())/float64(b.N), "µs/first")
		})
	}
}
