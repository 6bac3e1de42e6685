package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/blob"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
	"github.com/gpunet/gpunet/internal/netstats"
	"github.com/gpunet/gpunet/internal/validator"
)

var alice, bob = lt.NewKey("alice"), lt.NewKey("bob")

// startNode runs a real single-validator chain in-process.
func startNode(t *testing.T) *Daemon {
	t.Helper()
	home := t.TempDir()
	if _, err := validator.Init(home, validator.InitOptions{
		ChainID: lt.ChainID, Validators: 1, Genesis: lt.Genesis(1_000_000, "alice"), BlockTime: 50 * time.Millisecond,
	}); err != nil {
		t.Fatal(err)
	}
	d, err := Start(t.Context(), home, Options{APIAddr: "127.0.0.1:0", CheckInvariants: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return d
}

func TestNodeServesTxsAndState(t *testing.T) {
	d := startNode(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cl := chainclient.New(d.APIURL)

	st, err := cl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ChainID != lt.ChainID || st.API != d.APIURL || len(st.Validators) != 1 {
		t.Fatalf("status: %+v", st)
	}

	res, err := cl.BroadcastTx(ctx, alice.Send(0, bob.Addr, 250), true)
	if err != nil {
		t.Fatal(err)
	}
	if res.Code != 0 || res.Height < 1 || len(res.Hash) != 64 {
		t.Fatalf("tx result: %+v", res)
	}
	b, err := cl.Balance(ctx, bob.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if b.Balance != 250 || b.Denom != "usync" {
		t.Fatalf("bob: %+v", b)
	}

	// Rejections come back with their code and message, and change nothing.
	_, err = cl.BroadcastTx(ctx, alice.Send(0, bob.Addr, 250), true)
	var txErr *chainclient.TxError
	if !errors.As(err, &txErr) && !strings.Contains(err.Error(), "already submitted") {
		t.Fatalf("replay: got %v", err)
	}
	_, err = cl.BroadcastTx(ctx, alice.Send(1, bob.Addr, 10_000_000), true)
	if !errors.As(err, &txErr) || txErr.Result.Code != ledger.ErrInsufficientFunds.Code {
		t.Fatalf("overspend: got %v", err)
	}
	if b2, _ := cl.Balance(ctx, bob.Addr); b2.Balance != 250 {
		t.Fatalf("bob after rejected txs = %d, want 250", b2.Balance)
	}
}

// TestBlocksAndTxs reads a transfer back through the block and tx lists,
// from CometBFT's block store and results.
func TestBlocksAndTxs(t *testing.T) {
	d := startNode(t)
	cl := chainclient.New(d.APIURL)
	res, err := cl.BroadcastTx(t.Context(), alice.Send(0, bob.Addr, 7), true)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string, v any) {
		t.Helper()
		resp, err := http.Get(d.APIURL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	var b apiwire.Block
	get(fmt.Sprintf("/v1/blocks/%d", res.Height), &b)
	if b.Height != res.Height || b.NumTxs != 1 || len(b.Txs) != 1 || b.Time.IsZero() || len(b.Hash) != 64 {
		t.Fatalf("block %d: %+v", res.Height, b)
	}
	tx := b.Txs[0]
	if tx.Hash != res.Hash || tx.Type != "send" || tx.Sender != alice.Addr.String() || tx.Code != 0 || !strings.Contains(string(tx.Msg), `"amount":7`) {
		t.Errorf("tx in block: %+v msg %s", tx, tx.Msg)
	}
	var txs apiwire.TxList
	get("/v1/txs?limit=5", &txs)
	if len(txs.Txs) != 1 || txs.Txs[0].Hash != res.Hash || txs.Txs[0].Height != res.Height || txs.NextCursor != "" {
		t.Errorf("txs: %+v", txs)
	}
	for st, _ := cl.Status(t.Context()); st.Height < 3; st, _ = cl.Status(t.Context()) {
		time.Sleep(20 * time.Millisecond)
	}
	var blocks apiwire.BlockList
	get("/v1/blocks?limit=2", &blocks)
	if len(blocks.Blocks) != 2 || blocks.Blocks[0].Height <= blocks.Blocks[1].Height || blocks.NextCursor == "" {
		t.Errorf("blocks: %+v", blocks)
	}
}

// TestMetrics reads /metrics with the Prometheus text parser after a
// block with a tx and a blob upload.
func TestMetrics(t *testing.T) {
	d := startNode(t)
	cl := chainclient.New(d.APIURL)
	res, err := cl.BroadcastTx(t.Context(), alice.Send(0, bob.Addr, 7), true)
	if err != nil {
		t.Fatal(err)
	}
	bc := blob.NewClient(d.APIURL)
	bc.Signer = signer{alice}
	if _, _, err := bc.Put(t.Context(), strings.NewReader("0123456789")); err != nil {
		t.Fatal(err)
	}
	var mfs map[string]*dto.MetricFamily
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(d.APIURL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		var p expfmt.TextParser
		mfs, err = p.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("parse /metrics: %v", err)
		}
		if h := mfs["gpunet_block_height"]; h != nil && h.Metric[0].GetGauge().GetValue() >= float64(res.Height) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gpunet_block_height never reached %d", res.Height)
		}
		time.Sleep(50 * time.Millisecond)
	}
	value := func(name string, labels ...string) float64 {
		t.Helper()
		mf := mfs[name]
		if mf == nil {
			t.Fatalf("no metric family %s", name)
		}
	next:
		for _, m := range mf.Metric {
			for i := 0; i < len(labels); i += 2 {
				found := false
				for _, lp := range m.Label {
					found = found || (lp.GetName() == labels[i] && lp.GetValue() == labels[i+1])
				}
				if !found {
					continue next
				}
			}
			switch {
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
		t.Fatalf("%s%v: no such series", name, labels)
		return 0
	}
	if v := value("gpunet_txs_total"); v < 1 {
		t.Errorf("gpunet_txs_total = %v", v)
	}
	if v := value("gpunet_block_execution_seconds"); v < 1 {
		t.Errorf("gpunet_block_execution_seconds count = %v", v)
	}
	if v := value("gpunet_blob_bytes_total", "direction", "in"); v != 10 {
		t.Errorf("blob bytes in = %v, want 10", v)
	}
	for _, st := range netstats.States {
		value("gpunet_jobs", "state", st)
	}
	for _, name := range []string{"gpunet_mempool_txs", "gpunet_tx_per_second", "gpunet_providers_online", "gpunet_providers_registered", "gpunet_utilization_ratio", "gpunet_scheduler_wait_seconds"} {
		value(name)
	}
	if v := value("gpunet_challenges_total", "kind", "hardware", "outcome", "failed"); v != 0 {
		t.Errorf("hardware challenges failed = %v before any", v)
	}
	value("gpunet_challenges_total", "kind", "liveness", "outcome", "missed")
	if v := value("gpunet_api_requests_total", "route", "submitTx", "code", "200"); v != 1 {
		t.Errorf("submitTx requests = %v", v)
	}
	if ct := mfs["gpunet_jobs"].GetType(); ct != dto.MetricType_GAUGE {
		t.Errorf("gpunet_jobs type %v", ct)
	}
}

// TestEveryDocumentedRouteIsServed calls each operation of a real node's
// /openapi.json (the blob gateway, the stats and /metrics included) and
// checks that a route answers it, not the fallback.
func TestEveryDocumentedRouteIsServed(t *testing.T) {
	d := startNode(t)
	resp, err := http.Get(d.APIURL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	err = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	params := strings.NewReplacer("{addr}", alice.Addr.String(), "{id}", "1", "{hash}", strings.Repeat("ab", 32), "{height}", "1", "{file}", "x")
	n := 0
	for path, ops := range doc.Paths {
		for method := range ops {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			req, _ := http.NewRequestWithContext(ctx, strings.ToUpper(method), d.APIURL+params.Replace(path), nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				cancel()
				t.Fatalf("%s %s: %v", method, path, err)
			}
			var eb apiwire.ErrorBody
			if resp.Header.Get("Content-Type") == "application/json" {
				json.NewDecoder(resp.Body).Decode(&eb)
			}
			resp.Body.Close()
			cancel()
			if resp.StatusCode == 405 || strings.Contains(eb.Message, "no such endpoint") {
				t.Errorf("%s %s is documented but not served: %d %s", method, path, resp.StatusCode, eb.Message)
			}
			n++
		}
	}
	if n < 25 {
		t.Errorf("only %d operations documented", n)
	}
}

func TestAPIRejectsBadRequests(t *testing.T) {
	d := startNode(t)
	for _, tc := range []struct {
		method, path, ctype string
		body                []byte
		status              int
		want                string
	}{
		{"GET", "/v1/accounts/gpu1typo", "", nil, 400, "invalid address"},
		{"GET", "/v1/accounts/" + alice.Addr.String()[:20] + "x/balance", "", nil, 400, "invalid address"},
		{"GET", "/v1/txs/xyz", "", nil, 400, "64 hex"},
		{"GET", "/v1/txs/" + strings.Repeat("ab", 32), "", nil, 404, "not in any block"},
		{"POST", "/v1/txs", "application/octet-stream", nil, 400, "empty"},
		{"POST", "/v1/txs", "text/plain", []byte("zz"), 400, "not hex"},
		{"POST", "/v1/txs", "application/octet-stream", []byte("garbage"), 422, "version"},
		{"POST", "/v1/txs", "application/octet-stream", bytes.Repeat([]byte{1}, 3<<20), 413, "limit"},
		{"POST", "/v1/txs?timeout=forever", "application/octet-stream", alice.Send(0, bob.Addr, 1), 400, "timeout"},
		{"GET", "/v2/nothing", "", nil, 404, "no such endpoint"},
		{"DELETE", "/v1/status", "", nil, 405, `"code":"method_not_allowed"`},
		{"GET", "/v1/blobs/sha256:xyz", "", nil, 400, `"code":"invalid_argument"`},
	} {
		req, _ := http.NewRequest(tc.method, d.APIURL+tc.path, bytes.NewReader(tc.body))
		if tc.ctype != "" {
			req.Header.Set("Content-Type", tc.ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s %s: HTTP %d %s, want %d containing %q", tc.method, tc.path, resp.StatusCode, body, tc.status, tc.want)
		}
		if !json.Valid(body) {
			t.Errorf("%s %s: body is not JSON: %s", tc.method, tc.path, body)
		}
	}
}
