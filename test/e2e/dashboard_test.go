package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/gpunet/gpunet/internal/ledger"
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
	parallel(t, weightHeavy)
	chrome := chromium()
	if chrome == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no chromium on PATH: CI must run the browser test (.ci/run installs Debian's chromium)")
		}
		t.Skip("no chromium on PATH (apt-get install -y chromium); skipping the browser test outside CI")
	}
	home := t.TempDir()
	// The third provider (region ap-south; as the faulty one it asks the
	// least, so jobs go to it first) commits wrong results: the job page, the provider page and the ledger show it
	// outvoted and slashed.
	// --registry: the service example's image and spec (checkServicesShown).
	_, info := startDevnet(t, home, "--providers", "3", "--faulty", "1", "--block-time", "200ms", "--example=false", "--registry")

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
	ctx, cancel := context.WithTimeout(ctx, 7*time.Minute)
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
	// evalAwait is eval for an expression that may be a promise (a fetch):
	// its value once it settles.
	evalAwait := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
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
	checkJobLogAndOutputs(t, ctx, evalAwait, poll, id, home, info.APIToken)

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

	faulty := checkSlashShown(t, ctx, evalAwait, poll, hash, shot, home)
	checkLedgerFilters(t, ctx, evalAwait, poll, hash)
	checkAccountAndPrices(t, ctx, evalAwait, poll, hash, shot, info.addr(t, "alice"))
	ckpt := checkCheckpointsShown(t, ctx, eval, poll, hash, home)
	svc := checkServicesShown(t, ctx, eval, poll, hash, shot, home)
	checkNarrow(t, ctx, poll, hash, shot, map[string]string{
		"#/job/" + ckpt:                      `document.querySelectorAll('#job-checkpoints-table tbody tr').length >= 1`,
		"#/":                                 `document.getElementById('ov-online').textContent === '3'`,
		"#/providers":                        `document.querySelectorAll('#providers-table tbody tr').length === 3`,
		"#/jobs":                             `document.querySelectorAll('tr[data-job]').length >= 2`,
		"#/job/" + id:                        `document.getElementById('job-replicas') !== null && document.getElementById('job-log').textContent.includes('wordcount:')`,
		"#/provider/" + faulty:               `document.querySelector('#provider-history tr.slashed') !== null`,
		"#/ledger?type=submit_job":           `document.querySelectorAll('#txs-table tbody tr').length >= 2`,
		"#/block/2":                          `document.getElementById('app').innerText.includes('Block 2')`,
		"#/account/" + info.addr(t, "alice"): `(document.getElementById('account-balance')||{}).textContent.includes('SYNC')`,
		"#/submit":                           `document.getElementById('submit-spec') !== null`,
		"#/market":                           `document.querySelectorAll('#market-classes tbody tr').length >= 1`,
		"#/services?owner=" + info.addr(t, "alice"): `document.querySelector('tr[data-service="` + svc + `"]') !== null`,
		"#/service/" + svc:                          `(document.getElementById('service-state')||{}).textContent === 'stopped'`,
	})

	mu.Lock()
	defer mu.Unlock()
	if len(consoleErrors) > 0 {
		t.Errorf("the page logged %d console error(s):\n%s", len(consoleErrors), strings.Join(consoleErrors, "\n"))
	}
}

type (
	pollFunc = func(what, expr string, d time.Duration) chromedp.Action[chromedp.Void]
	hashFunc = func(h string) chromedp.Action[chromedp.Void]
	shotFunc = func(name string) chromedp.Action[chromedp.Void]
	evalFunc = func(expr string) string // the expression's value, a promise's once settled
)

