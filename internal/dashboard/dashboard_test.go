package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/bintest"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/daemon"
	"github.com/gpunet/gpunet/internal/dashboard"
	"github.com/gpunet/gpunet/internal/devnet"
	"github.com/gpunet/gpunet/internal/jobclient"
	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/validator"
)

// startDevnet runs a devnet node with n providers; token sets the node's
// api_token ("" for none).
func startDevnet(t *testing.T, providers int, token string) (*daemon.Daemon, string) {
	t.Helper()
	home := t.TempDir()
	if _, err := devnet.Setup(home, devnet.Options{BlockTime: 50 * time.Millisecond, NoHWChallenges: true}); err != nil {
		t.Fatal(err)
	}
	c, err := validator.LoadConfig(home)
	if err != nil {
		t.Fatal(err)
	}
	c.APIToken = token
	if err := validator.SaveConfig(home, c); err != nil {
		t.Fatal(err)
	}
	// The node's and the providers' logs, shown with their goroutines when
	// a test fails (a job once stayed "key granted; waiting for the
	// provider to start" for a minute in a CI run, with nothing to show why).
	logs := &bintest.Tail{Max: 256 << 10}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	d, err := daemon.Start(t.Context(), home, daemon.Options{APIAddr: "127.0.0.1:0", CheckInvariants: true, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ps, err := devnet.RunProviders(ctx, home, d.APIURL, devnet.ProviderOptions{N: providers, Poll: 25 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop()
		ps.Wait()
		d.Stop()
	})
	t.Cleanup(func() { // runs first, while everything still runs
		if t.Failed() {
			t.Logf("goroutines in gpunet code:\n%s", bintest.InProcessStacks(128<<10))
			logMempool(t, d)
			t.Logf("the node's and providers' log (its end):\n%s", logs)
		}
	})
	if err := ps.WaitReady(t.Context(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return d, home
}

// logMempool shows what waits in the node's mempool, with each sender's
// next sequence on the chain: a tx no block takes shows there.
func logMempool(t *testing.T, d *daemon.Daemon) {
	cl := chainclient.New(d.APIURL)
	txs := d.Node.MempoolTxs(50)
	t.Logf("mempool: %d txs at height %d", d.Node.Mempool(), d.Node.Height())
	for _, raw := range txs {
		tx, err := ledger.DecodeTx(raw)
		if err != nil {
			t.Logf("  undecodable tx: %v", err)
			continue
		}
		next := "?"
		if a, err := cl.Account(context.Background(), tx.Sender()); err == nil {
			next = fmt.Sprint(a.NextSequence)
		}
		t.Logf("  %s seq %d (chain's next %s): %T", tx.Sender(), tx.Sequence, next, tx.Msg)
	}
}

// logSenderTxs shows the last txs of sender in the node's blocks.
func logSenderTxs(t *testing.T, d *daemon.Daemon, sender string) {
	var lines []string
	for h := int64(1); h <= d.Node.Height(); h++ {
		b, err := d.Node.Block(context.Background(), h)
		if err != nil || b == nil {
			continue
		}
		for _, tx := range b.Txs {
			if tx.Sender == sender {
				lines = append(lines, fmt.Sprintf("  height %d seq %d %s code %d %s", h, tx.Sequence, tx.Type, tx.Code, tx.Log))
			}
		}
	}
	if a, err := address.Parse(sender); err == nil {
		if l, err := chainclient.New(d.APIURL).ProviderJobs(context.Background(), a); err == nil {
			for _, j := range l.Jobs {
				asg, _ := json.Marshal(j.Assignments)
				t.Logf("provider %s lists job %d (%s, revealing %v): %s", sender, j.ID, j.State, j.Revealing, asg)
			}
			t.Logf("provider %s lists %d jobs at height %d", sender, len(l.Jobs), l.Height)
		} else {
			t.Logf("provider %s: its jobs: %v", sender, err)
		}
	}
	if a, err := address.Parse(sender); err == nil {
		kv, release := d.Node.View()
		t.Logf("the node's view at height %d: %s's active jobs %v; invariants: %v", ledger.Height(kv), sender, ledger.ActiveJobsOf(kv, a), ledger.CheckInvariants(kv))
		release()
	}
	t.Logf("txs of %s in blocks 1-%d (the last 20 of %d):\n%s", sender, d.Node.Height(), len(lines), strings.Join(lines[max(0, len(lines)-20):], "\n"))
}

func TestServesThePageWithNoOutsideResources(t *testing.T) {
	d, _ := startDevnet(t, 0, "")
	resp, err := http.Get(d.APIURL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !bytes.Contains(page, []byte(`id="app"`)) {
		t.Fatalf("GET /: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
	// Every asset the page names is served by the node, with its type.
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"#]+)"`).FindAllStringSubmatch(string(page), -1) {
		u := m[1]
		if !strings.HasPrefix(u, "/") || strings.HasPrefix(u, "//") {
			t.Errorf("the page loads %q from outside the node", u)
			continue
		}
		resp, err := http.Get(d.APIURL + u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: %d", u, resp.StatusCode)
		}
	}
	for name, ct := range map[string]string{"app.js": "text/javascript", "app.css": "text/css", "favicon.svg": "image/svg+xml"} {
		resp, err := http.Get(d.APIURL + "/ui/" + name)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), ct) {
			t.Errorf("/ui/%s: Content-Type %q, want %s", name, resp.Header.Get("Content-Type"), ct)
		}
	}
	for _, bad := range []string{"/ui/index.html", "/ui/nope.js", "/ui/../dashboard.go"} {
		resp, err := http.Get(d.APIURL + bad)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("GET %s: %d, want 404", bad, resp.StatusCode)
		}
	}
}

// TestAssetsUseNoNetwork checks the embedded files for URLs the browser
// would fetch from elsewhere: the dashboard must work with no internet.
func TestAssetsUseNoNetwork(t *testing.T) {
	root := os.DirFS("static")
	err := fs.WalkDir(root, ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, _ := fs.ReadFile(root, p)
		for _, m := range regexp.MustCompile(`https?://[^\s'"<>)]+`).FindAll(b, -1) {
			if string(m) != "http://www.w3.org/2000/svg" { // an XML namespace name, never fetched
				t.Errorf("%s names %s", p, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func form(t *testing.T, key, spec string, files map[string]string) (*bytes.Buffer, string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	w.WriteField("key", key)
	w.WriteField("spec", spec)
	for name, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		fw, _ := w.CreateFormFile("file", name)
		fw.Write(data)
	}
	w.Close()
	return &b, w.FormDataContentType()
}

func post(t *testing.T, url, token string, body io.Reader, ct string, out any) int {
	t.Helper()
	req, _ := http.NewRequest("POST", url, body)
	req.Header.Set("Content-Type", ct)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("POST %s: %d %s", url, resp.StatusCode, b)
		}
	}
	return resp.StatusCode
}

// TestSubmitFromDashboard submits the wordcount example the way the page
// does, with a key of the node's keyring: refused without the token,
// accepted with it, and followed to success (the node grants the job key
// to the provider the ledger assigns).
func TestSubmitFromDashboard(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	// Two providers: the spot job of a new provider is audited by another,
	// and the node grants the key to that replica too.
	d, _ := startDevnet(t, 2, token)
	spec, err := os.ReadFile("../../examples/wordcount/job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"wordcount.wasm": "../../examples/wordcount/wordcount.wasm", "input.txt": "../../examples/wordcount/input.txt"}
	url := d.APIURL + "/v1/dashboard/jobs"

	var eb apiwire.ErrorBody
	body, ct := form(t, "alice", string(spec), files)
	if st := post(t, url, "", body, ct, &eb); st != 401 || eb.Code != apiwire.CodeUnauthorized {
		t.Fatalf("no token: %d %+v", st, eb)
	}
	body, ct = form(t, "alice", string(spec), files)
	if st := post(t, url, "wrong-token-wrong-token", body, ct, &eb); st != 401 {
		t.Fatalf("wrong token: %d %+v", st, eb)
	}
	for _, tc := range []struct {
		key, spec string
		files     map[string]string
		want      string
	}{
		{"alice", string(spec), map[string]string{"input.txt": files["input.txt"]}, "module names wordcount.wasm, which was not uploaded"},
		{"mallory", string(spec), files, `key "mallory"`},
		{"alice", "name: x\nexecutor: wasm\n", files, "spec: "},
		{"alice", string(spec), map[string]string{`..\\evil`: files["input.txt"]}, "want a plain file name"},
	} {
		body, ct := form(t, tc.key, tc.spec, tc.files)
		if st := post(t, url, token, body, ct, &eb); st != 400 || eb.Code != apiwire.CodeInvalidArgument || !strings.Contains(eb.Message, tc.want) {
			t.Errorf("%s: %d %+v, want 400 with %q", tc.want, st, eb, tc.want)
		}
	}
	big := bytes.NewReader(make([]byte, dashboard.MaxSubmitBytes+1))
	if st := post(t, url, token, big, "multipart/form-data; boundary=x", &eb); st != 413 && st != 400 {
		t.Errorf("oversized: %d %+v", st, eb)
	}

	var keys dashboard.KeyList
	req, _ := http.NewRequest("GET", d.APIURL+"/v1/dashboard/keys", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&keys)
	resp.Body.Close()
	if len(keys.Keys) < 3 || keys.Keys[0].Name != "alice" || keys.Keys[1].Name != "bob" || keys.NextCursor != "" {
		t.Errorf("keys: %+v", keys)
	}
	req, _ = http.NewRequest("GET", d.APIURL+"/v1/dashboard/keys?limit=1&cursor=alice", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	keys = dashboard.KeyList{}
	json.NewDecoder(resp.Body).Decode(&keys)
	resp.Body.Close()
	if len(keys.Keys) != 1 || keys.Keys[0].Name != "bob" || keys.NextCursor != "bob" {
		t.Errorf("keys after alice, limit 1: %+v", keys)
	}

	var sub dashboard.Submitted
	body, ct = form(t, "alice", string(spec), files)
	if st := post(t, url, token, body, ct, &sub); st != 201 || sub.ID == 0 || sub.Key != "alice" {
		t.Fatalf("submit: %d %+v", st, sub)
	}
	cl := chainclient.New(d.APIURL)
	deadline := time.Now().Add(time.Minute)
	for {
		j, err := cl.Job(t.Context(), sub.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.State == ledger.JobSucceeded {
			if j.Owner.String() != sub.Owner {
				t.Errorf("owner %s, want %s", j.Owner, sub.Owner)
			}
			break
		}
		if j.Done() || time.Now().After(deadline) {
			asg, _ := json.Marshal(j.Assignments)
			for _, a := range j.Assignments {
				logSenderTxs(t, d, a.Provider.String())
			}
			t.Fatalf("job %d: %s (%s); assignments %s", j.ID, j.State, j.Reason, asg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func get(t *testing.T, url, token string, out any) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return resp.StatusCode
}

// TestJobLogFromDashboard reads job logs the way the job page does: a
// finished job's whole log from its result, decrypted with the owner's key
// of the node's keyring; the live relay's (empty) log of a job that waits;
// refused without the token, and for a job whose owner is not in the
// keyring.
func TestJobLogFromDashboard(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	d, home := startDevnet(t, 1, token)
	kr, err := keys.Open(filepath.Join(home, "keyring"))
	if err != nil {
		t.Fatal(err)
	}
	bob, err := kr.Get("bob")
	if err != nil {
		t.Fatal(err)
	}
	cl := chainclient.New(d.APIURL)
	jc := jobclient.New(cl, bob, home, devnet.ChainID)
	spec, err := jobspec.Load("../../examples/wordcount/job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec.Verification = "none" // one provider: no audit replica to wait for
	id, err := jc.Submit(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if j, err := jc.Follow(ctx, id, 50*time.Millisecond, nil); err != nil || j.State != ledger.JobSucceeded {
		t.Fatalf("job %d: %v %+v", id, err, j)
	}
	logURL := func(id uint64, q string) string { return fmt.Sprintf("%s/v1/dashboard/jobs/%d/log%s", d.APIURL, id, q) }

	var eb apiwire.ErrorBody
	if st := get(t, logURL(id, ""), "", &eb); st != 401 || eb.Code != apiwire.CodeUnauthorized {
		t.Errorf("no token: %d %+v", st, eb)
	}
	var l dashboard.JobLog
	if st := get(t, logURL(id, ""), token, &l); st != 200 {
		t.Fatalf("log of job %d: %d", id, st)
	}
	if l.Job != id || l.Key != "bob" || l.Source != dashboard.LogFromResult || !l.Final || l.Truncated ||
		!strings.Contains(l.Text, "wordcount: ") || !strings.Contains(l.Text, " words, ") {
		t.Errorf("log of job %d: %+v, want bob's, from the result, with wordcount's summary line", id, l)
	}

	// A job that waits (no provider in its region): the live relay, empty
	// and not final until it is cancelled.
	spec.Region, spec.RegionRequired = "mars", true
	waiting, err := jc.Submit(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	l = dashboard.JobLog{}
	if st := get(t, logURL(waiting, "?from=0"), token, &l); st != 200 || l.Source != dashboard.LogLive || l.Final || l.Text != "" || l.Next != 0 {
		t.Errorf("log of waiting job %d: %d %+v", waiting, st, l)
	}
	if _, err := cl.SendMsg(t.Context(), bob, 0, &ledger.MsgCancelJob{JobID: waiting}); err != nil {
		t.Fatal(err)
	}
	l = dashboard.JobLog{}
	if st := get(t, logURL(waiting, ""), token, &l); st != 200 || l.Source != dashboard.LogLive || !l.Final {
		t.Errorf("log of cancelled job %d: %d %+v", waiting, st, l)
	}

	// A job whose owner's key is elsewhere.
	other, err := keys.Open(filepath.Join(t.TempDir(), "keyring"))
	if err != nil {
		t.Fatal(err)
	}
	carol, err := other.AddUnencrypted("carol")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.SendMsg(t.Context(), bob, 0, &ledger.MsgSend{To: carol.Address, Amount: ledger.Amount(100_000_000)}); err != nil {
		t.Fatal(err)
	}
	carols, err := jobclient.New(cl, carol, t.TempDir(), devnet.ChainID).Submit(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url    string
		status int
		code   string
		want   string
	}{
		{logURL(carols, ""), 404, apiwire.CodeNotFound, "is not a key of this node's keyring"},
		{logURL(9999, ""), 404, apiwire.CodeNotFound, "no job 9999"},
		{logURL(id, "?from=x"), 400, apiwire.CodeInvalidArgument, "from"},
		{d.APIURL + "/v1/dashboard/jobs/0/log", 400, apiwire.CodeInvalidArgument, "job id"},
	} {
		eb = apiwire.ErrorBody{}
		if st := get(t, tc.url, token, &eb); st != tc.status || eb.Code != tc.code || !strings.Contains(eb.Message, tc.want) {
			t.Errorf("GET %s: %d %+v, want %d with %q", tc.url, st, eb, tc.status, tc.want)
		}
	}
}

func TestSubmitOffWithoutToken(t *testing.T) {
	d, _ := startDevnet(t, 0, "")
	var eb apiwire.ErrorBody
	body, ct := form(t, "alice", "name: x", nil)
	if st := post(t, d.APIURL+"/v1/dashboard/jobs", "anything-anything", body, ct, &eb); st != 403 || eb.Code != apiwire.CodeForbidden || !strings.Contains(eb.Message, "api_token") {
		t.Errorf("no token configured: %d %+v", st, eb)
	}
}

// TestTxTypesListed holds the page's list of message types (its txs and
// blocks filters offer them) to the ledger's.
func TestTxTypesListed(t *testing.T) {
	js, err := os.ReadFile("static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)const TX_TYPES = \[(.*?)\];`).FindSubmatch(js)
	if m == nil {
		t.Fatal("app.js has no TX_TYPES list")
	}
	var listed []string
	for _, q := range regexp.MustCompile(`'([a-z_]+)'`).FindAllSubmatch(m[1], -1) {
		listed = append(listed, string(q[1]))
	}
	var all []string
	for _, mt := range ledger.MsgTypes() {
		all = append(all, mt.String())
	}
	if !slices.Equal(listed, all) {
		t.Errorf("app.js's TX_TYPES = %v, the ledger's message types are %v", listed, all)
	}
}
