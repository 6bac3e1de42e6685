package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/examples/tinylm/lmimage"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
	"github.com/gpunet/gpunet/internal/sandbox/oci/ocitest"
	"github.com/gpunet/gpunet/internal/validator"
	openaiclient "github.com/gpunet/gpunet/test/openai"
)

// serviceNet is a network for the service tests (issue 16): two validators,
// each its own `gpunet node` process; providers, each with a home of its
// own (a machine of its own), whose agents talk only to node1; and an owner,
// alice, who talks only to node0. The example model server's image
// (examples/tinylm) is built from the repository and served by a registry
// on loopback.
type serviceNet struct {
	root, keyHome string
	node0, node1  string
	provs         map[string]*proc  // by name
	homes         map[string]string // provider name → its home
	names         map[string]string // address → provider name
	image         string            // the tinylm image, by digest
}

// serviceTestParams are the genesis parameters of the service tests:
// heartbeats every second, a replica dropped after 5 s of silence, the
// budget warning 15 s ahead, billing periods of 2 s (a replica is paid
// for each the nodes' witnesses saw it serve), and no tx fee, so that the
// owner's balance moves by exactly what its services cost.
const serviceTestParams = `{"service_heartbeat_interval": 1, "service_heartbeat_timeout": 5, "service_budget_warning": 15, "service_serve_period": 2, "min_fee": 0}`

// startServiceNet starts the network with providers asking price (usync
// per core-hour, e.g. "0.05sync") each.
func startServiceNet(t *testing.T, price string, providers ...string) *serviceNet {
	t.Helper()
	_, err := oci.Probe(t.Context(), oci.Options{Dir: t.TempDir()})
	ocitest.RequireRunc(t, nil, err)
	if err := lmimage.Supported(); err != nil {
		t.Fatalf("the example image cannot be built here: %v", err)
	}
	n := &serviceNet{root: t.TempDir(), provs: map[string]*proc{}, homes: map[string]string{}, names: map[string]string{}}
	n.keyHome = filepath.Join(n.root, "alice")
	var alice keyJSON
	gpunetJSON(t, &alice, "keys", "add", "alice", "--home", n.keyHome)
	accounts := []string{"--account", alice.Address + "=1000sync"}
	for _, name := range providers {
		var k keyJSON
		n.homes[name] = filepath.Join(n.root, name)
		gpunetJSON(t, &k, "keys", "add", name, "--home", n.homes[name])
		n.names[k.Address] = name
		accounts = append(accounts, "--account", k.Address+"=100sync")
	}
	params := filepath.Join(n.root, "params.json")
	os.WriteFile(params, []byte(serviceTestParams), 0o644)
	var net struct {
		Homes []string `json:"homes"`
	}
	initNet(t, &net, append([]string{"--validators", "2", "--home", filepath.Join(n.root, "net"), "--chain-id", "e2e-services",
		"--block-time", "200ms", "--genesis-params", params}, accounts...)...)
	apis := make([]string, 2)
	for i, h := range net.Homes {
		p := startProc(t, fmt.Sprintf("node%d", i), "node", "--home", h, "--output", "json")
		var info struct {
			API string `json:"api"`
		}
		p.jsonLine(60*time.Second, &info)
		apis[i] = strings.TrimSuffix(info.API, "/")
		if !strings.HasPrefix(apis[i], "http") {
			apis[i] = "http://" + apis[i]
		}
	}
	n.node0, n.node1 = apis[0], apis[1]

	reg := ocitest.Registry(t, nil)
	bin := filepath.Join(t.TempDir(), "tinylm")
	if err := lmimage.BuildProgram(t.Context(), "../..", bin); err != nil {
		t.Fatal(err)
	}
	img, err := lmimage.Build(bin)
	if err != nil {
		t.Fatal(err)
	}
	n.image = ocitest.Push(t, reg, lmimage.Repo, img)

	for _, name := range providers {
		// A killed provider's container outlives it until an executor on
		// its directory cleans up, as its next start would. Registered
		// before the provider starts, this runs after it is stopped
		// (cleanups run last first) and before the homes are removed.
		dir := filepath.Join(n.homes[name], "provider", "oci")
		t.Cleanup(func() {
			if ex, err := oci.New(context.Background(), oci.Options{Dir: dir}); err == nil {
				ex.Close()
			}
		})
		n.startProvider(t, name, price)
	}
	waitOfferCount(t, 90*time.Second, n.keyHome, n.node0, "executor=oci", len(providers))
	return n
}

