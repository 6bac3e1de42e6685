package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromium returns the path of a Chromium or Chrome binary, or "".
func chromium() string {
	if p := os.Getenv("GPUNET_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// ScreenshotDir is where TestDashboardInBrowser keeps its screenshots:
// $GPUNET_SCREENSHOTS, or gpunet-dashboard-screenshots under the system's
// temp dir. It is not removed after the test.
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("GPUNET_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "gpunet-dashboard-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDashboardInBrowser drives headless Chromium against a real devnet
// (the gpunet binary, three providers): the overview shows the providers;
// a job submitted through the CLI appears on the jobs page and moves to
// succeeded without a reload; the providers table filters with the offers
// query language; and the page logs no console error or exception. It
// keeps screenshots (see screenshotDir). With CI=true a missing Chromium
// fails the test.
func TestDashboardInBrowser(t *testing.T) {
	chrome := chromium()
	if chrome == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no chromium on PATH: CI must run the browser test (.ci/run installs Debian's chromium)")
		}
		t.Skip("no chromium on PATH (apt-get install -y chromium); skipping the browser test outside CI")
	}
	home := t.TempDir()
	_, info := startDevnet(t, home, "--providers", "3", "--block-time", "200ms", "--example=false")

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
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()

	var mu sync.Mutex
	var consoleErrors []string
	if err := chromedp.Listen(ctx, func(ev any) {
		var msg string
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				msg = "console." + string(e.Type) + ": " + strings.Join(parts, " ")
			}
		case *runtime.EventExceptionThrown:
			msg = "exception: " + e.ExceptionDetails.Text
			if ex := e.ExceptionDetails.Exception; ex != nil {
				msg += " " + ex.Description
			}
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError {
				msg = fmt.Sprintf("log (%s): %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL)
			}
		}
		if msg != "" {
			mu.Lock()
			consoleErrors = append(consoleErrors, msg)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}

	shots := screenshotDir(t)
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			buf, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			path := filepath.Join(shots, name)
			t.Logf("screenshot: %s", path)
			return os.WriteFile(path, buf, 0o644)
		})
	}
	// poll waits until the JavaScript expression is true (an expression
	// that throws, reading an element the page is redrawing, is false).
	poll := func(what, expr string, d time.Duration) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			safe := "(() => { try { return (" + expr + "); } catch (e) { return false; } })()"
			if _, err := chromedp.Poll[chromedp.Void](safe, chromedp.WithPollingTimeout(d), chromedp.WithPollingInterval(50*time.Millisecond))(ctx, tg); err != nil {
				snapshot, _ := chromedp.Evaluate[string](`document.getElementById('app').innerText.slice(0, 1500)`)(ctx, tg)
				return fmt.Errorf("waiting for %s (%s): %w\npage: %s", what, expr, err, snapshot)
			}
			return nil
		})
	}
	// hash moves the page to another of its routes, as a click on a link
	// does (no reload).
	hash := func(h string) chromedp.Action[chromedp.Void] {
		return chromedp.Evaluate[chromedp.Void](fmt.Sprintf("location.hash = %q", h))
	}
	eval := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}

	// The overview shows the devnet's three providers, and live updates
	// arrive.
	err := chromedp.Do(ctx,
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, cdplog.Enable, cdp.Empty{})
			return err
		}),
		chromedp.Navigate(info.API+"/"),
		poll("3 providers online", `(document.getElementById('ov-online')||{}).textContent === '3'`, 30*time.Second),
		poll("the live feed", `document.getElementById('live').textContent.includes('block')`, 15*time.Second),
		poll("regions", `['eu','us-east','ap-south'].every(r => document.getElementById('app').innerText.includes(r))`, 10*time.Second),
		poll("a chart", `document.querySelectorAll('.chart svg path').length > 0`, 15*time.Second),
		shot("dashboard-overview.png"),
	)
	if err != nil {
		t.Fatal(err)
	}

	// A job submitted through the CLI appears on the jobs page and moves
	// to succeeded, without a reload: a mark set on the window survives.
	err = chromedp.Do(ctx,
		hash("#/jobs"),
		poll("the jobs page", `document.getElementById('jobs-panel') && document.getElementById('jobs-panel').innerText.includes('No jobs')`, 15*time.Second),
		chromedp.Evaluate[chromedp.Void](`window.__noReload = 'still here'`),
	)
	if err != nil {
		t.Fatal(err)
	}
	jobDone := make(chan cliResult, 1)
	go func() {
		jobDone <- gpunet(t, "job", "run", "../../examples/wordcount/job.yaml", "--from", "alice", "--home", home, "--out", filepath.Join(home, "out"), "--output", "json")
	}()
	// Wait for the page, failing at once (with the CLI's output) if the
	// CLI gives up on the job meanwhile.
	var run *cliResult
	waitPage := func(what, expr string, d time.Duration) {
		t.Helper()
		deadline := time.Now().Add(d)
		for {
			err := chromedp.Do(ctx, poll(what, expr, time.Second))
			if err == nil {
				return
			}
			if run == nil {
				select {
				case r := <-jobDone:
					run = &r
					if r.code != 0 {
						t.Fatalf("job run failed while the page waited for %s:\n%s", what, r)
					}
				default:
				}
			}
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
		}
	}
	waitPage("the job's row", `document.querySelector('tr[data-job]') !== null`, 60*time.Second)
	id := eval(`document.querySelector('tr[data-job]').getAttribute('data-job')`)
	waitPage("the job to succeed", `(document.querySelector('tr[data-job] .state-cell')||{}).textContent === 'succeeded'`, 90*time.Second)
	err = chromedp.Do(ctx,
		poll("no reload", `window.__noReload === 'still here'`, time.Second),
		shot("dashboard-jobs.png"),
	)
	if err != nil {
		t.Fatal(err)
	}
	if run == nil {
		r := <-jobDone
		run = &r
	}
	if r := *run; r.code != 0 || !strings.Contains(r.stdout, `"id": `+id+",") {
		t.Fatalf("job run:\n%s (the page showed job %s)", r, id)
	}
	// Its page: state, timeline, cost.
	err = chromedp.Do(ctx,
		hash("#/job/"+id),
		poll("the job page", `(document.getElementById('job-state')||{}).textContent === 'succeeded'`, 15*time.Second),
		poll("the timeline", `document.querySelectorAll('#job-timeline li').length >= 4`, 5*time.Second),
		shot("dashboard-job.png"),
	)
	if err != nil {
		t.Fatal(err)
	}
	if c := eval(`document.getElementById('job-cost').innerText`); !strings.Contains(c, "Paid to providers") || !strings.Contains(c, "SYNC") {
		t.Errorf("job cost panel: %q", c)
	}

	// The providers table filters with the offers query language.
	rows := `document.querySelectorAll('#providers-table tbody tr').length`
	err = chromedp.Do(ctx,
		hash("#/providers"),
		poll("3 rows", rows+` === 3`, 15*time.Second),
		chromedp.SetValue(chromedp.CSS(`#offer-query`), "region=eu"),
		chromedp.Click(chromedp.CSS(`#offer-apply`)),
		poll("1 row", rows+` === 1 && location.hash.includes('region')`, 15*time.Second),
		shot("dashboard-providers.png"),
	)
	if err != nil {
		t.Fatal(err)
	}
	if region := eval(`document.querySelector('#providers-table tbody tr td:nth-child(7)').textContent`); region != "eu" {
		t.Errorf("filtered row's region = %q", region)
	}
	// Sorting by a column header.
	err = chromedp.Do(ctx,
		hash("#/providers"),
		poll("3 rows", rows+` === 3`, 15*time.Second),
		// The table is redrawn as blocks arrive, header included: click
		// from inside the page, where finding and clicking are one step.
		chromedp.Evaluate[chromedp.Void](`document.querySelector('th[data-sort="price"]').click()`),
		poll("sorted by price", `location.hash.includes('sort=price') && document.querySelector('th[data-sort="price"]').textContent.includes('▲') && `+rows+` === 3`, 10*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}
	prices, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`[...document.querySelectorAll('#providers-table tbody tr td:nth-child(8)')].map(td => parseFloat(td.textContent.replace(/,/g, '')))`))
	if err != nil || len(prices) != 3 || !(prices[0] <= prices[1] && prices[1] <= prices[2]) {
		t.Errorf("prices after sorting: %v (%v)", prices, err)
	}

	// The ledger page lists recent txs, the job's among them (by now its
	// later ones: the grants, commits and reveals of its replicas; agents'
	// liveness answers and challenge txs fill the rest of the list).
	err = chromedp.Do(ctx,
		hash("#/ledger"),
		poll("txs", `document.getElementById('txs-table') && /submit_job|grant_key|start_job|commit_result|reveal_result/.test(document.getElementById('txs-table').innerText)`, 15*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}

	// The other pages render: a provider, an account, a block.
	err = chromedp.Do(ctx,
		hash("#/account/"+info.addr(t, "alice")),
		poll("the account page", `(document.getElementById('account-balance')||{}).textContent.includes('SYNC')`, 15*time.Second),
		hash("#/block/1"),
		poll("block 1", `document.getElementById('app').innerText.includes('Block 1')`, 10*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}
	providerAddr, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch('/v1/providers?limit=1').then(r => r.json()).then(p => p.providers[0].address)`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	err = chromedp.Do(ctx,
		hash("#/provider/"+providerAddr),
		poll("the provider page", `(document.getElementById('provider-status')||{}).textContent.startsWith('online')`, 10*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}

	// A job submitted from the dashboard, with the node's API token and
	// a key of its keyring, runs to the end.
	wasm, _ := filepath.Abs("../../examples/wordcount/wordcount.wasm")
	input, _ := filepath.Abs("../../examples/wordcount/input.txt")
	err = chromedp.Do(ctx,
		hash("#/submit"),
		poll("the submit form", `document.getElementById('submit-token') !== null`, 10*time.Second),
		chromedp.SetValue(chromedp.CSS(`#submit-token`), info.APIToken),
		chromedp.Click(chromedp.CSS(`#submit-load-keys`)),
		poll("the keys", `[...document.querySelectorAll('#submit-key option')].some(o => o.value === 'bob')`, 10*time.Second),
		chromedp.SetValue(chromedp.CSS(`#submit-key`), "bob"),
		chromedp.SetUploadFiles(chromedp.CSS(`#submit-files`), []string{wasm, input}),
		chromedp.Click(chromedp.CSS(`#submit-button`)),
		poll("the submitted job's page", `location.hash.startsWith('#/job/') && location.hash !== '#/job/`+id+`'`, 30*time.Second),
		poll("the submitted job to succeed", `(document.getElementById('job-state')||{}).textContent === 'succeeded'`, 90*time.Second),
		shot("dashboard-submitted-job.png"),
	)
	if err != nil {
		t.Fatal(err)
	}
	if owner := eval(`document.querySelector('#job-cost a[href^="#/account/"]').getAttribute('href').slice(10)`); owner != info.addr(t, "bob") {
		t.Errorf("the dashboard's job is owned by %s, want bob %s", owner, info.addr(t, "bob"))
	}

	mu.Lock()
	defer mu.Unlock()
	if len(consoleErrors) > 0 {
		t.Errorf("the page logged %d console error(s):\n%s", len(consoleErrors), strings.Join(consoleErrors, "\n"))
	}
}
