package fake_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/fake"
)

// TestService: a fake service answers its handler on its ports only, is
// recorded, and ends with the Reason it was given.
func TestService(t *testing.T) {
	ex := fake.New(nil).WithService(fake.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hi "+r.URL.Path)
	}), 8000))
	var logs bytes.Buffer
	var runner sandbox.ServiceRunner = ex
	h, err := runner.StartService(t.Context(), &sandbox.Service{ID: "s1", WorkDir: t.TempDir()}, &logs)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return h.Dial(ctx, 8000) }}}
	resp, err := c.Get("http://svc/x")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got, want := string(b), "hi /x"; got != want {
		t.Errorf("body = %q, want %q", got, want)
	}
	if _, err := h.Dial(t.Context(), 8001); !errors.Is(err, fake.ErrRefused) {
		t.Errorf("Dial of another port: %v, want ErrRefused", err)
	}
	if got := len(ex.Running()); got != 1 {
		t.Errorf("%d running, want 1", got)
	}
	ex.Services()[0].Exit("exited 2")
	<-h.Done()
	if got, want := h.Reason(), "exited 2"; got != want {
		t.Errorf("Reason = %q, want %q", got, want)
	}
	if _, err := h.Dial(t.Context(), 8000); err == nil {
		t.Errorf("Dial after the end succeeded")
	}
	h.Stop() // after the end: no change
	if got, want := h.Reason(), "exited 2"; got != want {
		t.Errorf("Reason after Stop = %q, want %q", got, want)
	}
	if _, err := fake.New(nil).StartService(t.Context(), &sandbox.Service{ID: "s2", WorkDir: t.TempDir()}, nil); err == nil {
		t.Errorf("an executor without WithService started a service")
	}
}
