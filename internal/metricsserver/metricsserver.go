// Package metricsserver serves a Prometheus registry at /metrics on an
// address of its own, for a process that has no API to mount it on
// (`gpunet provider start --metrics`; a node mounts its metrics on its
// API instead).
package metricsserver

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a registry holding the Go runtime's and the
// process's collectors, for the caller to add its own to.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Serve listens on addr (host:port) and serves reg at GET /metrics until
// ctx ends. It returns once the listener is bound, with the metrics' URL;
// an error is the listener's.
func Serve(ctx context.Context, addr string, reg prometheus.Gatherer) (string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	return "http://" + l.Addr().String() + "/metrics", nil
}
