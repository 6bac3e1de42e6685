package apiserver

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// withService adds to f a provider offering oci (p6) and a public
// service of the consumer's placed on it, and returns the service's id
// and the provider's key.
func withService(t *testing.T, f *fakeChain) (uint64, lt.Key) {
	t.Helper()
	k := lt.NewKey("p6")
	f.send(consumerKey, &ledger.MsgSend{To: k.Addr, Amount: 100_000_000})
	pi := lt.ProviderInfo("", 0, 36_000)
	pi.Executors = []string{"oci", "wasm"}
	f.send(k, &ledger.MsgRegisterProvider{ProviderInfo: pi})
	f.send(k, &ledger.MsgStake{Amount: 10_000_000})
	f.send(consumerKey, &ledger.MsgDeployService{Spec: lt.ServiceSpec("svc", 1_000_000), Budget: 10_000_000, ConsumerKey: lt.AgeKey("consumer"), Public: true})
	kv, release := f.View()
	defer release()
	ids := ledger.ServicesOfProvider(kv, k.Addr)
	if len(ids) != 1 {
		t.Fatalf("the service was not placed on p6: %v", ids)
	}
	return ids[0], k
}

// postServiceChunk posts chunk seq of k's log of service id.
func postServiceChunk(t *testing.T, s *Server, k lt.Key, id, seq uint64, data []byte) int {
	t.Helper()
	sig := ed25519.Sign(k.Priv, apiwire.ServiceLogSignBytes(id, seq, data))
	return do(t, s, "POST", fmt.Sprintf("/v1/services/%d/logs", id), data, map[string]string{
		"X-Gpunet-Provider":  k.Addr.String(),
		"X-Gpunet-Seq":       strconv.FormatUint(seq, 10),
		"X-Gpunet-Signature": hex.EncodeToString(sig),
	}, nil).Code
}

// TestServiceRoutes: a service through GET /v1/services (all active, by
// owner, by model), /v1/services/{id} and /v1/providers/{addr}/services,
// and its live log: the replica's provider posts, signed over the
// service's sign bytes (a job log's signature does not pass), with
// numbers that rise but may jump (a replica run again numbers its posts
// anew), never repeat.
func TestServiceRoutes(t *testing.T) {
	f := newFakeChain(t)
	s := New(f, Options{})
	id, k := withService(t, f)

	for _, url := range []string{"/v1/services", "/v1/services?owner=" + consumerKey.Addr.String(), "/v1/services?model=tinylm", "/v1/providers/" + k.Addr.String() + "/services"} {
		var list apiwire.ServiceList
		if rec := do(t, s, "GET", url, nil, nil, &list); rec.Code != 200 || len(list.Services) != 1 || list.Services[0].ID != id {
			t.Errorf("GET %s: %d %+v, want service %d", url, rec.Code, list.Services, id)
		}
	}
	var list apiwire.ServiceList
	if do(t, s, "GET", "/v1/services?model=other", nil, nil, &list); len(list.Services) != 0 {
		t.Errorf("a model nobody serves lists %+v", list.Services)
	}
	var svc ledger.Service
	if rec := do(t, s, "GET", fmt.Sprintf("/v1/services/%d", id), nil, nil, &svc); rec.Code != 200 || svc.ID != id || len(svc.Replicas) != 1 {
		t.Errorf("GET /v1/services/%d: %d %+v", id, rec.Code, svc)
	}
	for url, want := range map[string]int{"/v1/services/99": 404, "/v1/services/x": 400, "/v1/services?owner=nobody": 400} {
		if rec := do(t, s, "GET", url, nil, nil, nil); rec.Code != want {
			t.Errorf("GET %s: %d, want %d", url, rec.Code, want)
		}
	}

	if code := postServiceChunk(t, s, k, id, 0, []byte("one")); code != 201 {
		t.Fatalf("first chunk: %d", code)
	}
	if code := postServiceChunk(t, s, k, id, 1_000_000, []byte("two")); code != 201 {
		t.Errorf("a chunk numbered past a gap: %d, want 201", code)
	}
	if code := postServiceChunk(t, s, k, id, 1_000_000, []byte("two")); code != 409 {
		t.Errorf("the same chunk again: %d, want 409", code)
	}
	if code := postServiceChunk(t, s, providerKeys[0], id, 0, []byte("x")); code != 403 {
		t.Errorf("a provider without a replica: %d, want 403", code)
	}
	data := []byte("three")
	sig := ed25519.Sign(k.Priv, apiwire.LogSignBytes(id, 1_000_001, data))
	rec := do(t, s, "POST", fmt.Sprintf("/v1/services/%d/logs", id), data, map[string]string{
		"X-Gpunet-Provider": k.Addr.String(), "X-Gpunet-Seq": "1000001", "X-Gpunet-Signature": hex.EncodeToString(sig)}, nil)
	if rec.Code != 403 {
		t.Errorf("a chunk signed as a job's log: %d, want 403", rec.Code)
	}
	var page apiwire.LogPage
	do(t, s, "GET", fmt.Sprintf("/v1/services/%d/logs", id), nil, nil, &page)
	if len(page.Chunks) != 2 || !bytes.Equal(page.Chunks[0].Data, []byte("one")) || !bytes.Equal(page.Chunks[1].Data, []byte("two")) || page.Next != 2 {
		t.Errorf("the service's log: %+v", page)
	}
	var jobPage apiwire.LogPage
	if do(t, s, "GET", fmt.Sprintf("/v1/jobs/%d/logs", id), nil, nil, &jobPage); len(jobPage.Chunks) != 0 {
		t.Errorf("the job with the service's id shows the service's log: %+v", jobPage)
	}
}

