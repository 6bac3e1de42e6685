package provider_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/blob"
	"github.com/gpunet/gpunet/internal/clock/clocktest"
	"github.com/gpunet/gpunet/internal/hwinfo"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/provider"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/fake"
	"github.com/gpunet/gpunet/internal/seal"
)

// jobsChain is svcChain that also lists jobs assigned to the provider.
type jobsChain struct {
	*svcChain
	jobs []*ledger.Job
}

func (c *jobsChain) ProviderJobs(ctx context.Context, p address.Address) (*apiwire.JobList, error) {
	return &apiwire.JobList{Jobs: c.jobs}, nil
}

// urlJob is an oci job, assigned to me with its key granted, whose one
// input comes from url pinned to sum.
func urlJob(t *testing.T, id uint64, me *keys.Key, url string, sum [32]byte) *ledger.Job {
	t.Helper()
	jobKey, err := seal.NewJobKey()
	if err != nil {
		t.Fatal(err)
	}
	grant, err := seal.WrapKey(jobKey, me.Recipient())
	if err != nil {
		t.Fatal(err)
	}
	owner, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return &ledger.Job{
		ID: id, ConsumerKey: owner.Recipient().String(), State: ledger.JobRunning,
		Spec: ledger.JobSpec{
			Executor: "oci", Image: "example.com/j@sha256:" + strings.Repeat("a", 64), Outputs: []string{"/out"},
			Memory: 64 << 20, CPUMilli: 500, Disk: 1 << 20, TimeoutSeconds: 600,
			URLInputs: []ledger.URLInput{{Path: "/in/data", URL: url, SHA256: "sha256:" + hex.EncodeToString(sum[:])}},
		},
		Assignments: []ledger.Assignment{{Provider: me.Address, AssignedAt: 100, KeyGrant: grant}},
	}
}