// checkJobLogAndOutputs: on a finished job's page, before the page has
// the node's API token, the log panel asks for it and gives the command
// that prints the log; with the token, it shows the log decrypted with the
// owner's key (alice, of the devnet's keyring), and the outputs panel's
// command, run as shown, fetches the outputs.
func checkJobLogAndOutputs(t *testing.T, ctx context.Context, eval evalFunc, poll pollFunc, id, home, token string) {
	t.Helper()
	err := chromedp.Do(ctx,
		poll("the log panel asking for the token", `document.getElementById('log-token') !== null`, 10*time.Second),
		poll("the relay's note", `document.getElementById('job-log-note').textContent.length > 0`, 10*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := eval(`document.getElementById('job-logs-cmd').textContent`), "gpunet job logs "+id+" --from KEY"; got != want {
		t.Errorf("log command before the token: %q, want %q", got, want)
	}
	err = chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(`#log-token`), token),
		chromedp.Click(chromedp.CSS(`#log-show`)),
		poll("the decrypted log", `document.getElementById('job-log').textContent.includes('wordcount: ')`, 15*time.Second),
		poll("alice's name in the commands", `document.getElementById('job-get-cmd').textContent.includes('--from alice')`, 5*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}
	if note := eval(`document.getElementById('job-log-note').textContent`); !strings.Contains(note, "from the delivered result") || !strings.Contains(note, "alice") {
		t.Errorf("log note: %q", note)
	}
	if got, want := eval(`document.getElementById('job-logs-cmd').textContent`), "gpunet job logs "+id+" --from alice"; got != want {
		t.Errorf("log command: %q, want %q", got, want)
	}
	// The sealed archive's link serves the blob.
	if st := eval(`fetch(document.getElementById('job-output-blob').getAttribute('href'), {method: 'HEAD'}).then(r => String(r.status))`); st != "200" {
		t.Errorf("the sealed outputs' link: HTTP %s", st)
	}
	// The command the page shows works as shown (in the devnet's home).
	cmd := strings.Fields(eval(`document.getElementById('job-get-cmd').textContent`))
	if len(cmd) < 3 || cmd[0] != "gpunet" || cmd[1] != "job" || cmd[2] != "get" {
		t.Fatalf("outputs command %q", cmd)
	}
	out := filepath.Join(t.TempDir(), "got")
	args := append(cmd[1:], "--home", home)
	for i, a := range args {
		if a == "job-"+id {
			args[i] = out // --out job-ID, here in the test's temp dir
		}
	}
	if r := gpunet(t, args...); r.code != 0 {
		t.Fatalf("the page's command: %s", r)
	}
	if b, err := os.ReadFile(filepath.Join(out, "out", "counts.txt")); err != nil || !strings.Contains(string(b), "words") {
		t.Errorf("outputs fetched with the page's command: %q %v", b, err)
	}
}

// slashJob is a job as the checks below read it.
type slashJob struct {
	ID          uint64 `json:"id"`
	State       string `json:"state"`
	Assignments []struct {
		Provider string `json:"provider"`
		Outcome  string `json:"outcome"`
		Slashed  uint64 `json:"slashed"`
	} `json:"assignments"`
}

// slashedJob returns the newest job whose replica on provider was
// outvoted and slashed, if any.
func slashedJob(t *testing.T, eval evalFunc, provider string) (slashJob, bool) {
	t.Helper()
	var list struct {
		Jobs []slashJob `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(eval(`fetch('/v1/jobs?limit=100').then(r => r.text())`)), &list); err != nil {
		t.Fatal(err)
	}
	for _, j := range list.Jobs {
		for _, a := range j.Assignments {
			if a.Provider == provider && a.Outcome == "minority" && a.Slashed > 0 {
				return j, true
			}
		}
	}
	return slashJob{}, false
}

// checkSlashShown finds the job in which the faulty provider was outvoted
// and slashed: one of the earlier jobs if it took part as their audit
// replica, else a job that prefers its region, so it runs the job, the
// audit replica disagrees, an escalation replica decides. (Once slashed it
// is under-staked and gets no more jobs.) The job page shows each
// replica's verdict and the slash; the jobs list separates the job's
// three providers and marks the outvoted one; the faulty provider's
// history shows the slash, its liveness rows folded away. It returns the
// faulty provider's address.
func checkSlashShown(t *testing.T, ctx context.Context, eval evalFunc, poll pollFunc, hash hashFunc, shot shotFunc, home string) string {
	t.Helper()
	faulty := eval(`fetch('/v1/offers?q=region=ap-south&all=true').then(r => r.json()).then(p => p.offers.length === 1 ? p.offers[0].address : 'offers: ' + JSON.stringify(p))`)
	if !strings.HasPrefix(faulty, "gpu1") {
		t.Fatalf("the faulty provider (ap-south): %s", faulty)
	}
	job, ok := slashedJob(t, eval, faulty)
	if !ok {
		dir := t.TempDir()
		spec, err := os.ReadFile("../../examples/wordcount/job.yaml")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"wordcount.wasm", "input.txt"} {
			b, err := os.ReadFile(filepath.Join("../../examples/wordcount", f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "job.yaml"), append(spec, "region: ap-south\n"...), 0o644); err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		run := exec.CommandContext(rctx, gpunetBin, "job", "run", filepath.Join(dir, "job.yaml"), "--from", "alice", "--home", home, "--out", filepath.Join(dir, "out"))
		run.Env = cleanEnv()
		if b, err := run.CombinedOutput(); err != nil {
			t.Fatalf("job run preferring ap-south: %v\n%s", err, b)
		}
		if job, ok = slashedJob(t, eval, faulty); !ok {
			t.Fatalf("no job with the faulty provider %s outvoted and slashed, even one preferring its region: %s", faulty, eval(`fetch('/v1/jobs?limit=1').then(r => r.text())`))
		}
	}
	if job.State != "succeeded" || len(job.Assignments) != 3 {
		t.Fatalf("job %d %s: want 3 replicas and success, got %+v", job.ID, job.State, job.Assignments)
	}
	t.Logf("job %d: the faulty provider %s outvoted and slashed", job.ID, faulty)
	id := fmt.Sprint(job.ID)

	// The job page: each replica's verdict, the slash.
	row := `document.querySelector('#job-replicas tr[data-provider="` + faulty + `"]')`
	err := chromedp.Do(ctx,
		hash("#/job/"+id),
		poll("the replicas", `document.querySelectorAll('#job-replicas tbody tr').length === 3`, 15*time.Second),
		shot("dashboard-job-slashed.png"),
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := eval(row + `.querySelector('.outcome').textContent`); got != "outvoted" {
		t.Errorf("the faulty replica's verdict: %q, want outvoted", got)
	}
	if got := eval(row + `.querySelector('.slash').textContent`); !strings.HasSuffix(got, " SYNC") || got == "0 SYNC" {
		t.Errorf("the faulty replica's slash: %q", got)
	}
	if got := eval(row + `.classList.contains('slashed') ? 'marked' : 'not marked'`); got != "marked" {
		t.Errorf("the faulty replica's row is %s", got)
	}
	if got := eval(`[...document.querySelectorAll('#job-replicas tbody tr:not(.slashed) .outcome')].map(td => td.textContent).join('|')`); got != "in majority|in majority" {
		t.Errorf("the honest replicas' verdicts: %q", got)
	}
	if got := eval(`[...document.querySelectorAll('#job-replicas tbody tr td:nth-child(2)')].map(td => td.textContent).join('|')`); got != "replica|audit|escalation" {
		t.Errorf("the replicas' roles: %q", got)
	}
	if v := eval(`document.getElementById('job-verification').textContent`); !strings.Contains(v, "validated: 2 of 3 replicas agree") || !strings.Contains(v, "outvoted") || !strings.Contains(v, "slashed") {
		t.Errorf("the verdict line: %q", v)
	}

	// The jobs list: the job's providers apart, the outvoted one marked.
	err = chromedp.Do(ctx,
		hash("#/jobs"),
		poll("the job's row", `document.querySelectorAll('tr[data-job="`+id+`"] td.providers .prov').length === 3`, 15*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}
	cell := eval(`document.querySelector('tr[data-job="` + id + `"] td.providers').textContent`)
	if strings.Count(cell, ", ") != 2 || regexp.MustCompile(`[0-9a-z]gpu1`).MatchString(cell) {
		t.Errorf("the job's providers run together: %q", cell)
	}
	if got := eval(`document.querySelector('tr[data-job="` + id + `"] .prov[data-provider="` + faulty + `"] .mark').textContent`); got != " ✗" {
		t.Errorf("the outvoted provider's mark: %q", got)
	}

	// The faulty provider's page: its slashes, and its history with the
	// slash visible and the liveness rows folded into summaries.
	var live struct {
		Events []struct {
			Type string `json:"type"`
		} `json:"events"`
	}
	if err := json.Unmarshal([]byte(eval(`fetch('/v1/providers/`+faulty+`/history?limit=200').then(r => r.text())`)), &live); err != nil {
		t.Fatal(err)
	}
	liveness := 0
	for _, e := range live.Events {
		if e.Type == "liveness_challenge" || e.Type == "liveness_answered" {
			liveness++
		}
	}
	err = chromedp.Do(ctx,
		hash("#/provider/"+faulty),
		poll("the slash in the history", `[...document.querySelectorAll('#provider-history tr.slashed')].some(tr => tr.innerText.includes('job_replica_slashed') && tr.innerText.includes('#`+id+`'))`, 15*time.Second),
		poll("the slashes panel", `document.querySelectorAll('#provider-slashes tbody tr').length >= 1`, 5*time.Second),
		shot("dashboard-provider-slashed.png"),
	)
	if err != nil {
		t.Fatal(err)
	}
	if b := eval(`document.getElementById('provider-slashed').textContent`); !strings.Contains(b, "Slashed") || !strings.Contains(b, "outvoted") {
		t.Errorf("the slashed banner: %q", b)
	}
	raw := `[...document.querySelectorAll('#provider-history tbody tr')].filter(tr => /liveness_(challenge|answered)/.test(tr.innerText)).length`
	if liveness == 0 {
		t.Logf("the faulty provider's history holds no liveness rows to fold (%d events)", len(live.Events))
	} else {
		if n := eval(`String(` + raw + `)`); n != "0" {
			t.Errorf("%s liveness rows shown among the history, want them folded", n)
		}
		if n := eval(`String(document.querySelectorAll('#provider-history tr.routine').length)`); n == "0" {
			t.Errorf("no summary of the %d liveness rows", liveness)
		}
		err = chromedp.Do(ctx,
			chromedp.Click(chromedp.CSS(`#history-liveness`)),
			poll("the liveness rows, unfolded", raw+` > 0 && document.querySelectorAll('#provider-history tr.routine').length === 0`, 5*time.Second),
		)
		if err != nil {
			t.Fatal(err)
		}
	}
	return faulty
}

