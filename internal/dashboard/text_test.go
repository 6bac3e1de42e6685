package dashboard_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// nodeJS returns the path of Node.js, which runs the page's pure
// functions outside a browser; without it the test skips, except under
// CI=true (.ci/run installs nodejs), where it fails.
func nodeJS(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no node on PATH: CI must run the dashboard's text tests (.ci/run installs nodejs)")
		}
		t.Skip("no node on PATH (apt-get install -y nodejs); skipping the dashboard's text tests outside CI")
	}
	return p
}

// runText calls functions of static/text.js (window.gpunetText) in Node,
// each {fn, args}, and returns their results decoded from JSON.
func runText(t *testing.T, calls []textCall) []any {
	t.Helper()
	src, err := filepath.Abs("static/text.js")
	if err != nil {
		t.Fatal(err)
	}
	const harness = `
const fs = require('fs'), vm = require('vm');
const ctx = {};
vm.runInNewContext(fs.readFileSync(process.argv[1], 'utf8'), ctx);
const calls = JSON.parse(fs.readFileSync(0, 'utf8'));
process.stdout.write(JSON.stringify(calls.map(c => {
  const v = ctx.gpunetText[c.fn](...c.args);
  return v === undefined ? null : v;
})));
`
	in, err := json.Marshal(calls)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), nodeJS(t), "-e", harness, src)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	var got []any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node printed %q: %v", out, err)
	}
	return got
}

type textCall struct {
	Fn   string `json:"fn"`
	Args []any  `json:"args"`
}