func (n *serviceNet) startProvider(t *testing.T, name, price string) {
	n.provs[name] = startProc(t, "provider "+name+" (node1 only)", "provider", "start", "--from", name, "--home", n.homes[name],
		"--node", n.node1, "--bench-time", "200ms", "--region", "eu", "--price", price, "--allow-fetch-network", "127.0.0.1")
}

// spec writes a service spec of the tinylm image and returns its path.
func (n *serviceNet) spec(t *testing.T, name, extra string) string {
	t.Helper()
	p := filepath.Join(n.root, name+".yaml")
	y := fmt.Sprintf(`kind: service
name: %s
image: %s
args: ["-addr", ":8000"]
ports:
  - {port: 8000, name: api}
readiness: {path: /health, interval: 1s, timeout: 1s, failure_threshold: 3, start: 1m}
resources: {cpu: 0.5, memory: 128MiB, disk: 64MiB}
%s`, name, n.image, extra)
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type deployed struct {
	ID        uint64 `json:"id"`
	AccessKey string `json:"access_key"`
	Addresses struct {
		Ports []struct {
			URL string `json:"url"`
		} `json:"ports"`
		OpenAI string `json:"openai"`
	} `json:"addresses"`
}

func (n *serviceNet) deploy(t *testing.T, spec string, args ...string) deployed {
	t.Helper()
	var d deployed
	gpunetJSON(t, &d, append([]string{"service", "deploy", spec, "--from", "alice", "--home", n.keyHome, "--node", n.node0}, args...)...)
	if d.ID == 0 {
		t.Fatalf("deploy: no id: %+v", d)
	}
	return d
}

func (n *serviceNet) status(t *testing.T, id uint64) ledger.Service {
	t.Helper()
	var s ledger.Service
	gpunetJSON(t, &s, "service", "status", fmt.Sprint(id), "--home", n.keyHome, "--node", n.node0)
	return s
}

// poll reads service id through node0's API, as status does: what the
// waits use.
func (n *serviceNet) poll(t *testing.T, id uint64) ledger.Service {
	t.Helper()
	ctx, cancel := pollCtx(t)
	defer cancel()
	s, err := nodeAPI(t, "", n.node0).Service(ctx, id)
	if err != nil {
		t.Fatalf("service %d: %v", id, err)
	}
	return *s
}

// ready reports whether s has a ready replica, and which provider runs it.
func (n *serviceNet) ready(s ledger.Service) (string, bool) {
	for _, r := range s.Replicas {
		if r.Ready && r.ReadyAt != 0 {
			return n.names[r.Provider.String()], true
		}
	}
	return "", false
}

// call makes an HTTP request with key (none when empty) and returns the
// status and body.
func call(t *testing.T, method, url, key, body string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// openAIError is OpenAI's error object.
type openAIError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// wantOpenAIError requires status and an OpenAI-shaped error with code
// (null when code is empty, as OpenAI's is for a body it cannot parse).
func wantOpenAIError(t *testing.T, what string, status int, code string, gotStatus int, body []byte) {
	t.Helper()
	var e openAIError
	err := json.Unmarshal(body, &e)
	codeOK := (code == "" && e.Error.Code == nil) || (e.Error.Code != nil && *e.Error.Code == code)
	if err != nil || gotStatus != status || !codeOK || e.Error.Message == "" || e.Error.Type == "" {
		t.Errorf("%s: %d %s, want %d with an OpenAI error of code %q", what, gotStatus, body, status, code)
	}
}

const chatBody = `{"model":"tinylm","messages":[{"role":"user","content":"What is light?"}],"max_tokens":12,"seed":7}`

// TestServiceThroughAnotherNode (issue 16): the example model server
// deployed as a service, run by a provider whose agent talks only to
// node1, answers through node0: on its HTTP port (/svc/…), through the
// OpenAI-compatible endpoint (curl-style and with OpenAI's official Node.js
// client, streamed and not), and through the tcp tunnel of `gpunet service
// connect`. Bad requests get OpenAI-shaped errors. When its provider is
// killed, the replica is placed on the other provider and the service
// answers again; stopped, the owner is charged exactly what its replicas
// were paid plus the fee.
func TestServiceThroughAnotherNode(t *testing.T) {
	parallel(t, weightHeavy)
	n := startServiceNet(t, "0.05sync", "carol", "dave")
	before := balance(t, "alice", "--home", n.keyHome, "--node", n.node0)

	start := time.Now()
	d := n.deploy(t, n.spec(t, "tinylm", `max_price: 1 SYNC/h
budget: 2 SYNC
openai: {port: 8000, models: [tinylm]}
`))
	health := fmt.Sprintf("%s/svc/%d/8000/health", n.node0, d.ID)
	waitUntil(t, 120*time.Second, "the service answering through node0", func() bool {
		code, _ := call(t, "GET", health, d.AccessKey, "")
		return code == http.StatusOK
	})
	t.Logf("deploy → first answer through node0: %s", time.Since(start).Round(10*time.Millisecond))
	s := n.status(t, d.ID)
	first, ok := n.ready(s)
	if !ok || len(s.Replicas) != 1 || s.Replicas[0].Relay != n.node1 {
		t.Fatalf("service %d: %+v, want one ready replica reached through node1 (%s)", d.ID, s.Replicas, n.node1)
	}

	checkServiceHTTP(t, n, d)
	checkServiceOpenAI(t, n, d)
	checkServiceTunnel(t, n, d)
	// The replica's output, posted by its provider to node1, sealed to the
	// owner, read and opened through node0.
	waitUntil(t, 30*time.Second, "the replica's log through node0", func() bool {
		r := gpunet(t, "service", "logs", fmt.Sprint(d.ID), "--from", "alice", "--home", n.keyHome, "--node", n.node0)
		return r.code == 0 && strings.Contains(r.stdout, "serving OpenAI's chat completions")
	})

	// node0 probes the replica as a request would (through node1, which
	// holds its agent's session): it answers its readiness check.
	var probe apiwire.ServiceProbe
	gpunetJSON(t, &probe, "service", "probe", fmt.Sprint(d.ID), "--home", n.keyHome, "--node", n.node0)
	if len(probe.Replicas) != 1 || !probe.Replicas[0].OK || probe.Replicas[0].Route != "relay" || n.names[probe.Replicas[0].Provider.String()] != first {
		t.Errorf("probe from node0: %+v, want %s's replica answering through its relay node", probe, first)
	}

	// The provider is killed: the replica is dropped when its heartbeats
	// stop, placed on the other provider, and answers there.
	n.provs[first].kill()
	killed := time.Now()
	// Until the ledger drops it, the replica is still reported ready: a
	// probe shows it failing, and exits 1 with what to do.
	sawFail := false
	waitUntil(t, 60*time.Second, "a probe failing the killed replica, or the replica dropped", func() bool {
		r := gpunet(t, "service", "probe", fmt.Sprint(d.ID), "--home", n.keyHome, "--node", n.node0)
		if r.code == 1 && strings.Contains(r.stdout, "FAILED") && strings.Contains(r.stderr, "gpunet service evict") {
			sawFail = true
			return true
		}
		return len(n.poll(t, d.ID).Ended) > 0
	})
	if !sawFail {
		t.Logf("the ledger dropped the killed replica before a probe saw it fail")
	}
	var second string
	waitUntil(t, 120*time.Second, "the replica replaced and answering again", func() bool {
		s = n.poll(t, d.ID)
		p, ok := n.ready(s)
		if !ok || p == first {
			return false
		}
		second = p
		code, _ := call(t, "POST", d.Addresses.OpenAI+"/chat/completions", d.AccessKey, chatBody)
		return code == http.StatusOK
	})
	t.Logf("failover: %s killed, %s answering %s later", first, second, time.Since(killed).Round(10*time.Millisecond))
	s = n.status(t, d.ID)
	if p, ok := n.ready(s); !ok || p != second {
		t.Errorf("service status after the failover: ready replica on %q (%v), want %s's", p, ok, second)
	}
	// The killed replica ends either way a dead one does: the validators
	// (here all of node0's and node1's power) report it unreachable, or,
	// when the ledger's heartbeat timeout comes first, it is silent.
	if len(s.Ended) != 1 || n.names[s.Ended[0].Provider.String()] != first || (s.Ended[0].Code != ledger.EndUnreachable && s.Ended[0].Code != ledger.EndSilent) {
		t.Errorf("ended replicas %+v, want %s's, ended %s or %s", s.Ended, first, ledger.EndUnreachable, ledger.EndSilent)
	}

	// Stopped: the escrow comes back; the owner paid exactly the
	// replicas' pay and the fee. First a heartbeat of the new replica's is
	// paid: under load the killed one may have been paid nothing, and a
	// replica stopped at once would be paid nothing either (a CI run: cost
	// 0 for both).
	waitUntil(t, 60*time.Second, "a replica's ready time paid", func() bool { return n.status(t, d.ID).Cost > 0 })
	var stopped struct {
		Service ledger.Service `json:"service"`
	}
	gpunetJSON(t, &stopped, "service", "stop", fmt.Sprint(d.ID), "--home", n.keyHome, "--node", n.node0)
	s = n.status(t, d.ID)
	if s.State != ledger.ServiceStopped {
		t.Fatalf("after stop: %s %s", s.State, s.Reason)
	}
	checkServiceCharge(t, n, s, before)
	if code, _ := call(t, "GET", health, d.AccessKey, ""); code != http.StatusNotFound {
		t.Errorf("a stopped service answered %d on its port, want 404", code)
	}
}

// checkServiceCharge checks that the owner, who deployed only s since
// balanceBefore, paid exactly s's cost and fee, that its cost is what its
// replicas were paid, and each was paid for its ready seconds at its price
// (less only when the budget ran out).
func checkServiceCharge(t *testing.T, n *serviceNet, s ledger.Service, balanceBefore uint64) {
	t.Helper()
	spent := balanceBefore - balance(t, "alice", "--home", n.keyHome, "--node", n.node0)
	if spent != s.Cost+s.Fee || s.Budget != s.Cost+s.Fee+s.Refund || s.Escrow != 0 {
		t.Errorf("the owner spent %d; the service cost %d + fee %d, refund %d of budget %d, escrow %d", spent, s.Cost, s.Fee, s.Refund, s.Budget, s.Escrow)
	}
	var paid uint64
	for _, e := range s.Ended {
		paid += e.Paid
		if want := e.PricePerHour * e.ReadySeconds / 3600; e.Paid > want || (e.Paid < want && !strings.Contains(s.Reason, "budget")) {
			t.Errorf("replica on %s paid %d for %d s at %d usync/h, want %d", e.Provider, e.Paid, e.ReadySeconds, e.PricePerHour, want)
		}
	}
	if paid != s.Cost || s.Cost == 0 {
		t.Errorf("replicas paid %d in all, the service's cost is %d", paid, s.Cost)
	}
	t.Logf("service %d: cost %d usync + fee %d, refund %d of %d; replicas %+v", s.ID, s.Cost, s.Fee, s.Refund, s.Budget, s.Ended)
}

// checkServiceHTTP: the service's HTTP port through node0, with and
// without its key.
func checkServiceHTTP(t *testing.T, n *serviceNet, d deployed) {
	t.Helper()
	models := fmt.Sprintf("%s/svc/%d/8000/v1/models", n.node0, d.ID)
	if code, body := call(t, "GET", models, d.AccessKey, ""); code != http.StatusOK || !strings.Contains(string(body), "tinylm") {
		t.Errorf("GET %s: %d %s", models, code, body)
	}
	if code, body := call(t, "GET", models, "", ""); code != http.StatusUnauthorized {
		t.Errorf("GET %s without the key: %d %s, want 401", models, code, body)
	}
	if code, body := call(t, "GET", models, "sk-gpunet-not-the-key", ""); code != http.StatusUnauthorized {
		t.Errorf("GET %s with a wrong key: %d %s, want 401", models, code, body)
	}
}

// checkServiceOpenAI: node0's OpenAI endpoint, by hand (non-streamed and
// streamed, usage in both) and with OpenAI's official client; and the bad
// requests.
func checkServiceOpenAI(t *testing.T, n *serviceNet, d deployed) {
	t.Helper()
	base := d.Addresses.OpenAI
	if base != n.node0+"/openai/v1" {
		t.Errorf("deploy printed the OpenAI base %q, want node0's %s/openai/v1", base, n.node0)
	}
	code, body := call(t, "POST", base+"/chat/completions", d.AccessKey, chatBody)
	var whole struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage *openaiclient.Usage `json:"usage"`
	}
	if err := json.Unmarshal(body, &whole); code != http.StatusOK || err != nil || whole.Object != "chat.completion" || len(whole.Choices) != 1 ||
		whole.Choices[0].Message.Content == "" || whole.Usage == nil || whole.Usage.CompletionTokens == 0 {
		t.Fatalf("chat completion through node0: %d %s", code, body)
	}
	code, body = call(t, "POST", base+"/chat/completions", d.AccessKey, strings.Replace(chatBody, `"seed":7`, `"seed":7,"stream":true`, 1))
	var streamed strings.Builder
	var usage *openaiclient.Usage
	sc := bufio.NewScanner(bytes.NewReader(body))
	done := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			break
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *openaiclient.Usage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("stream event %q: %v", data, err)
		}
		if len(c.Choices) > 0 {
			streamed.WriteString(c.Choices[0].Delta.Content)
		}
		if c.Usage != nil {
			usage = c.Usage
		}
	}
	if code != http.StatusOK || !done || usage == nil || *usage != *whole.Usage || streamed.String() != whole.Choices[0].Message.Content {
		t.Errorf("streamed completion through node0: %d, done %v, usage %+v (non-streamed %+v), text %q vs %q", code, done, usage, whole.Usage,
			streamed.String(), whole.Choices[0].Message.Content)
	}

	got := openaiclient.Run(t, base, d.AccessKey, "tinylm")
	if got.NonStreamed.Content == "" || got.NonStreamed.Usage == nil || got.Streamed.Content == "" || got.Streamed.Usage == nil || got.Streamed.Chunks < 3 {
		t.Errorf("official client through node0: %+v", got)
	}
	if m := got.MissingModel; m == nil || m.Status != 404 || m.Code != "model_not_found" {
		t.Errorf("official client, unknown model: %+v", m)
	}
	if len(got.Models) != 1 || got.Models[0].ID != "tinylm" {
		t.Errorf("official client, models: %+v", got.Models)
	}

	// Bad input, each its status and an OpenAI error.
	code, body = call(t, "POST", base+"/chat/completions", d.AccessKey, strings.Replace(chatBody, `"tinylm"`, `"no-such-model"`, 1))
	wantOpenAIError(t, "unknown model", 404, "model_not_found", code, body)
	code, body = call(t, "POST", base+"/chat/completions", d.AccessKey, `{"model":"tinylm","messages":`)
	wantOpenAIError(t, "malformed JSON", 400, "", code, body)
	code, body = call(t, "POST", base+"/chat/completions", d.AccessKey, `{"model":"tinylm","messages":[{"role":"user","content":"`+strings.Repeat("a", 5<<20)+`"}]}`)
	wantOpenAIError(t, "oversized body", 413, "request_too_large", code, body)
	code, body = call(t, "POST", base+"/chat/completions", "", chatBody)
	wantOpenAIError(t, "no key", 401, "invalid_api_key", code, body)
	code, body = call(t, "POST", base+"/chat/completions", "sk-gpunet-not-the-key", chatBody)
	wantOpenAIError(t, "wrong key", 401, "invalid_api_key", code, body)

	// A service no provider can take (its ceiling is below every ask):
	// its model exists, no replica is ready, and the answer says so at
	// once.
	lonely := n.deploy(t, n.spec(t, "lonely", `max_price: 0.000001 SYNC/h
budget: 0.01 SYNC
openai: {port: 8000, models: [lonely]}
public: true
`))
	begin := time.Now()
	code, body = call(t, "POST", base+"/chat/completions", "", strings.Replace(chatBody, `"tinylm"`, `"lonely"`, 1))
	wantOpenAIError(t, "no ready replica", 503, "no_replica_ready", code, body)
	if took := time.Since(begin); took > 5*time.Second {
		t.Errorf("no ready replica: answered after %s, want at once", took)
	}
	gpunetJSON(t, &map[string]any{}, "service", "stop", fmt.Sprint(lonely.ID), "--home", n.keyHome, "--node", n.node0)
}

