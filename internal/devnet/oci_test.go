package devnet

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/daemon"
	"github.com/gpunet/gpunet/internal/jobclient"
	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
	"github.com/gpunet/gpunet/internal/sandbox/oci/ocitest"
)

// TestContainerJobOnDevnet runs a container job end to end on a devnet: a
// static Go program is built into an image, served by a registry on
// 127.0.0.1, named by digest in a job spec, and run by a devnet provider
// (its real oci executor, runc) on a real chain; the consumer gets the
// job's live log and its decrypted outputs, computed from its encrypted
// inputs, and the job settles.
func TestContainerJobOnDevnet(t *testing.T) {
	_, err := oci.Probe(t.Context(), oci.Options{Dir: t.TempDir()})
	ocitest.RequireRunc(t, nil, err)

	prog := ocitest.BuildGo(t, "../sandbox/oci/testdata/jobprog")
	reg := ocitest.Registry(t, nil)
	ref := ocitest.Push(t, reg, "gpunet/jobprog", ocitest.ProgramImage(t, prog, "hello"))

	home := t.TempDir()
	if _, err := Setup(home, Options{BlockTime: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	d, err := daemon.Start(t.Context(), home, daemon.Options{APIAddr: "127.0.0.1:0", CheckInvariants: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	ctx, stop := context.WithCancel(context.Background())
	// The registry is on loopback: the providers pull from it because it
	// is allowed, as `devnet --registry` allows its own.
	ps, err := RunProviders(ctx, home, d.APIURL, ProviderOptions{N: 1, Poll: 50 * time.Millisecond, AllowRegistries: []netip.AddrPort{netip.MustParseAddrPort(reg)}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		stop()
		if errs := ps.Wait(); len(errs) > 0 {
			t.Errorf("providers: %v", errs)
		}
	}()
	if err := ps.WaitReady(t.Context(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	st := ps.Agents[0].Status()
	if !slices.Contains(st.Declared.Executors, "oci") {
		t.Fatalf("the devnet provider does not offer oci: executors %v, notes %q", st.Declared.Executors, st.Sandboxes)
	}

	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "greeting.txt"), []byte("hello, containers\n"), 0o644)
	spec := fmt.Sprintf(`name: container-upper
executor: oci
image: %s
command: [/job, write, /out]
env: {GREETING: hi}
inputs:
  - path: /in/greeting.txt
    from: ./greeting.txt
outputs: [/out]
resources: {cpu: 1, memory: 128MiB}
max_price: 0.5
timeout: 2m
`, ref)
	s, err := jobspec.Parse([]byte(spec), dir)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := keys.Open(filepath.Join(home, "keyring"))
	if err != nil {
		t.Fatal(err)
	}
	alice, err := kr.Get("alice")
	if err != nil {
		t.Fatal(err)
	}
	cl := chainclient.New(d.APIURL)
	jc := jobclient.New(cl, alice, home, "devnet-oci")
	jctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	id, err := jc.Submit(jctx, s)
	if err != nil {
		t.Fatal(err)
	}
	j, err := jc.Follow(jctx, id, 50*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	jc.FetchLogs(jctx, j, &logs)
	if j.State != ledger.JobSucceeded {
		t.Fatalf("job %s: %s\nlog:\n%s", j.State, j.Reason, logs.String())
	}
	out := t.TempDir()
	if err := jc.FetchOutputs(jctx, j, out); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(out, "out", "greeting.txt"))
	if err != nil || string(got) != "HELLO, CONTAINERS\n" {
		t.Fatalf("output greeting.txt = %q, %v", got, err)
	}
	summary, _ := os.ReadFile(filepath.Join(out, "out", "summary.txt"))
	if string(summary) != "1 files: greeting.txt\n" {
		t.Errorf("summary.txt = %q", summary)
	}
	for _, w := range []string{"wrote 1 files", "image sha256:", "pulled in"} {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("the job's log lacks %q:\n%s", w, logs.String())
		}
	}
	if j.Escrow != 0 || j.Cost == 0 {
		t.Errorf("settlement: escrow %d cost %d", j.Escrow, j.Cost)
	}

	// Another registry on this machine's loopback is not the devnet's:
	// its image is refused with no connection to it, and the reason on
	// chain says so in fixed words.
	other := ocitest.CountingRegistry(t, "127.0.0.1:0", nil)
	otherRef := ocitest.Push(t, other.Host, "gpunet/jobprog", ocitest.ProgramImage(t, prog, "hello", "other")) // another digest: not cached
	before := other.Conns()
	s2, err := jobspec.Parse([]byte(strings.Replace(spec, ref, otherRef, 1)), dir)
	if err != nil {
		t.Fatal(err)
	}
	id, err = jc.Submit(jctx, s2)
	if err != nil {
		t.Fatal(err)
	}
	if j, err = jc.Follow(jctx, id, 50*time.Millisecond, nil); err != nil {
		t.Fatal(err)
	}
	if want := "image " + otherRef + " could not be pulled: refused, not a public address"; j.State != ledger.JobFailed || !strings.HasSuffix(j.Reason, ": "+want) {
		t.Errorf("job of another loopback registry's image: %s %q, want failed with %q", j.State, j.Reason, want)
	}
	if n := other.Conns() - before; n != 0 {
		t.Errorf("the other registry on loopback got %d connections", n)
	}
}
