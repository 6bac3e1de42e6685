package deploy

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/gpunet/gpunet/internal/cli"
	"github.com/gpunet/gpunet/internal/provider"
	"github.com/gpunet/gpunet/internal/validator"
)

// TestAlertRules: promtool accepts the rules and the example
// configuration, and the rules' unit tests (alerts_test.yml) pass: each
// alert fires on the series that should raise it and not on a healthy
// neighbour.
func TestAlertRules(t *testing.T) {
	promtool := requireTool(t, "promtool", "prometheus")
	for _, args := range [][]string{
		{"check", "rules", "alerts.yml"},
		{"check", "config", "prometheus.yml"},
		{"test", "rules", "alerts_test.yml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "prometheus"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// ruleFile is what the tests read of a Prometheus rule file.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert  string `yaml:"alert"`
			Record string `yaml:"record"`
			Expr   string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestEveryAlertTested: every alert of alerts.yml has a case in
// alerts_test.yml that expects it to fire, so none ships untried.
func TestEveryAlertTested(t *testing.T) {
	var rules ruleFile
	readYAML(t, filepath.Join("prometheus", "alerts.yml"), &rules)
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	readYAML(t, filepath.Join("prometheus", "alerts_test.yml"), &tests)
	fired := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fired[a.Alertname] = true
			}
		}
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if !fired[r.Alert] {
				t.Errorf("alert %s (group %s): no case of alerts_test.yml expects it to fire", r.Alert, g.Name)
			}
		}
	}
	if n == 0 {
		t.Fatal("alerts.yml has no alerts")
	}
}

// promqlIgnored are PromQL's keywords, which read like metric names.
var promqlIgnored = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
	"group_left", "group_right", "inf", "nan", "Inf", "NaN"}

