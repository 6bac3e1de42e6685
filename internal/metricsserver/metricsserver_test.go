package metricsserver

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestServe: the registry's metrics, the runtime's among them, are served
// at the returned URL until the context ends; a busy address is an error.
func TestServe(t *testing.T) {
	reg := NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "metricsserver_test_total", Help: "A test counter."})
	reg.MustRegister(c)
	c.Add(3)
	ctx, cancel := context.WithCancel(t.Context())
	url, err := Serve(ctx, "127.0.0.1:0", reg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"metricsserver_test_total 3", "go_goroutines", "process_"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("GET %s lacks %q", url, want)
		}
	}
	busy := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/metrics")
	if _, err := Serve(t.Context(), busy, reg); err == nil {
		t.Errorf("Serve on %s, already in use, gave no error", busy)
	}
	cancel()
	for range 200 {
		if _, err = http.Get(url); err != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("%s still answers after its context ended", url)
}
