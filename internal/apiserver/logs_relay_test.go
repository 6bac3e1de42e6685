package apiserver

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/apiwire"
)

// TestLogsRelayedAcrossNodes: a chunk the provider posts to node B reaches
// node A, where the job's owner follows the log; a chunk a relay forged
// (data the provider did not sign) is refused by A, and a relayed chunk is
// not passed on again.
func TestLogsRelayedAcrossNodes(t *testing.T) {
	f := newFakeChain(t)
	a := New(f, Options{})
	srvA := httptest.NewServer(a)
	t.Cleanup(srvA.Close)
	b := New(f, Options{})
	b.ForwardLogs(t.Context(), func() []string { return []string{srvA.URL} })

	k := runner(t, f, 1)
	postChunks(t, b, k, 1, 0, 3, 100)
	var page apiwire.LogPage
	deadline := time.Now().Add(10 * time.Second)
	for len(page.Chunks) < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		do(t, a, "GET", "/v1/jobs/1/logs", nil, nil, &page)
	}
	if len(page.Chunks) != 3 || page.Chunks[0].Provider != k.Addr {
		t.Fatalf("node A has %d chunks of the 3 posted to B: %+v", len(page.Chunks), page)
	}

	// A relay that alters a chunk: the provider's signature no longer
	// verifies on A.
	sig := ed25519.Sign(k.Priv, apiwire.LogSignBytes(1, 3, []byte("honest")))
	rec := do(t, a, "POST", "/v1/jobs/1/logs", []byte("forged"), map[string]string{
		"X-Gpunet-Provider": k.Addr.String(), "X-Gpunet-Seq": "3", "X-Gpunet-Signature": hex.EncodeToString(sig), relayedHeader: "1",
	}, nil)
	if rec.Code != 403 {
		t.Fatalf("forged relayed chunk: %d %s", rec.Code, rec.Body)
	}
	// A replayed one (an earlier post number) is refused too.
	old := bytes.Repeat([]byte{0}, 100)
	rec = do(t, a, "POST", "/v1/jobs/1/logs", old, map[string]string{
		"X-Gpunet-Provider": k.Addr.String(), "X-Gpunet-Seq": "0",
		"X-Gpunet-Signature": hex.EncodeToString(ed25519.Sign(k.Priv, apiwire.LogSignBytes(1, 0, old))), relayedHeader: "1",
	}, nil)
	if rec.Code != 409 {
		t.Fatalf("replayed relayed chunk: %d %s", rec.Code, rec.Body)
	}
	// A relayed chunk after a gap is taken; a direct post after a gap is not.
	gap := []byte("after a gap")
	hdr := func(seq uint64, relayed bool) map[string]string {
		h := map[string]string{"X-Gpunet-Provider": k.Addr.String(), "X-Gpunet-Seq": strconv.FormatUint(seq, 10),
			"X-Gpunet-Signature": hex.EncodeToString(ed25519.Sign(k.Priv, apiwire.LogSignBytes(1, seq, gap)))}
		if relayed {
			h[relayedHeader] = "1"
		}
		return h
	}
	if rec := do(t, b, "POST", "/v1/jobs/1/logs", gap, hdr(9, false), nil); rec.Code != 409 {
		t.Fatalf("direct post after a gap: %d", rec.Code)
	}
	if rec := do(t, a, "POST", "/v1/jobs/1/logs", gap, hdr(9, true), nil); rec.Code != 201 {
		t.Fatalf("relayed post after a gap: %d %s", rec.Code, rec.Body)
	}
}
