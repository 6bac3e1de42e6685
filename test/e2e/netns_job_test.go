package e2e

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpunet/gpunet/examples/mandelbrot/kernel"
	"github.com/gpunet/gpunet/internal/testnet"
)

// jobNet is four validators 30 ± 5 ms apart and two more hosts: a
// consumer (alice, funded at genesis, keys in consumerHome) and a provider
// (carol, likewise, in providerHome).
type jobNet struct {
	*testnet.Cluster
	consumerHome, providerHome string
}

func upJobNet(t *testing.T) *jobNet {
	t.Helper()
	needTestnet(t)
	root := t.TempDir()
	n := &jobNet{consumerHome: filepath.Join(root, "consumer"), providerHome: filepath.Join(root, "provider")}
	var alice, carol keyJSON
	gpunetJSON(t, &alice, "keys", "add", "alice", "--home", n.consumerHome)
	gpunetJSON(t, &carol, "keys", "add", "carol", "--home", n.providerHome)
	n.Cluster = upTestnet(t, testnet.ClusterOptions{
		Net:        testnet.Options{Delay: 30 * time.Millisecond, Jitter: 5 * time.Millisecond},
		Dir:        filepath.Join(root, "net"),
		Validators: 4,
		Hosts:      []string{"provider", "consumer"},
		BlockTime:  200 * time.Millisecond,
		InitArgs:   []string{"--account", alice.Address + "=1000sync", "--account", carol.Address + "=100sync"},
	})
	return n
}

// startProvider runs carol's agent on the provider host against nodes (a
// comma-separated list) and waits until the consumer sees its offer
// through via.
func (n *jobNet) startProvider(t *testing.T, nodes, via string) *hostProc {
	t.Helper()
	p := startOnHost(t, n.Cluster, "provider", "provider", "start", "--from", "carol", "--home", n.providerHome,
		"--node", nodes, "--bench-time", "200ms", "--region", "eu", "--price", "0.05sync", "--executors", "wasm")
	waitUntil(t, 60*time.Second, "carol's offer", func() bool {
		var offers []map[string]any
		r := onHost(t, n.Cluster, "consumer", time.Minute, "offers", "--node", via, "--output", "json")
		return r.code == 0 && jsonInto(r.stdout, &offers) && len(offers) == 1
	})
	return p
}

// mandelbrotSpec writes a wasm job rendering a w×h mandelbrot set with
// iter iterations, without verification (one provider), and returns its
// path.
func mandelbrotSpec(t *testing.T, w, h, iter int) string {
	t.Helper()
	dir := t.TempDir()
	wasm, err := os.ReadFile("../../examples/mandelbrot/mandelbrot.wasm")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "m.wasm"), wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	spec := fmt.Sprintf(`name: netns-mandelbrot
executor: wasm
module: ./m.wasm
args: ["%d", "%d", "%d"]
outputs: [/out]
resources: {cpu: 1, memory: 256MiB, gpu: {count: 0}}
max_price: 0.5
timeout: 5m
verification: none # one provider
`, w, h, iter)
	path := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkMandelbrot compares the output in out with the kernel run natively.
func checkMandelbrot(t *testing.T, out string, w, h, iter int) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(out, "out", "mandelbrot.pgm"))
	if err != nil {
		t.Fatal(err)
	}
	want := kernel.PGM(w, h, kernel.Render(kernel.Whole, w, h, iter))
	if sha256.Sum256(got) != sha256.Sum256(want) {
		t.Fatalf("output differs from the kernel run natively (%d vs %d bytes)", len(got), len(want))
	}
}

// TestNetnsConsumerAndProviderOnDifferentNodes: the consumer talks to
// node0 only and the provider to node2 only, each from its own host: the
// job's module and inputs, uploaded to node0's gateway, reach the
// provider through node2, its output reaches the consumer through node0,
// and the output is the kernel's. (It needs the gateways' fetch across
// nodes, issue 13's "data across nodes".)
func TestNetnsConsumerAndProviderOnDifferentNodes(t *testing.T) {
	parallel(t, weightLight)
	n := upJobNet(t)
	a, c := n.Node("node0").API, n.Node("node2").API
	n.startProvider(t, c, a)
	const w, h, iter = 200, 150, 500
	spec := mandelbrotSpec(t, w, h, iter)
	out := filepath.Join(t.TempDir(), "out")
	start := time.Now()
	r := onHost(t, n.Cluster, "consumer", 2*time.Minute, "job", "run", spec, "--from", "alice", "--home", n.consumerHome, "--node", a, "--out", out)
	if r.code != 0 {
		t.Fatalf("%s", r)
	}
	t.Logf("submit → verified output, consumer on node0, provider on node2, 30±5 ms between hosts: %s", time.Since(start).Round(time.Millisecond))
	checkMandelbrot(t, out, w, h, iter)
}

// TestNetnsProviderContinuesThroughAnotherNode: the provider is given
// node2 and node3 (--node C,D) and the consumer the same; node2's process
// is killed while the job runs; the provider goes on through node3, the
// job succeeds, and the consumer fetches the right output through node3.
func TestNetnsProviderContinuesThroughAnotherNode(t *testing.T) {
	parallel(t, weightLight)
	n := upJobNet(t)
	nodes := n.Node("node2").API + "," + n.Node("node3").API
	n.startProvider(t, nodes, nodes)
	const w, h, iter = 600, 400, 3000 // seconds of work, to be killed in the middle of
	spec := mandelbrotSpec(t, w, h, iter)
	var sub struct {
		ID uint64 `json:"id"`
	}
	onHostJSON(t, n.Cluster, "consumer", &sub, "job", "submit", spec, "--from", "alice", "--home", n.consumerHome, "--node", nodes)
	id := fmt.Sprint(sub.ID)
	status := func() jobJSON {
		var j jobJSON
		// --from grants the job key when the provider waits for it.
		onHostJSON(t, n.Cluster, "consumer", &j, "job", "status", id, "--from", "alice", "--home", n.consumerHome, "--node", nodes)
		return j
	}
	waitUntil(t, 60*time.Second, "job running", func() bool { return status().State == "running" })
	n.Node("node2").Kill()
	killed := time.Now()
	t.Logf("killed node2 while job %s ran", id)

	var done jobJSON
	waitUntil(t, 2*time.Minute, "job done with node2 gone", func() bool {
		done = status()
		return done.State == "succeeded" || done.State == "failed" || done.State == "cancelled"
	})
	if done.State != "succeeded" || done.Attempts != 1 {
		t.Fatalf("after node2 was killed: %+v, want succeeded at the first attempt", done)
	}
	t.Logf("job succeeded %s after node2 was killed", time.Since(killed).Round(time.Millisecond))
	out := t.TempDir()
	if r := onHost(t, n.Cluster, "consumer", 2*time.Minute, "job", "get", id, "--from", "alice", "--home", n.consumerHome, "--node", nodes, "--out", out); r.code != 0 {
		t.Fatalf("%s", r)
	}
	checkMandelbrot(t, out, w, h, iter)
}
