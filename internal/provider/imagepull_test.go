package provider_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpunet/gpunet/internal/clock/clocktest"
	"github.com/gpunet/gpunet/internal/hwinfo"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/provider"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
	"github.com/gpunet/gpunet/internal/sandbox/oci/ocitest"
)

// TestAgentImagesStayOffItsNetwork (issue 27): an image named on the
// provider's own loopback, a job's or a service's, is not pulled by the
// executors an agent opens (OpenSandboxes, as `provider start` and the
// devnet do): the registry there sees no connection, and the job fails,
// the replica is given back, with fixed words that name the image and
// the cause, which the owner's log says too. With the loopback allowed
// (`--allow-fetch-network`) the pull reaches the registry; what it
// answers (here, an error with a secret in it) is in the provider's log
// and nowhere on chain or in the owner's log.
func TestAgentImagesStayOffItsNetwork(t *testing.T) {
	const secret = "SECRET-of-the-provider's-registry-91c4"
	reg := ocitest.CountingRegistry(t, "127.0.0.1:0", func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.Contains(r.URL.Path, "/manifests/") {
				w.WriteHeader(http.StatusNotFound)
				fmt.Fprintf(w, `{"errors":[{"code":"MANIFEST_UNKNOWN","message":%q}]}`, secret)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	image := reg.Host + "/private/app@sha256:" + strings.Repeat("ab", 32)

	for _, c := range []struct {
		name  string
		allow []netip.Prefix
		cause oci.PullCause
	}{
		{"refused", nil, oci.PullRefused},
		{"allowed", []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, oci.PullNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := reg.Conns()
			provLog := &syncLog{}
			sb, err := provider.OpenSandboxes(t.Context(), t.TempDir(), provider.SandboxOptions{
				AllowFetchNetworks: c.allow, Logger: slog.New(slog.NewTextHandler(provLog, nil)),
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(sb.Close)
			ex, ok := sb.Executors[oci.Name].(*oci.Executor)
			if !ok {
				ocitest.RequireRunc(t, nil, sb.Offers([]string{oci.Name}))
			}
			want := "image " + image + " could not be pulled: " + string(c.cause)

			// A job: its result's reason goes on chain, its log to its owner.
			var logs bytes.Buffer
			res, err := ex.Run(t.Context(), &sandbox.Job{
				ID: "1", Image: image, WorkDir: t.TempDir(), Outputs: []string{"/out"}, Limits: sandbox.Limits{Timeout: time.Minute},
			}, &logs)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Failed || res.Reason != want {
				t.Errorf("job's reason %q, want %q", res.Reason, want)
			}
			if !strings.Contains(logs.String(), want) || strings.Contains(logs.String(), secret) {
				t.Errorf("the job's log should say %q and nothing the registry said:\n%s", want, logs.String())
			}

			// A service: its replica is given back, the reason on chain.
			if !ex.Capabilities().Rootless {
				chain, owner := runImageAgent(t, sb.Executors, image)
				eventually(t, "the replica given back", func() bool { return len(sent[*ledger.MsgReleaseReplica](chain)) > 0 })
				if got := sent[*ledger.MsgReleaseReplica](chain)[0].Reason; got != "did not start: "+want {
					t.Errorf("release reason %q, want %q", got, "did not start: "+want)
				}
				eventually(t, "the owner's log", func() bool { return strings.Contains(chain.serviceLog(t, 1, owner), want) })
				if l := chain.serviceLog(t, 1, owner); strings.Contains(l, secret) {
					t.Errorf("the owner's log carries what the registry said:\n%s", l)
				}
			}

			n := reg.Conns() - before
			switch {
			case c.allow == nil && n != 0:
				t.Fatalf("the registry on the provider's loopback got %d connections", n)
			case c.allow != nil && n == 0:
				t.Fatal("the allowed registry got no connection")
			case c.allow != nil && !strings.Contains(provLog.String(), secret):
				t.Errorf("the provider's log does not say what the registry answered:\n%s", provLog.String())
			}
		})
	}
}

// runImageAgent runs an agent with executors sbs, on a fast fake clock,
// against a chain listing one service of image with a replica on it, and
// returns the chain and the service owner's identity.
func runImageAgent(t *testing.T, sbs map[string]sandbox.Executor, image string) (*svcChain, *age.X25519Identity) {
	t.Helper()
	kr, err := keys.Open(filepath.Join(t.TempDir(), "keyring"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := kr.AddUnencrypted("p1")
	if err != nil {
		t.Fatal(err)
	}
	owner, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	chain := &svcChain{me: k.Address, logs: map[uint64][][]byte{}}
	chain.setServices(&ledger.Service{
		ID: 1, State: ledger.ServiceActive, ConsumerKey: owner.Recipient().String(),
		Spec: ledger.ServiceSpec{
			Name: "s", Image: image, Memory: 64 << 20, CPUMilli: 500, Disk: 1 << 20,
			Ports:     []ledger.ServicePort{{Port: 8000, Protocol: ledger.PortHTTP}},
			Readiness: ledger.ServiceReadiness{Port: 8000, Path: "/health", IntervalSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 2, StartSeconds: 30},
		},
		Replicas: []ledger.Replica{{Provider: k.Address, AssignedAt: 100}},
	})
	clk := clocktest.New(time.Unix(1_700_000_000, 0))
	a := provider.New(provider.Options{
		Key: k, Chain: chain, Region: "eu", Executors: []string{"oci"}, Poll: 100 * time.Millisecond, Clock: clk,
		Sandboxes: sbs,
		Inventory: &hwinfo.Inventory{CPUModel: "test", CPUCores: 4, RAMBytes: 8 << 30, DiskFreeBytes: 100 << 30, OS: "linux", Arch: "amd64"},
		Figures:   figures(), WorkDir: t.TempDir(),
		Metrics: provider.NewMetrics(prometheus.NewRegistry()),
		Relay:   func(dial provider.ReplicaDialer) provider.RelayLink { return &fakeLink{dial: dial} },
	})
	runFastClock(t, clk, a)
	return chain, owner
}
