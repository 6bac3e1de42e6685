package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/testnet"
)

// The netns tests run each node, provider and consumer in its own network
// namespace with its own address (internal/testnet), with a delay between
// them. They need root and the ip command: without them they skip, and
// under CI=true they fail.

// needTestnet skips (or, with CI=true, fails) a test this machine cannot
// run a testnet for.
func needTestnet(t *testing.T) {
	t.Helper()
	if err := testnet.Check(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and this test needs a testnet: %v", err)
		}
		t.Skip(err)
	}
}

// testnetMu lets one test at a time run testnets: they share the address
// plan (testnet.Subnet) and the host's namespace bookkeeping.
var testnetMu sync.Mutex

// lockTestnet holds testnetMu until t ends.
func lockTestnet(t *testing.T) {
	testnetMu.Lock()
	t.Cleanup(testnetMu.Unlock)
}

// upTestnet starts a cluster with o (Bin, Dir and Env filled in) and
// removes it when the test ends, showing the nodes' logs if it failed.
func upTestnet(t *testing.T, o testnet.ClusterOptions) *testnet.Cluster {
	t.Helper()
	needTestnet(t)
	lockTestnet(t)
	o.Bin, o.Env = gpunetBin, cleanEnv()
	o.InitArgs = withoutHWChallenges(slices.Clone(o.InitArgs))
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c, err := testnet.Up(ctx, o)
	if err != nil {
		t.Fatalf("testnet up: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes {
				b, _ := os.ReadFile(n.Log)
				t.Logf("--- %s (%s, %s) log tail:\n%s", n.Name, n.Host.Addr, n.Home, tail(string(b), 3000))
			}
			t.Logf("router: %+v", c.Stats())
		}
		if err := c.Close(); err != nil {
			t.Errorf("testnet close: %v", err)
		}
	})
	return c
}

// onHost runs the gpunet CLI on host to completion (at most timeout).
func onHost(t *testing.T, c *testnet.Cluster, host string, timeout time.Duration, args ...string) cliResult {
	t.Helper()
	h := c.Host(host)
	if h == nil {
		t.Fatalf("no host %q", host)
	}
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := c.Command(ctx, h, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("gpunet %v on %s: timed out after %s\nstdout: %s\nstderr: %s", args, host, timeout, out.String(), tail(errOut.String(), 3000))
	}
	r := cliResult{args: args, code: exitCode(err), stdout: out.String(), stderr: errOut.String()}
	if r.code < 0 {
		t.Fatalf("gpunet %v on %s did not run: %v", args, host, err)
	}
	return r
}

// onHostJSON runs the CLI on host with --output json, requires exit 0 and
// decodes stdout into v.
func onHostJSON(t *testing.T, c *testnet.Cluster, host string, v any, args ...string) {
	t.Helper()
	r := onHost(t, c, host, 2*time.Minute, append(args, "--output", "json")...)
	if r.code != 0 {
		t.Fatalf("on %s: %s", host, r)
	}
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("on %s: %s\ndecode: %v", host, r, err)
	}
}

// hostProc is a long-running gpunet process on a host (a provider agent).
type hostProc struct {
	cmd    *exec.Cmd
	stdout *lineBuffer
	stderr *lineBuffer
	done   chan struct{}
}

// startOnHost starts gpunet with args on host; it is killed when the test
// ends, its output shown if the test failed.
func startOnHost(t *testing.T, c *testnet.Cluster, host string, args ...string) *hostProc {
	t.Helper()
	p := &hostProc{stdout: newLineBuffer(), stderr: newLineBuffer(), done: make(chan struct{})}
	p.cmd = c.Command(context.Background(), c.Host(host), args...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %v on %s: %v", args, host, err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("--- gpunet %s on %s\nstdout:\n%s\nstderr (tail):\n%s", strings.Join(args, " "), host, tail(p.stdout.String(), 2000), tail(p.stderr.String(), 4000))
		}
	})
	return p
}

// jsonInto decodes s into v and reports whether it could.
func jsonInto(s string, v any) bool { return json.Unmarshal([]byte(s), v) == nil }
