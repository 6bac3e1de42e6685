package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/dashboard"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/offers"
)

// TestPageNeverParsesHTML: the page builds every element with h() and
// text nodes (textContent), so nothing the API returns (a provider's
// label, a job's name, a reason) is ever parsed as HTML. It uses no
// HTML-parsing sink at all.
func TestPageNeverParsesHTML(t *testing.T) {
	sinks := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|DOMParser|createContextualFragment|srcdoc|\beval\(|new Function`)
	for _, f := range []string{"static/app.js", "static/text.js"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if m := sinks.FindAll(b, -1); m != nil {
			t.Errorf("%s uses %q: build elements with h() (text nodes) instead", f, m)
		}
	}
	app, err := os.ReadFile("static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	// A label is drawn through T.labelText inside h(): quoted, as text.
	if !regexp.MustCompile(`h\('bdi', \{class: 'plabel', title: T\.LABEL_TITLE\}, T\.labelText\(l\)\)`).Match(app) {
		t.Error("app.js: provLabel no longer draws the label with h('bdi', …, T.labelText(l))")
	}
}

// TestProviderLabelsInBrowser drives headless Chromium over the page
// against a stub of the node's API whose providers carry labels (issue
// 33), one of them markup the ledger would refuse (the page must not rely
// on that): the providers list, a provider's page and a job's replicas
// show each label in quotes beside the provider's short address, as
// text; the job page, which loads no list of providers, gets the labels
// from the one list the page loads at start, not from a request per
// provider. Skipped without Chromium, except under CI=true.
func TestProviderLabelsInBrowser(t *testing.T) {
	chrome := ""
	for _, name := range []string{os.Getenv("GPUNET_CHROMIUM"), "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			chrome = p
			break
		}
	}
	if chrome == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no chromium on PATH: CI must run the browser tests (.ci/run installs Debian's chromium)")
		}
		t.Skip("no chromium on PATH (apt-get install -y chromium); skipping the browser test outside CI")
	}

	a, b := address.Address{0xa1, 1}.String(), address.Address{0xb2, 2}.String()
	const hostile = `<img src=x onerror="window.__pwned=1">`
	offer := func(addr, label string) apiwire.ProviderOffer {
		return apiwire.ProviderOffer{Offer: offers.Offer{Address: addr, Label: label, Online: true, GPU: "cpu", CPU: 8, RAM: 16, Region: "eu", Executor: []string{"wasm"}, MaxJobs: 2}, Schedulable: true}
	}
	list := []apiwire.ProviderOffer{offer(a, hostile), offer(b, "")}
	rec := &ledger.Provider{Address: address.Address{0xa1, 1}, Online: true}
	rec.Label, rec.Region, rec.Executors, rec.MaxJobs = hostile, "eu", []string{"wasm"}, 2
	rec.Inventory.CPUCores, rec.Measured.Device = 8, "cpu"
	job := &ledger.Job{ID: 1, Owner: address.Address{0xc3, 3}, State: ledger.JobRunning,
		Spec:        ledger.JobSpec{Name: "wordcount", Executor: "wasm", Verification: "none"},
		Assignments: []ledger.Assignment{{Provider: address.Address{0xa1, 1}}, {Provider: address.Address{0xb2, 2}}}}

	var mu sync.Mutex
	hits := map[string]int{}
	mux := http.NewServeMux()
	d := dashboard.New(t.Context(), dashboard.Options{Home: t.TempDir(), API: func() string { return "" }})
	for _, r := range d.Routes() {
		mux.Handle(r.Method+" "+r.Path, r.Handler)
	}
	serve := func(pattern string, body func(r *http.Request) any) {
		mux.HandleFunc("GET "+pattern, func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			hits[pattern]++
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(body(r))
		})
	}
	serve("/v1/providers", func(*http.Request) any { return apiwire.ProviderList{Providers: list, Height: 5} })
	serve("/v1/offers", func(*http.Request) any { return apiwire.OfferList{Offers: list, Total: len(list), Height: 5} })
	serve("/v1/providers/{addr}", func(*http.Request) any {
		return apiwire.ProviderBody{Offer: list[0].Offer, Schedulable: true, Record: rec, Unbonding: []ledger.Unbonding{}, Height: 5,
			// The evidence's words are the provider's too (issue 31).
			Attestation: apiwire.ProviderAttestation{State: apiwire.AttestValid, Kind: "tdx", Measurement: "ab", TCBStatus: hostile, Key: "age1x", Height: 4, Expiry: 1_700_000_000}}
	})
	serve("/v1/providers/{addr}/jobs", func(*http.Request) any { return map[string]any{"jobs": []any{}} })
	serve("/v1/providers/{addr}/history", func(*http.Request) any { return map[string]any{"events": []any{}} })
	serve("/v1/providers/{addr}/services", func(*http.Request) any { return map[string]any{"services": []any{}} })
	serve("/v1/providers/{addr}/delegations", func(*http.Request) any {
		return apiwire.TargetDelegationsBody{TargetDelegations: ledger.TargetDelegations{Target: ledger.Target{Kind: ledger.TargetProvider, Address: rec.Address}, Delegations: []ledger.DelegationInfo{}}, Height: 5}
	})
	serve("/v1/jobs/{id}", func(*http.Request) any { return job })
	serve("/v1/jobs/{id}/timeline", func(*http.Request) any { return map[string]any{"steps": []any{}, "observed": []any{}} })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true), // CI runs as root
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1400, 1000),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelCtx := chromedp.NewContext(actx)
	defer cancelCtx()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	poll := func(what, expr string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			safe := "(() => { try { return (" + expr + "); } catch (e) { return false; } })()"
			if _, err := chromedp.Poll[chromedp.Void](safe, chromedp.WithPollingTimeout(20*time.Second), chromedp.WithPollingInterval(50*time.Millisecond))(ctx, tg); err != nil {
				page, _ := chromedp.Evaluate[string](`document.getElementById('app').innerText.slice(0, 1500)`)(ctx, tg)
				return fmt.Errorf("waiting for %s (%s): %w\npage: %s", what, expr, err, page)
			}
			return nil
		})
	}
	eval := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}
	short := func(s string) string { return s[:10] + "…" + s[len(s)-6:] }
	quoted := "\u201c" + hostile + "\u201d"
	js := func(s string) string { q, _ := json.Marshal(s); return string(q) }

	// A job's page loads no list of providers: its replicas get their
	// labels from the list the page loaded once at start.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/#/job/1"),
		poll("the replicas table", `document.querySelector('#job-replicas tr[data-provider="`+a+`"]') !== null`),
		poll("the label of a's replica", `document.querySelector('#job-replicas tr[data-provider="`+a+`"] .plabel') !== null`),
	); err != nil {
		t.Fatal(err)
	}
	cell := `document.querySelector('#job-replicas tr[data-provider="` + a + `"] td')`
	if got := eval(cell + `.querySelector('a[data-address]').textContent`); got != short(a) {
		t.Errorf("a's replica is linked as %q, want its short address %q", got, short(a))
	}
	if got := eval(cell + `.querySelector('.plabel').textContent`); got != quoted {
		t.Errorf("a's replica label %q, want %q", got, quoted)
	}
	if got := eval(cell + `.querySelector('.plabel').title`); !strings.Contains(got, "set by the provider itself") {
		t.Errorf("the label's title %q does not say the provider set it", got)
	}
	if got := eval(`String(document.querySelectorAll('#job-replicas tr[data-provider="` + b + `"] .plabel').length)`); got != "0" {
		t.Errorf("b, which set no label, shows %s", got)
	}
	mu.Lock()
	if hits["/v1/providers"] != 1 || hits["/v1/providers/{addr}"] != 0 {
		t.Errorf("the job page asked for the providers list %d times and for a provider %d times; want the list once, no provider", hits["/v1/providers"], hits["/v1/providers/{addr}"])
	}
	mu.Unlock()

	// The providers list: the label beside the short address.
	if err := chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/providers'`),
		poll("the providers table", `document.querySelectorAll('#providers-table tbody tr').length === 2`),
		poll("a's label", `document.querySelector('#providers-table tr[data-address="`+a+`"] td .plabel') !== null`),
	); err != nil {
		t.Fatal(err)
	}
	row := `document.querySelector('#providers-table tr[data-address="` + a + `"] td')`
	if got := eval(row + `.textContent`); got != short(a)+quoted {
		t.Errorf("providers table: a's cell reads %q, want %q", got, short(a)+quoted)
	}

	// A provider's page: in its heading beside the address, and in its
	// offer.
	if err := chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/provider/`+a+`'`),
		poll("the provider's label", `document.getElementById('provider-label') !== null`),
	); err != nil {
		t.Fatal(err)
	}
	if got := eval(`document.querySelector('h1 .plabel').textContent`); got != quoted {
		t.Errorf("provider page heading: label %q, want %q", got, quoted)
	}
	if got := eval(`document.querySelector('h1 .mono').textContent`); got != a {
		t.Errorf("provider page heading: address %q, want %q", got, a)
	}
	if got := eval(`document.getElementById('provider-label').textContent`); !strings.HasPrefix(got, quoted+" set by the provider itself") {
		t.Errorf("provider page: label %q", got)
	}

	// Never parsed as HTML: the markup is text, no image was made, its
	// handler never ran.
	if got := eval(`document.getElementById('provider-tee').textContent`); !strings.HasPrefix(got, "attested until 2023-11-14T22:13:20Z: tdx evidence of block 4") || !strings.Contains(got, hostile) {
		t.Errorf("provider-tee %q: want the attestation, its TCB status as text", got)
	}
	if got := eval(`String(document.querySelectorAll('#app img').length) + ' ' + String(window.__pwned) + ' ' + String(document.body.innerText.includes(` + js(hostile) + `))`); got != "0 undefined true" {
		t.Errorf("images, __pwned, markup shown as text: %s; want 0 undefined true", got)
	}
}