// checkLedgerFilters filters the ledger page's blocks by an event type
// and its txs by a message type, with the page's own controls: every
// block listed has the event, every tx listed the type.
func checkLedgerFilters(t *testing.T, ctx context.Context, eval evalFunc, poll pollFunc, hash hashFunc) {
	t.Helper()
	choose := func(sel, value string) chromedp.Action[chromedp.Void] {
		return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(s => { s.value = %q; s.dispatchEvent(new Event('change')); })(document.getElementById(%q))`, value, sel))
	}
	err := chromedp.Do(ctx,
		hash("#/ledger"),
		poll("the ledger", `document.getElementById('blocks-filter') !== null && document.getElementById('blocks-table') !== null`, 15*time.Second),
		choose("blocks-filter", "event:job_replica_slashed"),
		poll("the slashing blocks", `location.hash.includes('event=job_replica_slashed') && document.getElementById('blocks-filter').value === 'event:job_replica_slashed' && document.querySelectorAll('#blocks-table tbody tr').length >= 1`, 30*time.Second),
		choose("txs-filter", "submit_job"),
		poll("the submit_job txs", `location.hash.includes('type=submit_job') && document.querySelectorAll('#txs-table tbody tr').length >= 2`, 30*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}
	if types := eval(`[...new Set([...document.querySelectorAll('#txs-table tbody tr td:nth-child(2)')].map(td => td.textContent))].join(',')`); types != "submit_job" {
		t.Errorf("txs filtered by submit_job show types %q", types)
	}
	// Every block listed holds a job_replica_slashed event.
	check := `Promise.all([...document.querySelectorAll('#blocks-table tbody tr td:first-child')].map(td =>
		fetch('/v1/blocks/' + td.textContent).then(r => r.json()).then(b =>
			(b.events || []).concat(...(b.txs || []).map(tx => tx.events || [])).some(e => e.type === 'job_replica_slashed') ? '' : td.textContent)))
		.then(bad => bad.filter(Boolean).join(','))`
	if bad := eval(check); bad != "" {
		t.Errorf("blocks listed for job_replica_slashed without one: %s", bad)
	}
}

// checkNarrow loads each page in a 420 px wide viewport: once its content
// is there (ready), nothing is wider than the screen.
func checkNarrow(t *testing.T, ctx context.Context, poll pollFunc, hash hashFunc, shot shotFunc, pages map[string]string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(420, 900)); err != nil {
		t.Fatal(err)
	}
	defer chromedp.Do(ctx, chromedp.EmulateReset())
	for _, h := range slices.Sorted(maps.Keys(pages)) {
		err := chromedp.Do(ctx,
			hash(h),
			poll(h+" at 420 px", pages[h], 20*time.Second),
			poll(h+" no wider than 420 px", `window.innerWidth === 420 && document.documentElement.scrollWidth <= 420`, 2*time.Second),
		)
		if err != nil {
			width, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const w = []; for (const el of document.querySelectorAll('body *')) { const r = el.getBoundingClientRect(); if (r.right > 420.5) w.push(el.tagName + (el.id ? '#' + el.id : '') + '.' + el.className + ' ' + Math.round(r.right)); } return document.documentElement.scrollWidth + ': ' + w.slice(0, 8).join('; '); })()`))
			t.Errorf("%v\nwidest: %s", err, width)
			continue
		}
		if page, _, _ := strings.Cut(strings.TrimPrefix(h, "#/"), "/"); page == "job" || page == "provider" || page == "ledger?type=submit_job" {
			if err := chromedp.Do(ctx, shot("dashboard-narrow-"+strings.TrimSuffix(page, "?type=submit_job")+".png")); err != nil {
				t.Error(err)
			}
		}
	}
}