// asJSON is v as JSON decodes it (numbers float64, maps map[string]any),
// to compare with what Node returned.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPageText holds the dashboard's words and figures to what the API's
// records mean (issue 33): the verdict line says what the spot audit
// lottery did (never that an audit was drawn when it did not pick the
// job); prices are shown in a unit in which they do not read 0; the price
// history of a model has its providers' median ask and each tier's index
// price; an account's spend sums its jobs and services; names come from
// the node's keyring and this browser's labels, which win.
func TestPageText(t *testing.T) {
	type m = map[string]any
	a1, a2, a3 := "gpu1aaa", "gpu1bbb", "gpu1ccc"
	one := []m{{"provider": a1, "outcome": "majority", "result": m{}}}
	cases := []struct {
		name string
		call textCall
		want any
	}{
		{"lottery held, job not picked",
			textCall{"verdictText", []any{m{"verdict": "unverified", "audit_drawn": true, "assignments": one, "spec": m{"verification": "spot"}}, true}},
			"accepted unverified: one replica; the audit lottery did not pick this job"},
		{"picked, audit replica not placed",
			textCall{"verdictText", []any{m{"verdict": "unverified", "audit_drawn": true, "dropped": m{"code": "extra_not_placed"}, "audit_dropped": "no provider could take the extra replica in time", "assignments": one, "spec": m{"verification": "spot"}}, true}},
			"accepted unverified: the audit lottery picked this job, but its audit replica did not run (no provider could take the extra replica in time)"},
		{"picked, ran, agreed",
			textCall{"verdictText", []any{m{"verdict": "validated", "audit_drawn": true, "assignments": []m{{"provider": a1, "outcome": "majority"}, {"provider": a2, "outcome": "majority", "extra": true}}, "spec": m{"verification": "spot"}}, true}},
			"validated: 2 of 2 replicas agree · the audit lottery picked this job"},
		{"picked, one outvoted and slashed",
			textCall{"verdictText", []any{m{"verdict": "validated", "audit_drawn": true, "assignments": []m{{"provider": a1, "outcome": "minority", "slashed": 5}, {"provider": a2, "outcome": "majority", "extra": true}, {"provider": a3, "outcome": "majority", "extra": true}}, "spec": m{"verification": "spot"}}, true}},
			"validated: 2 of 3 replicas agree · the audit lottery picked this job · 1 replica(s) outvoted, slashed 5 usync in all"},
		{"full: no lottery",
			textCall{"verdictText", []any{m{"verdict": "validated", "assignments": []m{{"provider": a1, "outcome": "majority"}, {"provider": a2, "outcome": "majority"}}, "spec": m{"verification": "full"}}, true}},
			"validated: 2 of 2 replicas agree"},
		{"running, lottery not picked",
			textCall{"verdictText", []any{m{"audit_drawn": true, "assignments": []m{{"provider": a1, "commitment": "x"}}, "spec": m{"verification": "spot"}}, false}},
			"waiting for 0 of 1 replica result(s) · the audit lottery did not pick this job"},
		{"a devnet's index (1 usync) in usync", textCall{"priceScale", []any{[]any{1, 0.6, 1.5}}}, m{"div": 1, "unit": "usync", "digits": 2}},
		{"a CPU ask (0.02 SYNC) in SYNC", textCall{"priceScale", []any{[]any{1, 20000}}}, m{"div": 1e6, "unit": "SYNC", "digits": 4}},
		{"no prices", textCall{"priceScale", []any{[]any{}}}, m{"div": 1, "unit": "usync", "digits": 2}},
		{"cpu's unit", textCall{"unitName", []any{"cpu"}}, "core"},
		{"a GPU model's unit", textCall{"unitName", []any{"RTX_4090"}}, "GPU"},
		{"price history of a model",
			textCall{"modelHistory", []any{
				m{"class": "cpu", "prices": []m{{"tier": "spot", "factor_ppm": 600000}, {"tier": "on-demand", "factor_ppm": 1000000}},
					"history": []m{{"epoch": 1, "height": 20, "index_micro": 1000000}, {"epoch": 2, "height": 40, "index_micro": 2000000}}},
				[]m{{"height": 19, "median_price": m{"cpu": 0.02}}, {"height": 21, "median_price": m{"RTX_4090": 1}}, {"height": 39, "median_price": m{"cpu": 0.025}}},
			}},
			[]m{
				{"name": "median ask", "points": [][]float64{{19, 20000}, {39, 25000}}},
				{"name": "spot index", "points": [][]float64{{20, 0.6}, {40, 1.2}}},
				{"name": "on-demand index", "points": [][]float64{{20, 1}, {40, 2}}},
			}},
		{"an account's spend",
			textCall{"spend", []any{
				[]m{{"cost": 100, "fee": 5, "refund": 895, "escrow": 0}, {"cost": 10, "fee": 1, "escrow": 989}},
				[]m{{"cost": 1000, "fee": 50, "refund": 0, "escrow": 3950}},
			}},
			m{"jobs": 2, "services": 1, "paid": 1110, "fees": 56, "refunded": 895, "escrow": 4939, "spent": 1166}},
		{"a provider's label, quoted as its own words", textCall{"labelText", []any{"Acme GPUs #2"}}, "\u201cAcme GPUs #2\u201d"},
		{"markup in a label stays text", textCall{"labelText", []any{"<b>x</b>"}}, "\u201c<b>x</b>\u201d"},
		{"no label", textCall{"labelText", []any{""}}, ""},
		{"a provider never attested", textCall{"attestationText", []any{m{"state": "none", "as_of": 5}}}, "not attested: trust: tee jobs are not placed on it"},
		{"an attested provider",
			textCall{"attestationText", []any{m{"state": "attested", "kind": "sev-snp", "measurement": "ab12", "tcb_status": "UpToDate", "key": "age1xyz", "height": 42, "expiry": 1700000000, "as_of": 1699999000}}},
			"attested until 2023-11-14T22:13:20Z: sev-snp evidence of block 42 · measurement ab12 · TCB UpToDate · key age1xyz"},
		{"an expired attestation",
			textCall{"attestationText", []any{m{"state": "expired", "kind": "tdx", "measurement": "cd", "key": "age1xyz", "height": 7, "expiry": 1700000000, "as_of": 1700000001}}},
			"expired at 2023-11-14T22:13:20Z (attests again to take trust: tee jobs): tdx evidence of block 7 · measurement cd · TCB not given · key age1xyz"},
		{"markup in evidence fields stays text",
			textCall{"attestationText", []any{m{"state": "attested", "kind": "tdx", "measurement": "<img>", "tcb_status": "<b>", "key": "k", "height": 1, "expiry": 0}}},
			"attested until 1970-01-01T00:00:00Z: tdx evidence of block 1 · measurement <img> · TCB <b> · key k"},
		{"no attested GPU", textCall{"gpuAttestationText", []any{nil}}, "none: its GPU identities are self-reported"},
		{"attested GPUs",
			textCall{"gpuAttestationText", []any{[]m{{"id": "41431D480FE5E87274", "uuid": "GPU-1", "expiry": 1700000000, "state": "attested"}, {"id": "AB", "uuid": "<b>", "mode": "PPCIE", "cc": "on", "expiry": 0, "state": "expired"}}}},
			"GPU 41431D480FE5E87274 as GPU-1 · until 2023-11-14T22:13:20Z; GPU AB as <b> (PPCIE) · CC on (NVML's word, not signed) · expired at 1970-01-01T00:00:00Z"},
		{"labels from a providers list: set, kept, removed",
			textCall{"providerLabels", []any{m{a1: "old", a3: "kept"}, []m{{"address": a1, "label": "Acme"}, {"address": a2}, {"label": "no address"}}}},
			m{a1: "Acme", a3: "kept"}},
		{"a label removed when its provider is listed without one",
			textCall{"providerLabels", []any{m{a1: "gone"}, []m{{"address": a1, "label": ""}}}},
			m{}},
		{"names: keyring's, then this browser's",
			textCall{"labels", []any{[]m{{"name": "alice", "address": a1}, {"name": "provider-1", "address": a2}}, m{a2: "my box", a3: ""}}},
			m{a1: "alice", a2: "my box"}},
	}
	calls := make([]textCall, len(cases))
	for i, c := range cases {
		calls[i] = c.call
	}
	got := runText(t, calls)
	if len(got) != len(cases) {
		t.Fatalf("%d results for %d calls", len(got), len(cases))
	}
	for i, c := range cases {
		if want := asJSON(t, c.want); !reflect.DeepEqual(got[i], want) {
			t.Errorf("%s: %s:\n got %#v\nwant %#v", c.name, c.call.Fn, got[i], want)
		}
	}
}

// TestPageWords: no sentence on the page says that an audit was drawn
// (the ledger's audit_drawn says only that the lottery was held), and the
// jobs table's reason wraps in its cell instead of running past the
// page's 1,400 px, where it was cut off (issue 33).
func TestPageWords(t *testing.T) {
	for _, f := range []string{"static/app.js", "static/text.js"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("audit replica was drawn")) || bytes.Contains(b, []byte("not audited this time")) {
			t.Errorf("%s still says an audit was drawn, or not audited this time, from audit_drawn alone", f)
		}
	}
	css, err := os.ReadFile("static/app.css")
	if err != nil {
		t.Fatal(err)
	}
	rule := regexp.MustCompile(`(?m)^td\.reason\s*\{([^}]*)\}`).FindSubmatch(css)
	if rule == nil || !strings.Contains(string(rule[1]), "white-space: normal") {
		t.Errorf("app.css: td.reason = %q, want a rule with white-space: normal (the jobs table's .reason cell wraps)", rule)
	}
}
