package provider

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/blob"
)

// TestBlobFailureReasonCarriesNothingFetched (issue 27): when a job's blob
// cannot be downloaded, the text that goes on chain names the blob (public
// in the spec) and fixed words; what the gateway said (the nodes it tried,
// a private address, its answer) is for the provider's log only.
func TestBlobFailureReasonCarriesNothingFetched(t *testing.T) {
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, `{"code":"bad_gateway","message":"no node has it: tried http://10.1.2.3:8080 (connection refused)"}`)
	}))
	defer gw.Close()
	a := &Agent{o: Options{Blobs: blob.NewClient(gw.URL), WorkDir: t.TempDir()}}
	ref := "sha256:" + strings.Repeat("ab", 32)
	err := a.fetchDecrypted(context.Background(), 7, ref, nil, func(io.Reader) error { return nil })
	var de *dataError
	if !errors.As(err, &de) {
		t.Fatalf("got %v, want a *dataError", err)
	}
	if want := "blob " + ref + " could not be fetched"; de.Error() != want {
		t.Fatalf("public text %q, want %q", de.Error(), want)
	}
	if logged := de.LogValue().String(); !strings.Contains(logged, "10.1.2.3") {
		t.Fatalf("the log lost the gateway's words: %q", logged)
	}
	var _ slog.LogValuer = de
}
