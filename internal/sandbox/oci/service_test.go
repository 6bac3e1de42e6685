package oci_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/sandbox"
)

// startService starts the jobprog image with args as a service.
func startService(t *testing.T, args ...string) (sandbox.ServiceHandle, *syncBuffer) {
	t.Helper()
	ex, ref := setup(t)
	if ex.Capabilities().Rootless {
		t.Skip("services need a root agent (dialling into the container's network namespace)")
	}
	scratch := filepath.Join(t.TempDir(), "scratch")
	if err := os.Mkdir(scratch, 0o700); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{b: new(bytes.Buffer)}
	h, err := ex.StartService(t.Context(), &sandbox.Service{
		ID: t.Name(), Image: ref, Args: args, WorkDir: scratch,
		Limits: sandbox.Limits{MemoryBytes: 128 << 20, CPU: 0.5, DiskBytes: 64 << 20},
	}, logs)
	if err != nil {
		t.Fatalf("StartService: %v\nlogs:\n%s", err, logs.String())
	}
	t.Cleanup(func() { h.Stop() })
	return h, logs
}

// TestServiceDial: a service's HTTP server, listening on its own
// loopback, answers through Dial from the host (into its network
// namespace), is not reachable on the host's loopback, and a port nothing
// listens on is refused; Stop kills it.
func TestServiceDial(t *testing.T) {
	h, logs := startService(t, "serve", "127.0.0.1:18080")
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return h.Dial(ctx, 18080) },
	}}
	var body string
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := client.Get("http://service/hi")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET through Dial: %v\nlogs:\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got, want := body, "hello from a service /hi\n"; got != want {
		t.Errorf("body = %q, want %q", got, want)
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:18080", time.Second); err == nil {
		c.Close()
		t.Errorf("the service's port is reachable on the host's loopback")
	}
	if c, err := h.Dial(t.Context(), 18081); err == nil {
		c.Close()
		t.Errorf("Dial of a port nothing listens on succeeded")
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("Dial of a closed port: %v, want connection refused", err)
	}
	// Its output reaches the log as the container's stdout is copied: it
	// may arrive after the first answer.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), "serving on 127.0.0.1:18080"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("logs lack the service's output:\n%s", logs.String())
			break
		}
	}
	select {
	case <-h.Done():
		t.Fatalf("the service ended: %s", h.Reason())
	default:
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Done():
	default:
		t.Fatal("Done is open after Stop")
	}
	if got, want := h.Reason(), sandbox.ReasonStopped; got != want {
		t.Errorf("Reason = %q, want %q", got, want)
	}
	if _, err := h.Dial(t.Context(), 18080); err == nil {
		t.Errorf("Dial after Stop succeeded")
	}
}

// TestServiceExit: a service that exits by itself ends with its exit
// status as the Reason.
func TestServiceExit(t *testing.T) {
	h, logs := startService(t, "exit", "3")
	select {
	case <-h.Done():
	case <-time.After(20 * time.Second):
		t.Fatalf("the service did not end\nlogs:\n%s", logs.String())
	}
	if got, want := h.Reason(), "exited 3"; got != want {
		t.Errorf("Reason = %q, want %q\nlogs:\n%s", got, want, logs.String())
	}
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	found := false
	for sc.Scan() {
		found = found || sc.Text() == "exiting 3"
	}
	if !found {
		t.Errorf("logs:\n%s", logs.String())
	}
}