// runURLAgent runs an agent that allows allow for URL inputs, on a fast
// fake clock, against a chain listing jobs made by mkJobs for its key. Its
// executor records the input each job sees and then blocks.
func runURLAgent(t *testing.T, allow []netip.Prefix, mkJobs func(me *keys.Key) []*ledger.Job) (chain *jobsChain, seen func(job uint64) (string, bool)) {
	t.Helper()
	kr, err := keys.Open(filepath.Join(t.TempDir(), "keyring"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := kr.AddUnencrypted("p1")
	if err != nil {
		t.Fatal(err)
	}
	chain = &jobsChain{svcChain: &svcChain{me: k.Address, logs: map[uint64][][]byte{}}, jobs: mkJobs(k)}
	var mu sync.Mutex
	inputs := map[string]string{}
	ex := fake.New(func(ctx context.Context, job *sandbox.Job, logs io.Writer) (*sandbox.Result, error) {
		b, err := os.ReadFile(filepath.Join(job.WorkDir, "in", "data"))
		mu.Lock()
		inputs[job.ID] = fmt.Sprint(string(b), err)
		mu.Unlock()
		<-ctx.Done()
		return fake.Exit(1), nil
	}).WithName("oci")
	clk := clocktest.New(time.Unix(1_700_000_000, 0))
	a := provider.New(provider.Options{
		Key: k, Chain: chain, Region: "eu", Executors: []string{"oci"}, Poll: 100 * time.Millisecond, Clock: clk,
		Sandboxes: map[string]sandbox.Executor{"oci": ex},
		Inventory: &hwinfo.Inventory{CPUModel: "test", CPUCores: 4, RAMBytes: 8 << 30, DiskFreeBytes: 100 << 30, OS: "linux", Arch: "amd64"},
		Figures:   figures(), WorkDir: t.TempDir(), Blobs: blob.NewClient("http://127.0.0.1:1"),
		Metrics:            provider.NewMetrics(prometheus.NewRegistry()),
		Relay:              func(dial provider.ReplicaDialer) provider.RelayLink { return &fakeLink{dial: dial} },
		AllowFetchNetworks: allow,
	})
	// The clock runs at about 50 times real time: releaseAfter (90 s)
	// passes in about 2 s.
	runFastClock(t, clk, a)
	return chain, func(job uint64) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		s, ok := inputs[fmt.Sprint(job)]
		return s, ok
	}
}

// released returns the reasons the agent handed jobs back with, by job.
func released(c *jobsChain) map[uint64]string {
	out := map[uint64]string{}
	for _, m := range sent[*ledger.MsgReleaseJob](c.svcChain) {
		out[m.JobID] = m.Reason
	}
	return out
}

// TestAgentURLInputsStayOffItsNetwork (issue 27): a job whose URL input
// points into the provider's own network (its loopback by address or by
// name, or a public server that redirects there) does not make the agent
// connect: the server there sees no request, and the job is handed back
// with fixed words that say nothing of the address, the refusal or the
// server. With the provider's loopback allowed in its options the input
// is fetched and the job runs; a reply that does not match its sha256 is
// handed back with no trace of what the reply hashed to.
func TestAgentURLInputsStayOffItsNetwork(t *testing.T) {
	body := []byte("what only the provider's loopback serves\n")
	sum := sha256.Sum256(body)
	var hits atomic.Int32
	inner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write(body)
	}))
	t.Cleanup(inner.Close)
	port := inner.Listener.Addr().(*net.TCPAddr).Port
	byName := fmt.Sprintf("http://localhost:%d/data", port)

	chain, _ := runURLAgent(t, nil, func(me *keys.Key) []*ledger.Job {
		return []*ledger.Job{urlJob(t, 1, me, inner.URL+"/data", sum), urlJob(t, 2, me, byName, sum)}
	})
	eventually(t, "both jobs handed back", func() bool { return len(released(chain)) == 2 })
	for id, reason := range released(chain) {
		if want := "could not get the job's data: input /in/data could not be fetched"; reason != want {
			t.Errorf("job %d handed back with %q, want %q", id, reason, want)
		}
	}

	// A "public" server the provider allows (127.0.0.2 stands in for
	// one) redirects to its loopback.
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no second loopback address to stand in for a public server: %v", err)
	}
	outer := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.RedirectHandler(inner.URL+"/data", http.StatusFound)}}
	outer.Start()
	t.Cleanup(outer.Close)
	chain, _ = runURLAgent(t, []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}, func(me *keys.Key) []*ledger.Job {
		return []*ledger.Job{urlJob(t, 3, me, outer.URL+"/public.csv", sum)}
	})
	eventually(t, "the redirected job handed back", func() bool { return len(released(chain)) == 1 })
	if got, want := released(chain)[3], "could not get the job's data: input /in/data could not be fetched"; got != want {
		t.Errorf("job 3 handed back with %q, want %q", got, want)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the server on the provider's loopback got %d requests", n)
	}

	// Loopback allowed: fetched, and run; a mismatch says so, and no more.
	var wrong [32]byte
	chain, seen := runURLAgent(t, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, func(me *keys.Key) []*ledger.Job {
		return []*ledger.Job{urlJob(t, 4, me, byName, sum), urlJob(t, 5, me, inner.URL+"/data", wrong)}
	})
	eventually(t, "job 4 run with its input", func() bool { _, ok := seen(4); return ok })
	if got, _ := seen(4); got != string(body)+"<nil>" {
		t.Errorf("job 4 saw %q, want %q", got, body)
	}
	eventually(t, "job 5 handed back", func() bool { return released(chain)[5] != "" })
	reason := released(chain)[5]
	if want := "could not get the job's data: input /in/data does not hash to its sha256"; reason != want {
		t.Errorf("job 5 handed back with %q, want %q", reason, want)
	}
	if strings.Contains(reason, hex.EncodeToString(sum[:])) {
		t.Errorf("the reason on chain %q carries the hash of the reply", reason)
	}
	if _, ok := released(chain)[4]; ok {
		t.Error("job 4, fetched, was handed back")
	}
}

// runFastClock runs agent a until the test ends, its clock clk advanced
// 100 ms every 2 ms of real time (about 50 times real time).
func runFastClock(t *testing.T, clk *clocktest.Fake, a *provider.Agent) {
	stopClock := make(chan struct{})
	go func() {
		for {
			select {
			case <-stopClock:
				return
			case <-time.After(2 * time.Millisecond):
				clk.Advance(100 * time.Millisecond)
			}
		}
	}()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		close(stopClock)
	})
}