// checkServiceTunnel: `gpunet service connect` opens a local port whose
// connections are tunnelled, as bytes, through node0 and node1 to the
// replica (how an owner runs TLS end to end).
func checkServiceTunnel(t *testing.T, n *serviceNet, d deployed) {
	t.Helper()
	addr, err := validator.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	p := startProc(t, "service connect", "service", "connect", fmt.Sprint(d.ID), "--port", "8000", "--listen", addr, "--home", n.keyHome, "--node", n.node0)
	defer p.kill()
	waitUntil(t, 30*time.Second, "service connect answering on "+addr, func() bool {
		code, _ := call(t, "GET", "http://"+addr+"/health", "", "")
		return code == http.StatusOK
	})
	if code, body := call(t, "POST", "http://"+addr+"/v1/chat/completions", "", chatBody); code != http.StatusOK || !strings.Contains(string(body), "usage") {
		t.Errorf("a completion through the tunnel: %d %s", code, body)
	}
}

// TestServiceBudgetEnds (issue 16): a service whose budget covers about a
// minute is warned before the end (the ledger records it and status says
// so), then stopped when its budget runs out; its owner is charged exactly
// what its replica was paid plus the fee, the rest refunded, and its port
// no longer answers.
func TestServiceBudgetEnds(t *testing.T) {
	parallel(t, weightHeavy)
	// 18 SYNC a core-hour, for the one core that half a core takes: 5000
	// usync a second.
	n := startServiceNet(t, "18sync", "carol")
	before := balance(t, "alice", "--home", n.keyHome, "--node", n.node0)
	d := n.deploy(t, n.spec(t, "short", `max_price: 18 SYNC/h
budget: 0.35 SYNC
`))
	health := fmt.Sprintf("%s/svc/%d/8000/health", n.node0, d.ID)
	waitUntil(t, 120*time.Second, "the service answering", func() bool {
		code, _ := call(t, "GET", health, d.AccessKey, "")
		return code == http.StatusOK
	})
	var s ledger.Service
	waitUntil(t, 120*time.Second, "the budget warning", func() bool {
		s = n.poll(t, d.ID)
		return s.BudgetWarnedAt != 0 || s.Done()
	})
	s = n.status(t, d.ID)
	if s.Done() || s.RunsOutAt == 0 || s.RunsOutAt-s.BudgetWarnedAt > 16 {
		t.Fatalf("no warning before the end: %s %q, warned at %d, runs out at %d", s.State, s.Reason, s.BudgetWarnedAt, s.RunsOutAt)
	}
	text := gpunet(t, "service", "status", fmt.Sprint(d.ID), "--home", n.keyHome, "--node", n.node0)
	if !strings.Contains(strings.ToLower(text.stdout), "warn") || !strings.Contains(text.stdout, "topup") {
		t.Errorf("service status during the warning does not warn and say how to top up:\n%s", text.stdout)
	}
	waitUntil(t, 120*time.Second, "the service stopped by its budget", func() bool {
		s = n.poll(t, d.ID)
		return s.Done()
	})
	s = n.status(t, d.ID)
	if s.State != ledger.ServiceStopped || !strings.Contains(s.Reason, "budget") || s.StoppedAt < s.RunsOutAt-1 {
		t.Fatalf("ended %s %q at %d, want stopped by its budget at %d", s.State, s.Reason, s.StoppedAt, s.RunsOutAt)
	}
	checkServiceCharge(t, n, s, before)
	if s.Refund > 10_000 {
		t.Errorf("refund %d: the budget should have been spent (a second's worth at most left)", s.Refund)
	}
	if code, _ := call(t, "GET", health, d.AccessKey, ""); code != http.StatusNotFound {
		t.Errorf("a stopped service answered %d on its port, want 404", code)
	}
}
