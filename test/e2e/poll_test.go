package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/bintest"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/validator"
)

// ---------------------------------------------------------------------------
// Polling in-process.
//
// A wait polls the chain through the node's API from the test process: a
// poll that ran the CLI cost ~100 ms of CPU, at 20 polls a second a core
// of a 2-core machine. What a user sees is still checked through the CLI,
// once the wait is over.

var clients sync.Map // home or node → *chainclient.Client

// nodeAPI returns a client of node or, when node is empty, of the API of
// the node in home (a devnet's or a validator's home): what --node and
// --home choose for the CLI.
func nodeAPI(t testing.TB, home, node string) *chainclient.Client {
	t.Helper()
	key := node
	if key == "" {
		key = "home:" + home
	}
	if c, ok := clients.Load(key); ok {
		return c.(*chainclient.Client)
	}
	if node == "" {
		c, err := validator.LoadConfig(home)
		if err != nil {
			t.Fatalf("the API of %s: %v", home, err)
		}
		node = c.APIURL()
	}
	c, _ := clients.LoadOrStore(key, chainclient.New(node))
	return c.(*chainclient.Client)
}

// pollCtx bounds one poll's request.
func pollCtx(t testing.TB) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), 10*time.Second)
}

// keyAddress returns the address of the key name in home's keyring (or
// name itself when it is an address), as the CLI resolves --from and
// names.
func keyAddress(t testing.TB, home, name string) address.Address {
	t.Helper()
	if a, err := address.Parse(name); err == nil {
		return a
	}
	kr, err := keys.Open(filepath.Join(home, "keyring"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := kr.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return k.Address
}

// offerCount returns how many providers offer what query (an `offers`
// query, "" for all) asks, through cl.
func offerCount(t testing.TB, cl *chainclient.Client, query string) int {
	t.Helper()
	ctx, cancel := pollCtx(t)
	defer cancel()
	o, err := cl.Offers(ctx, query, "", false)
	if err != nil {
		t.Fatalf("offers %q from %s: %v", query, cl.Base(), err)
	}
	return len(o)
}

// waitOfferCount waits until n providers offer what query asks, seen from
// home's node (or node).
func waitOfferCount(t testing.TB, timeout time.Duration, home, node, query string, n int) {
	t.Helper()
	cl := nodeAPI(t, home, node)
	waitUntil(t, timeout, fmt.Sprintf("%d offers of %q from %s", n, query, cl.Base()), func() bool {
		return offerCount(t, cl, query) == n
	})
}

// provider returns the provider with the key name in home's keyring (or
// the address name), as `query provider` reads it.
func provider(t testing.TB, home, name string) *apiwire.ProviderBody {
	t.Helper()
	ctx, cancel := pollCtx(t)
	defer cancel()
	p, err := nodeAPI(t, home, "").Provider(ctx, keyAddress(t, home, name))
	if err != nil {
		t.Fatalf("provider %s: %v", name, err)
	}
	return p
}

// chainJob reads job id through cl, as `job status ID` without --from
// does: it grants nothing.
func chainJob(t testing.TB, cl *chainclient.Client, id string) ledger.Job {
	t.Helper()
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil {
		t.Fatalf("job id %q: %v", id, err)
	}
	ctx, cancel := pollCtx(t)
	defer cancel()
	j, err := cl.Job(ctx, n)
	if err != nil {
		t.Fatalf("job %s from %s: %v", id, cl.Base(), err)
	}
	return *j
}

// ownerJob reads job id as `job status ID --from owner --home home [args]`
// does: through the API, and when one of its assignments waits for the job
// key (only then does that command do more than read), with that command,
// which grants it.
func ownerJob(t testing.TB, home, owner, id string, args ...string) ledger.Job {
	t.Helper()
	node := ""
	for i, a := range args {
		if a == "--node" && i+1 < len(args) {
			node = args[i+1]
		}
	}
	cl := nodeAPI(t, home, node)
	j := chainJob(t, cl, id)
	if !waitsForKey(&j) {
		return j
	}
	var granted ledger.Job
	gpunetJSON(t, &granted, append([]string{"job", "status", id, "--from", owner, "--home", home}, args...)...)
	return granted
}

// waitsForKey is the CLI's test of whether `job status --from` grants
// anything: the job is not done and an assignment has no key grant.
func waitsForKey(j *ledger.Job) bool {
	if j.Done() {
		return false
	}
	for _, a := range j.Assignments {
		if a.KeyGrant == nil {
			return true
		}
	}
	return false
}

// height returns the latest height of the node cl talks to.
func height(t testing.TB, cl *chainclient.Client) int64 {
	t.Helper()
	ctx, cancel := pollCtx(t)
	defer cancel()
	st, err := cl.Status(ctx)
	if err != nil {
		t.Fatalf("status of %s: %v", cl.Base(), err)
	}
	return st.Height
}

// counterWasm puts the counter job (testdata/counter, built once for the
// whole suite) at path.
func counterWasm(t testing.TB, path string) {
	t.Helper()
	bin, err := bintest.Build(t.Context(), "./testdata/counter", "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if err != nil {
		t.Fatalf("build the counter: %v", err)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// ---------------------------------------------------------------------------
// Providers.

// startProvider adds the key name to home's keyring, has funder send it
// 100 SYNC, and starts `gpunet provider start` for it (1-core benchmark of
// 200 ms, asking 0.05 SYNC a core-hour, then args). It returns the agent
// and the key's address.
func startProvider(t testing.TB, home, name, funder string, args ...string) (*proc, string) {
	t.Helper()
	var k keyJSON
	gpunetJSON(t, &k, "keys", "add", name, "--home", home)
	gpunetJSON(t, &map[string]any{}, "tx", "send", name, "100sync", "--from", funder, "--home", home)
	p := startProc(t, "provider "+name, append([]string{"provider", "start", "--from", name, "--home", home, "--bench-time", "200ms", "--region", "eu", "--price", "0.05sync"}, args...)...)
	return p, k.Address
}