// TestQuoteServiceRoute: POST /v1/services/quote answers the ledger's
// quote for a spec and budget, and refuses, naming what, an unknown field,
// a spec the ledger would refuse and a body that is not JSON.
func TestQuoteServiceRoute(t *testing.T) {
	f := newFakeChain(t)
	s := New(f, Options{})
	_, k := withService(t, f)
	body, _ := json.Marshal(apiwire.ServiceQuoteRequest{Spec: lt.ServiceSpec("svc", 1_000_000), Budget: 3_600_000})
	var q ledger.ServiceQuote
	if rec := do(t, s, "POST", "/v1/services/quote", body, nil, &q); rec.Code != 200 || q.Matching < 1 || q.RatePerHour == 0 || q.LastsSeconds == 0 {
		t.Fatalf("quote: %d %+v", rec.Code, q)
	}
	if !slices.ContainsFunc(q.Best, func(o ledger.QuoteOffer) bool { return o.Provider == k.Addr }) {
		t.Errorf("quote's best %+v lacks the oci provider %s", q.Best, k.Addr)
	}
	// A spec no provider can take: the reason is the ledger's miss in
	// words, rendered by jobtext (the ledger writes none).
	gpu := lt.ServiceSpec("svc", 1_000_000)
	gpu.GPUCount, gpu.GPUModels = 1, []string{"H100_SXM"}
	body, _ = json.Marshal(apiwire.ServiceQuoteRequest{Spec: gpu})
	q = ledger.ServiceQuote{}
	if rec := do(t, s, "POST", "/v1/services/quote", body, nil, &q); rec.Code != 200 || q.Code != ledger.QuoteNoOffer || q.Miss == nil ||
		q.Reason != "no replica would be placed: no online provider offers H100_SXM" {
		t.Errorf("quote of an H100 service: %d %+v, want no_offer and its sentence", rec.Code, q)
	}
	bad := lt.ServiceSpec("svc", 1_000_000)
	bad.Ports = nil
	badBody, _ := json.Marshal(apiwire.ServiceQuoteRequest{Spec: bad})
	for _, tc := range []struct {
		name string
		body []byte
		want string
	}{
		{"unknown field", []byte(`{"spec":{},"budgett":1}`), `unknown field "budgett"`},
		{"not JSON", []byte(`spec: x`), "quote: "},
		{"no ports", badBody, "spec: "},
	} {
		var eb apiwire.ErrorBody
		if rec := do(t, s, "POST", "/v1/services/quote", tc.body, nil, &eb); rec.Code != 400 || !strings.Contains(eb.Message, tc.want) {
			t.Errorf("%s: %d %+v, want 400 with %q", tc.name, rec.Code, eb, tc.want)
		}
	}
}
