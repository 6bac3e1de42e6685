package daemon_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/daemon"
	"github.com/gpunet/gpunet/internal/devnet"
	"github.com/gpunet/gpunet/internal/hwinfo/nvmlsim"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/provider"
	"github.com/gpunet/gpunet/internal/validator"
)

// TestObservability runs a devnet node and two provider agents (the
// example job is spot-checked: the second runs its audit), the agents'
// metrics in a registry of their own (as `gpunet provider start
// --metrics` serves them), and puts the example job through. Then:
//
//   - both registries lint clean with promlint, the linter `promtool
//     check metrics` runs, and hold the series an operator watches, with
//     values that say the job happened (the GPU series are provider's
//     TestGPUMetrics': a devnet's simulated GPUs have no NVML to read);
//   - the node's OpenAPI document, every route mounted, lints clean with
//     Redocly's linter (testdata/redocly.yaml says which rules are off
//     and why);
//   - every GET route's request and answer match the document
//     (kin-openapi's validator), on the data the job left.
func TestObservability(t *testing.T) {
	home := t.TempDir()
	// Without hardware challenges: two in-process providers proving
	// 10-s CPU challenges beside the example job starved an agent under
	// CI load until its reveal window closed (a CI=true run: "1 that did
	// not reveal slashed"). Challenges have their own tests.
	if _, err := devnet.Setup(home, devnet.Options{BlockTime: 50 * time.Millisecond, NoHWChallenges: true}); err != nil {
		t.Fatal(err)
	}
	d, err := daemon.Start(t.Context(), home, daemon.Options{APIAddr: "127.0.0.1:0", CheckInvariants: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop() })
	provReg := prometheus.NewRegistry()
	provReg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ctx, stop := context.WithCancel(context.Background())
	ps, err := devnet.RunProviders(ctx, home, d.APIURL, devnet.ProviderOptions{N: 2, Poll: 25 * time.Millisecond,
		NVML: func(int) nvml.Interface { return nvmlsim.Lib(nvmlsim.RTX4090, 1) }, Metrics: provider.NewMetrics(provReg)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop()
		ps.Wait()
	})
	if err := ps.WaitReady(t.Context(), 60*time.Second); err != nil {
		t.Fatal(err)
	}
	ectx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ex, err := devnet.RunExample(ectx, home, d.APIURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The stats take the last block a moment after it commits.
	deadline := time.Now().Add(10 * time.Second)
	for value(t, d.Metrics, "gpunet_jobs_finished_total", map[string]string{"outcome": "succeeded"}) < 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	submitProposal(t, home, d.APIURL) // proposal 1, for the governance routes' {id}
	t.Run("metrics", func(t *testing.T) { checkMetrics(t, d, provReg) })
	doc := getDocument(t, d.APIURL)
	t.Run("openapi lint", func(t *testing.T) { lintOpenAPI(t, doc) })
	t.Run("answers match the document", func(t *testing.T) {
		cfg, err := validator.LoadConfig(home)
		if err != nil {
			t.Fatal(err)
		}
		checkAnswers(t, d.APIURL, cfg.APIToken, doc, ps.Agents[0].Status().Address, ex.Job)
	})
}

// submitProposal submits a text proposal as alice, so that the routes
// that take a proposal's id have one to answer about.
func submitProposal(t *testing.T, home, api string) {
	kr, err := keys.Open(filepath.Join(home, "keyring"))
	if err != nil {
		t.Fatal(err)
	}
	alice, err := kr.Get(devnet.DevKeys[0])
	if err != nil {
		t.Fatal(err)
	}
	cl := chainclient.New(api)
	list, err := cl.Proposals(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	msg := &ledger.MsgSubmitProposal{Kind: ledger.ProposalText, Title: "observability", Deposit: ledger.Amount(list.NextMinDeposit)}
	if _, err := cl.SendMsg(t.Context(), alice, 0, msg); err != nil {
		t.Fatal(err)
	}
}

func checkMetrics(t *testing.T, d *daemon.Daemon, provReg prometheus.Gatherer) {
	for name, reg := range map[string]prometheus.Gatherer{"node": d.Metrics, "provider": provReg} {
		problems, err := testutil.GatherAndLint(reg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s: %s", name, p.Metric, p.Text)
		}
	}
	for _, c := range []struct {
		reg    prometheus.Gatherer
		name   string
		labels map[string]string
		min    float64
	}{
		{d.Metrics, "gpunet_build_info", nil, 1},
		{d.Metrics, "gpunet_consensus_height", nil, 2},
		{d.Metrics, "gpunet_consensus_validators", nil, 1},
		{d.Metrics, "gpunet_p2p_peers", nil, 0},
		{d.Metrics, "gpunet_last_block_timestamp_seconds", nil, 1e9},
		{d.Metrics, "gpunet_jobs_submitted_total", nil, 1},
		{d.Metrics, "gpunet_jobs_finished_total", map[string]string{"outcome": "succeeded"}, 1},
		{d.Metrics, "gpunet_scheduler_wait_seconds", nil, 1}, // its sample count
		{d.Metrics, "gpunet_job_payments_usync_total", nil, 1},
		{d.Metrics, "gpunet_treasury_usync", nil, 1},
		{d.Metrics, "gpunet_scheduler_queue_jobs", map[string]string{"class": "cpu"}, 0},
		{provReg, "gpunet_build_info", nil, 1},
		{provReg, "gpunet_provider_executor_run_seconds", map[string]string{"provider": devnet.ProviderKey(1)}, 1},
		{provReg, "gpunet_provider_measured_int8_ops_per_second", map[string]string{"device": "cpu"}, 1},
	} {
		if got := value(t, c.reg, c.name, c.labels); got < c.min {
			t.Errorf("%s%v = %v, want at least %v", c.name, c.labels, got, c.min)
		}
	}
}

// value returns the value (a histogram's sample count) of the first
// series of name whose labels include labels; -1 when there is none.
func value(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if has(m, labels) {
				switch {
				case m.Histogram != nil:
					return float64(m.GetHistogram().GetSampleCount())
				case m.Counter != nil:
					return m.GetCounter().GetValue()
				default:
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

func has(m *dto.Metric, labels map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
			n++
		}
	}
	return n == len(labels)
}

// getDocument fetches the node's OpenAPI document.
func getDocument(t *testing.T, api string) []byte {
	t.Helper()
	resp, err := http.Get(api + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /openapi.json: %d %v", resp.StatusCode, err)
	}
	return b
}

// redoclyVersion is the Redocly CLI the lint runs: .ci/run installs it
// into bin/npm (ignored by git); elsewhere npx fetches it.
const redoclyVersion = "2.77.0"

// lintOpenAPI lints doc with Redocly's recommended rules. Without the
// linter (no bin/npm install, no npx) it skips, unless CI is set: then
// it fails.
func lintOpenAPI(t *testing.T, doc []byte) {
	cmd := redocly(t)
	f := filepath.Join(t.TempDir(), "openapi.json")
	if err := os.WriteFile(f, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	config, err := filepath.Abs("testdata/redocly.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Args = append(cmd.Args, "lint", "--config", config, f)
	cmd.Dir = filepath.Dir(f)
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	if !strings.Contains(string(out), "Your API description is valid") || regexp.MustCompile(`You have \d+ warning`).Match(out) {
		t.Errorf("redocly lint has something to say:\n%s", out)
	}
}

// redocly returns the command that runs Redocly's CLI.
func redocly(t *testing.T) *exec.Cmd {
	t.Helper()
	if bin, err := filepath.Abs("../../bin/npm/node_modules/.bin/redocly"); err == nil {
		if _, err := os.Stat(bin); err == nil {
			return exec.Command(bin)
		}
	}
	npx, err := exec.LookPath("npx")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no Redocly CLI: .ci/run installs it into bin/npm with npm (Node.js)")
		}
		t.Skip("no Redocly CLI (bin/npm) and no npx: install Node.js, or run .ci/run")
	}
	return exec.Command(npx, "--yes", "@redocly/cli@"+redoclyVersion)
}

func init() {
	// The answers that are neither JSON nor plain text: the dashboard's
	// page and assets.
	for _, ct := range []string{"text/html", "text/javascript", "text/css"} {
		openapi3filter.RegisterBodyDecoder(ct, openapi3filter.PlainBodyDecoder)
	}
	openapi3filter.RegisterBodyDecoder("image/svg+xml", openapi3filter.FileBodyDecoder)
}

// checkAnswers calls every GET route of doc on the node at api, with
// parameters naming what the devnet holds (provider addr, job, its
// output blob), and checks each request and answer against doc. The live
// stream (text/event-stream) never ends, so it is only checked to
// answer 200 with that type.
func checkAnswers(t *testing.T, api, token string, raw []byte, addr string, job *ledger.Job) {
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(t.Context()); err != nil {
		t.Fatalf("the document is not valid OpenAPI 3: %v", err)
	}
	var txs apiwire.TxList
	get(t, api+"/v1/txs?limit=1", &txs)
	if len(txs.Txs) == 0 || job.DeliveredResult() == nil {
		t.Fatalf("no tx, or no result for job %d", job.ID)
	}
	params := map[string]string{
		"addr": addr, "id": strconv.FormatUint(job.ID, 10), "height": "2", "file": "app.js",
		"hash": txs.Txs[0].Hash,
	}
	checked := 0
	for path, item := range doc.Paths.Map() {
		op := item.Get
		if op == nil || needsService(path) {
			continue
		}
		ps := maps.Clone(params)
		if strings.HasPrefix(path, "/v1/blobs/") {
			ps["hash"] = job.DeliveredResult().OutputBlob
		}
		if strings.HasPrefix(path, "/v1/validators/") {
			// The devnet's validator, by its operator (bonded at genesis).
			var vl apiwire.ValidatorList
			if get(t, api+"/v1/validators", &vl); len(vl.Validators) == 0 {
				t.Fatalf("GET /v1/validators: no validator on the devnet")
			}
			ps["addr"] = vl.Validators[0].Operator.String()
		}
		target := api + regexp.MustCompile(`\{([a-z_]+)\}`).ReplaceAllStringFunc(path, func(m string) string { return ps[m[1:len(m)-1]] })
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		req, err := http.NewRequestWithContext(ctx, "GET", target, nil)
		if err != nil {
			t.Fatal(err)
		}
		if op.Security != nil && len(*op.Security) > 0 {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		pathParams := map[string]string{}
		for _, p := range op.Parameters {
			if p.Value.In == "path" {
				pathParams[p.Value.Name] = ps[p.Value.Name]
			}
		}
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: pathParams,
			Route:   &routers.Route{Spec: doc, Path: path, PathItem: item, Method: "GET", Operation: op},
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			t.Errorf("GET %s: the document rejects the request: %v", target, err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Errorf("GET %s: %v", target, err)
			continue
		}
		if ct := resp.Header.Get("Content-Type"); ct == "text/event-stream" {
			resp.Body.Close()
			cancel()
			if op.Responses.Status(200).Value.Content.Get(ct) == nil || resp.StatusCode != 200 {
				t.Errorf("GET %s: %d %s, not as documented", target, resp.StatusCode, ct)
			}
			continue
		}
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d, want 200 (the parameters name what the devnet has)", target, resp.StatusCode)
		}
		err = openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
			RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header, Body: resp.Body,
			Options: &openapi3filter.Options{IncludeResponseStatus: true},
		})
		resp.Body.Close()
		cancel()
		if err != nil {
			t.Errorf("GET %s answered %d, not as documented: %v", target, resp.StatusCode, err)
			continue
		}
		checked++
	}
	if checked < 25 {
		t.Errorf("only %d answers checked", checked)
	}
}

func get(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// needsService reports whether a documented GET needs a deployed service
// (or an agent's or a node's upgrade) to answer 200: this test's devnet
// has none; test/e2e's service tests use them.
func needsService(path string) bool {
	return strings.HasPrefix(path, "/svc/") || strings.HasPrefix(path, "/v1/relay/") ||
		path == "/v1/services/{id}" || path == "/v1/services/{id}/probe" || strings.HasPrefix(path, "/openai/v1/models/")
}
