package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
	"github.com/gpunet/gpunet/internal/receipt"
)

// TestServiceReceipt: a receipt signed by a replica's provider for the
// node's chain checks out, with the request and answer it names; another
// answer, another chain's receipt, or a provider that runs no replica of
// the service make it exit 1 saying so.
func TestServiceReceipt(t *testing.T) {
	s := newStory(t) // for the home
	other := lt.NewKey("not-a-replica")
	svc := ledger.Service{ID: 1, Owner: s.alice.Address, State: ledger.ServiceActive,
		Replicas: []ledger.Replica{{Provider: s.prov.Addr, Ready: true, ReadyAt: 1}}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/status":
			w.Write([]byte(`{"chain_id":"chain-a"}`))
		case "/v1/services/1":
			json.NewEncoder(w).Encode(svc)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	req := []byte(`{"model":"tinylm","messages":[{"role":"user","content":"hi"}],"seed":1}`)
	answer := []byte(`{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"hello there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`)
	stream := []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" there\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	var o receipt.Outputs
	o.Add(answer)
	sign := func(k lt.Key, chain string) string {
		r := receipt.New(1, k.Addr, req, &o, time.Now().UnixMilli())
		r.Sign(chain, k.Priv)
		return receipt.Encode(r)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, b, 0o600)
		return p
	}
	reqF, ansF, streamF, wrongF := write("req.json", req), write("ans.json", answer), write("ans.sse", stream), write("wrong.json", bytes.Replace(answer, []byte("there"), []byte("THERE"), 1))
	run := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		args = append(args, "--node", srv.URL, "--home", s.home)
		code := Run(t.Context(), args, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	good := sign(s.prov, "chain-a")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"good", []string{good, "--request", reqF, "--response", ansF}, 0, "ok: signed by the provider's key on chain chain-a"},
		{"good, the header line as copied, a stream", []string{receipt.Header + ": " + good, "--response", streamF}, 0, "replica:   running"},
		{"another answer", []string{good, "--response", wrongF}, 1, "is not the answer the receipt names"},
		{"another request", []string{good, "--request", ansF}, 1, "is not the request the receipt names"},
		{"another chain", []string{sign(s.prov, "chain-b")}, 1, "does not verify on chain"},
		{"not a replica", []string{sign(other, "chain-a")}, 1, "runs no replica of service 1"},
		{"not a receipt", []string{"abc"}, 2, "characters, want"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := run(append([]string{"service", "receipt"}, tc.args...)...)
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, want %d; output:\n%s\nwant it to say %q", code, tc.code, out, tc.want)
			}
		})
	}
}