// checkCheckpointsShown runs a spot job that checkpoints every second (the
// counter of TestCheckpointResume) and checks its page: its tier, and a
// row for each checkpoint the ledger holds (sequence, time, size,
// provider, seconds covered). It returns the job's id.
func checkCheckpointsShown(t *testing.T, ctx context.Context, eval evalFunc, poll pollFunc, hash hashFunc, home string) string {
	t.Helper()
	dir := t.TempDir()
	counterWasm(t, filepath.Join(dir, "counter.wasm"))
	spec := `name: counter
executor: wasm
module: ./counter.wasm
args: ["2000", "3000"]
outputs: [/out]
resources: {cpu: 1, memory: 256MiB, gpu: {count: 0}}
max_price: 0.5
timeout: 5m
tier: spot
verification: none
checkpoint: {path: /ckpt, interval: 1s}
`
	specPath := filepath.Join(dir, "job.yaml")
	os.WriteFile(specPath, []byte(spec), 0o644)
	var sub struct {
		ID uint64 `json:"id"`
	}
	gpunetJSON(t, &sub, "job", "submit", specPath, "--from", "alice", "--home", home)
	id := fmt.Sprint(sub.ID)
	var j ledger.Job
	waitUntil(t, 60*time.Second, "a checkpoint of the counter committed", func() bool {
		j = ownerJob(t, home, "alice", id) // grants the key when due
		return len(j.Checkpoints) >= 2 || j.Done()
	})
	gpunetJSON(t, &j, "job", "status", id, "--from", "alice", "--home", home)
	if len(j.Checkpoints) == 0 {
		t.Fatalf("job %s %s without a checkpoint: %s", id, j.State, j.Reason)
	}
	c := j.Checkpoints[0]
	row := `document.querySelector('#job-checkpoints-table tr[data-seq="` + fmt.Sprint(c.Seq) + `"]')`
	err := chromedp.Do(ctx,
		hash("#/job/"+id),
		poll("the checkpoints", fmt.Sprintf(`document.querySelectorAll('#job-checkpoints-table tbody tr').length >= %d`, len(j.Checkpoints)), 15*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := eval(`document.getElementById('job-tier').textContent`); got != "spot" {
		t.Errorf("the job's tier on its page: %q, want spot", got)
	}
	got := eval(row + `.innerText`)
	for _, want := range []string{fmt.Sprint(c.Seq), fmt.Sprintf("block %d", c.Height), fmt.Sprintf("%d s", c.Covered), "B"} {
		if !strings.Contains(got, want) {
			t.Errorf("checkpoint %d's row %q lacks %q", c.Seq, got, want)
		}
	}
	if p := eval(row + `.querySelector('a[href^="#/provider/"]').getAttribute('href')`); p != "#/provider/"+c.Provider.String() {
		t.Errorf("checkpoint %d's provider link %q, want %s", c.Seq, p, c.Provider)
	}
	return id
}

// checkServicesShown: a service deployed with the CLI (the tinylm example
// from the devnet's registry) appears on the services page and becomes
// ready there; its page shows its endpoints through this node, its access,
// its replica (ready, its provider, paid) and its budget; stopped with the
// CLI, the page shows it stopped and refunded without a reload. It returns
// the service's id.
func checkServicesShown(t *testing.T, ctx context.Context, eval evalFunc, poll pollFunc, hash hashFunc, shot shotFunc, home string) string {
	t.Helper()
	err := chromedp.Do(ctx,
		hash("#/services"),
		poll("the services page", `(document.getElementById('services-panel')||{}).innerText === 'No services.'`, 15*time.Second),
		chromedp.Evaluate[chromedp.Void](`window.__noReload = 'services'`),
	)
	if err != nil {
		t.Fatal(err)
	}
	var dep struct {
		ID uint64 `json:"id"`
	}
	gpunetJSON(t, &dep, "service", "deploy", filepath.Join(home, "examples", "service", "tinylm.yaml"), "--from", "alice", "--home", home)
	id := fmt.Sprint(dep.ID)
	row := `document.querySelector('tr[data-service="` + id + `"]')`
	err = chromedp.Do(ctx,
		poll("the service's row", row+` !== null`, 15*time.Second),
		poll("its replica ready", row+`.querySelector('.replicas-cell').textContent === '1/1 ready'`, 3*time.Minute),
		poll("no reload", `window.__noReload === 'services'`, time.Second),
		shot("dashboard-services.png"),
		chromedp.Evaluate[chromedp.Void](row+`.querySelector('a[href^="#/service/"]').click()`),
		poll("the service page", `(document.getElementById('service-state')||{}).textContent === 'active'`, 15*time.Second),
		poll("its ready replica", `(document.querySelector('#service-replicas tbody tr')||{}).innerText.includes('ready')`, 15*time.Second),
		shot("dashboard-service.png"),
	)
	if err != nil {
		t.Fatal(err)
	}
	api := eval(`location.origin`)
	if ep := eval(`document.getElementById('service-endpoints').innerText`); !strings.Contains(ep, api+"/svc/"+id+"/8000/") || !strings.Contains(ep, api+"/openai/v1") || !strings.Contains(ep, "tinylm") {
		t.Errorf("endpoints panel %q: want %s/svc/%s/8000/ and %s/openai/v1 with the model", ep, api, id, api)
	}
	if acc := eval(`document.getElementById('service-access').innerText`); !strings.Contains(acc, "1 key(s)") || !strings.Contains(acc, "gpunet service key "+id) {
		t.Errorf("access: %q", acc)
	}
	var sv ledger.Service
	gpunetJSON(t, &sv, "service", "status", id, "--home", home)
	if len(sv.Replicas) != 1 {
		t.Fatalf("service status: %d replicas", len(sv.Replicas))
	}
	prov := sv.Replicas[0].Provider.String()
	if got := eval(`document.querySelector('#service-replicas tbody tr').getAttribute('data-provider')`); got != prov {
		t.Errorf("replica row's provider %s, want %s", got, prov)
	}
	// The provider's page lists the service it runs.
	err = chromedp.Do(ctx,
		hash("#/provider/"+prov),
		poll("the provider's services", `document.querySelector('#provider-services tr[data-service="`+id+`"]') !== null`, 15*time.Second),
		hash("#/service/"+id),
		poll("the service page again", `(document.getElementById('service-state')||{}).textContent === 'active'`, 15*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}

	// Paid for its ready seconds (its provider's heartbeat landed) before
	// it is stopped, so that the stopped service has a cost to show.
	waitUntil(t, 30*time.Second, "the replica paid for its ready seconds", func() bool {
		var s ledger.Service
		gpunetJSON(t, &s, "service", "status", id, "--home", home)
		return len(s.Replicas) == 1 && s.Replicas[0].Paid > 0
	})
	gpunetJSON(t, &map[string]any{}, "service", "stop", id, "--from", "alice", "--home", home)
	err = chromedp.Do(ctx,
		poll("the service stopped", `(document.getElementById('service-state')||{}).textContent === 'stopped'`, 30*time.Second),
		poll("no reload", `window.__noReload === 'services'`, time.Second),
		shot("dashboard-service-stopped.png"),
	)
	if err != nil {
		t.Fatal(err)
	}
	gpunetJSON(t, &sv, "service", "status", id, "--home", home)
	cost := eval(`document.getElementById('service-cost').innerText`)
	for _, want := range []string{"Paid to providers", "Refunded", "SYNC"} {
		if !strings.Contains(cost, want) {
			t.Errorf("budget panel %q lacks %q", cost, want)
		}
	}
	if sv.Refund == 0 || sv.Cost == 0 {
		t.Errorf("stopped service: cost %d, refund %d; want both above 0", sv.Cost, sv.Refund)
	}
	if strings.Contains(eval(`document.getElementById('app').innerText`), "Runs out") {
		t.Errorf("a stopped service's page still says when its budget runs out")
	}
	return id
}

// checkAccountAndPrices: an account's page shows what its jobs and
// services cost it, and names the account by its key in the node's
// keyring (the page has the API token by now) or by a label given here;
// "This is my account" makes it the Account link's page. The Market page's
// price axis is in a unit in which the devnet's index does not read 0, its
// epoch charts count epochs, and each class has its price history (issue
// 33).
func checkAccountAndPrices(t *testing.T, ctx context.Context, eval evalFunc, poll pollFunc, hash hashFunc, shot shotFunc, alice string) {
	t.Helper()
	err := chromedp.Do(ctx,
		hash("#/account/"+alice),
		poll("the account's spend", `(document.getElementById('account-spent')||{}).textContent.includes('SYNC')`, 15*time.Second),
		poll("the account named by the node's keyring", `(document.getElementById('account-name')||{}).textContent === 'alice'`, 15*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}
	jobs := eval(`fetch('/v1/jobs?owner=` + alice + `&limit=1000').then(r => r.json()).then(p => String(p.jobs.length))`)
	if card := eval(`document.getElementById('account-spent').parentElement.innerText`); !strings.Contains(card, "on "+jobs+" job(s)") {
		t.Errorf("the spend card %q does not count alice's %s jobs", card, jobs)
	}
	err = chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(`#account-label-input`), "alice's lab"),
		chromedp.Click(chromedp.CSS(`#account-label-save`)),
		poll("the label given", `(document.getElementById('account-name')||{}).textContent === "alice's lab"`, 10*time.Second),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('account-mine-toggle').click()`),
		poll("marked as mine", `document.getElementById('account-mine') !== null`, 10*time.Second),
		hash("#/"),
		poll("the overview", `document.getElementById('ov-online') !== null`, 10*time.Second),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('header nav a[data-nav="me"]').click()`),
		poll("the Account link opens alice's page", `location.hash === '#/account/`+alice+`' && document.getElementById('account-mine') !== null`, 10*time.Second),
		hash("#/jobs"),
		poll("the jobs table names alice's jobs' owner by the label", `[...document.querySelectorAll('tr[data-job] a[href="#/account/`+alice+`"]')].some(a => a.textContent === "alice's lab")`, 15*time.Second),
		shot("dashboard-account-jobs.png"),
		// The label off again: the keyring's name is back.
		hash("#/account/"+alice),
		poll("the account page again", `document.getElementById('account-label-input') !== null`, 10*time.Second),
		// (chromedp.SetValue cannot set an empty value.)
		chromedp.Evaluate[chromedp.Void](`document.getElementById('account-label-input').value = ''; document.getElementById('account-label-save').click()`),
		poll("the keyring's name back", `(document.getElementById('account-name')||{}).textContent === 'alice'`, 10*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}
	err = chromedp.Do(ctx,
		hash("#/market"),
		poll("the index chart, its price axis not all 0", `[...document.querySelectorAll('#market-index .y-label')].some(l => parseFloat(l.textContent.replace(/,/g, '')) > 0)`, 30*time.Second),
		poll("a price history per class", `document.querySelector('#market-models .model[data-class="cpu"] svg path') !== null`, 15*time.Second),
		shot("dashboard-market.png"),
	)
	if err != nil {
		t.Fatal(err)
	}
	if x := eval(`[...document.querySelectorAll('#market-index .x-label')].map(l => l.textContent).join('|')`); !strings.HasPrefix(x, "epoch ") || strings.Contains(x, "block") {
		t.Errorf("the index chart's x axis reads %q, want epochs", x)
	}
}
