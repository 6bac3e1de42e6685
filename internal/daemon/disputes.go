package daemon

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/openaigw"
	"github.com/gpunet/gpunet/internal/receipt"
)

// Service disputes (issue 29): the node's OpenAI gateway samples requests
// for re-execution (openaigw.CheckOptions) at the ledger's
// service_check_rate_ppm, and sends the disputes it finds with the node's
// DisputeKey through its own API: of a service that declares its answers
// bit-exact, with the three receipts; of one that declares a tolerance on
// log-probabilities, with the three answers too, which the ledger judges
// by the rule the gateway used (internal/ledger/logprob).

// checkRate reads params.service_check_rate_ppm from the committed state.
func checkRate(view func() (ledger.KV, func())) func() uint64 {
	return func() uint64 {
		kv, release := view()
		defer release()
		p, err := ledger.GetParams(kv)
		if err != nil {
			return 0
		}
		return p.ServiceCheckRatePPM
	}
}

// logprobTolMin reads params.service_logprob_tolerance_min_e9 from the
// committed state: the gateway raises a service's declared tolerance to
// it, as the ledger does when it judges a dispute.
func logprobTolMin(view func() (ledger.KV, func())) func() uint64 {
	return func() uint64 {
		kv, release := view()
		defer release()
		p, err := ledger.GetParams(kv)
		if err != nil {
			return ledger.MaxLogprobTolE9 // unknown: judge leniently, dispute nothing doubtful
		}
		return p.ServiceLogprobTolMinE9
	}
}

// disputeSender sends disputes with key through the node's API.
type disputeSender struct {
	key chainclient.Signer
	log *slog.Logger
	cl  atomic.Pointer[chainclient.Client]
}

func (d *disputeSender) setAPI(url string) { d.cl.Store(chainclient.New(url)) }

func (d *disputeSender) send(ctx context.Context, m *ledger.MsgServiceDispute) error {
	cl := d.cl.Load()
	if d.key == nil || cl == nil {
		return errors.New("this node has no dispute key: the dispute is logged, not sent")
	}
	res, err := cl.SendMsg(ctx, d.key, 0, m)
	if err != nil {
		return err
	}
	d.log.Info("service dispute sent", "service", m.Receipts[0].ServiceID, "tx", res.Hash, "with_answers", len(m.Answers) > 0)
	return nil
}

// checkView is one sampled check as GET /v1/services/checks shows it.
type checkView struct {
	Service  uint64   `json:"service"`
	Request  string   `json:"request"`  // hex SHA-256 of the request body
	Receipts []string `json:"receipts"` // Gpunet-Receipt form: the first answer's, then the others'
	Verdict  string   `json:"verdict"`
	Error    string   `json:"error,omitempty"`
	At       int64    `json:"at"` // unix seconds
}

// checksHandler answers the gateway's latest checks, newest first.
func checksHandler(gw *openaigw.Gateway) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		checks := gw.Checks()
		out := make([]checkView, 0, len(checks))
		for i := len(checks) - 1; i >= 0; i-- {
			c := checks[i]
			v := checkView{Service: c.Service, Request: hex.EncodeToString(c.Request[:]), Verdict: c.Verdict, Error: c.Err, At: c.At.Unix()}
			for j := range c.Receipts {
				v.Receipts = append(v.Receipts, receipt.Encode(&c.Receipts[j]))
			}
			out = append(out, v)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
	})
}

// checkCollector exports the gateway's sampled checks by verdict, read at
// each scrape: gpunet_service_checks_total{verdict}. A rising "diverged"
// is a replica of a service that declares neither exact answers
// (openai.exact) nor a tolerance (openai.tolerance) answering otherwise
// than two others, by more than a near tie: reported, not disputed.
type checkCollector struct {
	gw   *openaigw.Gateway
	desc *prometheus.Desc
}

func newCheckCollector(gw *openaigw.Gateway) *checkCollector {
	return &checkCollector{gw: gw, desc: prometheus.NewDesc("gpunet_service_checks_total",
		"Sampled re-executions of OpenAI requests by this node's gateway, by verdict: agreed, tolerated (a near tie), diverged (outvoted, of a service that declares neither exact answers nor a tolerance: not disputed), disputed, split, failed.",
		[]string{"verdict"}, nil)}
}

func (c *checkCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *checkCollector) Collect(ch chan<- prometheus.Metric) {
	for v, n := range c.gw.CheckCounts() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n), v)
	}
}