var (
	promqlStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promqlMatchers = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promqlClauses  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlTokens   = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*|[0-9][0-9A-Za-z_.]*|\S`)
)

// metricNames returns the metric names a PromQL expression selects: its
// identifiers that are not functions (followed by "("), keywords, label
// names (in braces or a by/without/on/ignoring/group clause) or numbers
// and durations.
func metricNames(expr string) []string {
	expr = promqlStrings.ReplaceAllString(expr, `""`)
	expr = promqlMatchers.ReplaceAllString(expr, " ")
	expr = promqlClauses.ReplaceAllString(expr, " ")
	toks := promqlTokens.FindAllString(expr, -1)
	var names []string
	for i, tok := range toks {
		c := tok[0]
		if !(c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') || slices.Contains(promqlIgnored, tok) {
			continue
		}
		if i+1 < len(toks) && toks[i+1] == "(" {
			continue // a function or an aggregation
		}
		if !slices.Contains(names, tok) {
			names = append(names, tok)
		}
	}
	return names
}

func TestMetricNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`gpunet_last_block_age_seconds > 60`, []string{"gpunet_last_block_age_seconds"}},
		{`sum by (instance, outcome) (increase(gpunet_challenges_total{kind="hardware", outcome=~"failed|missed"}[1h])) > 0`, []string{"gpunet_challenges_total"}},
		{`predict_linear(node_filesystem_avail_bytes{fstype!~"tmpfs"}[6h], 24 * 3600) < 0`, []string{"node_filesystem_avail_bytes"}},
		{`a / on (instance) group_left (job) b unless c offset 5m and bool d`, []string{"a", "b", "c", "d"}},
		{`rate(x_total{le="a{b}"}[5m:1m])`, []string{"x_total"}},
		{`sum(rate(h_bucket[5m])) by (le)`, []string{"h_bucket"}},
	} {
		if got := metricNames(c.expr); !slices.Equal(got, c.want) {
			t.Errorf("metricNames(%q) = %q, want %q", c.expr, got, c.want)
		}
	}
}

// notGpunet are the metrics the rules use that gpunet does not export,
// each with where it comes from.
var notGpunet = map[string]string{
	"up":                          "Prometheus's own: 1 when the last scrape of the target worked",
	"node_filesystem_avail_bytes": "node_exporter's filesystem collector (Debian: prometheus-node-exporter)",
	"node_filesystem_size_bytes":  "node_exporter's filesystem collector (Debian: prometheus-node-exporter)",
}

// TestAlertMetricsExported: every metric the rules use is one a gpunet
// process exports, so that a renamed metric cannot leave an alert that
// never fires. The node's names are scraped from a real node (gpunet init,
// then gpunet node, as the systemd unit runs it); the provider agent's are
// the descriptions of the metrics provider.NewMetrics registers (an
// agent's labelled series appear only once they have a value).
func TestAlertMetricsExported(t *testing.T) {
	exported := nodeMetricNames(t)
	for n := range providerMetricNames(t) {
		exported[n] = true
	}
	for _, want := range []string{"gpunet_last_block_age_seconds", "gpunet_p2p_peers", "gpunet_provider_challenges_total"} {
		if !exported[want] {
			t.Fatalf("%s is not among the %d names gathered: the gathering is broken", want, len(exported))
		}
	}
	var rules ruleFile
	readYAML(t, filepath.Join("prometheus", "alerts.yml"), &rules)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			for _, n := range metricNames(r.Expr) {
				base := n
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(n, suffix); ok && exported[b] {
						base = b
					}
				}
				if !exported[base] && notGpunet[n] == "" {
					t.Errorf("%s%s uses %s, which neither the node nor the provider agent exports (and notGpunet does not list)", r.Alert, r.Record, n)
				}
			}
		}
	}
}

// nodeMetricNames runs a real node and returns the metric families its
// /metrics serves.
func nodeMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	home := t.TempDir()
	run := func(ctx context.Context, args ...string) (int, string) {
		var out strings.Builder
		code := cli.Run(ctx, args, &out, &out)
		return code, out.String()
	}
	if code, out := run(t.Context(), "init", "--home", home, "--validator-stake", "0", "--block-time", "100ms", "--chain-id", "deploy-metrics"); code != 0 {
		t.Fatalf("gpunet init: exit %d: %s", code, out)
	}
	cfg, err := validator.LoadConfig(home)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan string, 1)
	go func() {
		_, out := run(ctx, "node", "--home", home)
		done <- out
	}()
	defer func() {
		stop()
		<-done
	}()
	url := cfg.APIURL() + "/metrics"
	deadline := time.Now().Add(60 * time.Second)
	for {
		names, err := scrape(ctx, url)
		// The consensus metrics come once the node runs, block_height
		// with its first block.
		if err == nil && names["gpunet_p2p_peers"] && names["gpunet_block_height"] {
			return names
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("no complete /metrics from the node at %s within a minute (last: %v)\n%s", url, err, <-done)
		}
		select {
		case out := <-done:
			done <- out
			t.Fatalf("gpunet node exited:\n%s", out)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// scrape returns the metric families at url.
func scrape(ctx context.Context, url string) (map[string]bool, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, &httpError{resp.Status, string(b)}
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for n := range fams {
		names[n] = true
	}
	return names, nil
}

type httpError struct{ status, body string }

func (e *httpError) Error() string { return e.status + ": " + e.body }

// describer is a prometheus.Registerer that keeps the names of the metrics
// registered on it.
type describer struct{ names map[string]bool }

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (d *describer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	for desc := range ch {
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			d.names[m[1]] = true
		}
	}
	return nil
}

func (d *describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		d.Register(c)
	}
}

func (d *describer) Unregister(prometheus.Collector) bool { return false }

// providerMetricNames returns the names of the provider agent's metrics.
func providerMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	d := &describer{names: map[string]bool{}}
	provider.NewMetrics(d)
	if len(d.names) == 0 {
		t.Fatal("provider.NewMetrics registered no described metric")
	}
	return d.names
}
