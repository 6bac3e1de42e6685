package testnet_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/testnet"
)

// The tests re-run this test binary inside the namespaces as a small TCP
// echo server or client (helperMain), so that they need nothing but ip.
const helperEnv = "GPUNET_TESTNET_HELPER"

func TestMain(m *testing.M) {
	if role := os.Getenv(helperEnv); role != "" {
		os.Exit(helperMain(role, os.Args[len(os.Args)-1]))
	}
	os.Exit(m.Run())
}

// helperMain is "server ADDR" (echo each line back) or "client ADDR"
// (connect, time 10 one-line round trips, print them as JSON in ms).
func helperMain(role, addr string) int {
	switch role {
	case "server":
		l, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("listening")
		for {
			c, err := l.Accept()
			if err != nil {
				return 1
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(line))
				}
			}()
		}
	case "client":
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		r := bufio.NewReader(c)
		var rtts []float64
		for range 10 {
			t0 := time.Now()
			c.Write([]byte("ping\n"))
			if _, err := r.ReadString('\n'); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			rtts = append(rtts, float64(time.Since(t0).Microseconds())/1e3)
		}
		json.NewEncoder(os.Stdout).Encode(rtts)
		return 0
	}
	return 2
}

// needNet skips the test where the machine cannot run a testnet, but
// fails it under CI, where it must.
func needNet(t *testing.T) {
	t.Helper()
	if err := testnet.Check(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: %v", err)
		}
		t.Skip(err)
	}
}

func newNet(t *testing.T, o testnet.Options, hosts ...string) *testnet.Net {
	t.Helper()
	needNet(t)
	n, err := testnet.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	for _, h := range hosts {
		if _, err := n.AddHost(t.Context(), h); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// helper runs this binary as role inside host h.
func helper(t *testing.T, h *testnet.Host, role, addr string) *exec.Cmd {
	cmd := h.Command(t.Context(), os.Args[0], "-test.run=^$", addr)
	cmd.Env = append(os.Environ(), helperEnv+"="+role)
	return cmd
}

// TestHostsTalkWithDelay: a client in one namespace reaches a server in
// another at its 10.77 address, every round trip taking twice the one-way
// delay (within the jitter), and not at 127.0.0.1, which is each host's own.
func TestHostsTalkWithDelay(t *testing.T) {
	const delay, jitter = 25 * time.Millisecond, 5 * time.Millisecond
	n := newNet(t, testnet.Options{Delay: delay, Jitter: jitter}, "a", "b")
	a, b := n.Host("a"), n.Host("b")
	if a.Addr.String() != "10.77.0.2" || b.Addr.String() != "10.77.0.3" {
		t.Fatalf("addresses %s, %s; want 10.77.0.2, 10.77.0.3", a.Addr, b.Addr)
	}
	srvAddr := net.JoinHostPort(b.Addr.String(), "7000")
	srv := helper(t, b, "server", srvAddr)
	out, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "listening\n" {
		t.Fatalf("server: %q, %v", line, err)
	}

	got, err := helper(t, a, "client", srvAddr).Output()
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	var rtts []float64
	if err := json.Unmarshal(got, &rtts); err != nil {
		t.Fatalf("client printed %q: %v", got, err)
	}
	slices.Sort(rtts)
	lo, hi := float64(2*(delay-jitter)/time.Millisecond), float64(2*(delay+jitter)/time.Millisecond)
	if rtts[0] < lo || rtts[len(rtts)/2] > hi+20 {
		t.Errorf("round trips %v ms: want each ≥ %.0f ms and the median ≤ %.0f ms", rtts, lo, hi+20)
	}
	t.Logf("round trips a→b→a with %s ± %s one way: %v ms; router %+v", delay, jitter, rtts, n.Stats())

	// 127.0.0.1 in a is a's own loopback: nothing listens there.
	if out, err := helper(t, a, "client", "127.0.0.1:7000").CombinedOutput(); err == nil || !strings.Contains(string(out), "refused") {
		t.Errorf("a reached 127.0.0.1:7000 (%q, %v); want connection refused", out, err)
	}
}

// TestCloseRemovesEverything: after Close the namespaces are gone and the
// processes started in them are dead; Sweep removes namespaces whose
// creator died.
func TestCloseRemovesEverything(t *testing.T) {
	needNet(t)
	n, err := testnet.New(testnet.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := n.AddHost(t.Context(), "only")
	if err != nil {
		n.Close()
		t.Fatal(err)
	}
	sleep := h.Command(t.Context(), "sleep", "60")
	if err := sleep.Start(); err != nil {
		n.Close()
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- sleep.Wait() }()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("the process in the host outlived Close by 10s")
	}
	if _, err := os.Stat("/run/netns/" + h.NS); !os.IsNotExist(err) {
		t.Errorf("namespace %s still exists after Close (%v)", h.NS, err)
	}

	// A namespace named for a process that no longer exists.
	stale := testnet.Prefix + "999999999-000000-stale"
	if out, err := exec.Command("ip", "netns", "add", stale).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	removed, err := testnet.Sweep()
	if err != nil || !slices.Contains(removed, stale) {
		t.Errorf("Sweep = %v, %v; want %s removed", removed, err, stale)
	}
	if _, err := os.Stat("/run/netns/" + stale); !os.IsNotExist(err) {
		t.Errorf("namespace %s still exists after Sweep", stale)
		exec.Command("ip", "netns", "del", stale).Run()
	}
}
