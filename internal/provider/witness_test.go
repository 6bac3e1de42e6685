package provider_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/hwinfo"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/provider"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/fake"
	"github.com/gpunet/gpunet/internal/validator"
)

// TestSilentReplicaUnpaid (issue 29): on a real chain whose node is its
// validator, and so the service witness, two providers' agents run
// replicas of one service; both report them ready, but one answers
// nothing that comes through the node (--fault-silent-service). The node's
// witness probes each replica through the relay every period: the honest
// replica is paid for the periods it was seen serving, the silent one
// nothing, and it is then released as unwitnessed (not slashed) while the
// honest one stays.
func TestSilentReplicaUnpaid(t *testing.T) {
	n := startNetworkInit(t, func(g *ledger.Genesis) {
		g.Params.ServiceServePeriod = 2
		g.Params.ServiceUnwitnessedPeriods = 3
		g.Params.ServiceHeartbeatInterval = 1
		g.Params.ServiceHeartbeatTimeout = 30
	}, ledgerManagedValidators(t), "owner", "honest", "silent") // its validator's node is the witness
	const price = 36_000 // usync per core-hour
	runServiceAgent(t, n, "honest", price, nil)
	runServiceAgent(t, n, "silent", price, &provider.Faults{SilentService: true})
	owner, err := n.kr.Get("owner")
	if err != nil {
		t.Fatal(err)
	}
	addrOf := func(name string) address.Address {
		k, err := n.kr.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		return k.Address
	}
	honest, silent := addrOf("honest"), addrOf("silent")
	waitFor(t, "both providers registered and staked", func() bool {
		kv, release := n.d.Node.View()
		defer release()
		for _, a := range []address.Address{honest, silent} {
			p, ok, err := ledger.GetProvider(kv, a)
			if err != nil || !ok || p.Stake == 0 || !p.Online {
				return false
			}
		}
		return true
	})
	svc := deployEcho(t, n, owner, 2, "b")
	replica := func(s *ledger.Service, a address.Address) *ledger.Replica {
		for i := range s.Replicas {
			if s.Replicas[i].Provider == a {
				return &s.Replicas[i]
			}
		}
		return nil
	}
	waitForWithin(t, time.Minute, "both replicas reported ready", func() bool {
		s := svc()
		h, q := replica(s, honest), replica(s, silent)
		return h != nil && q != nil && h.ReadyAt != 0 && q.ReadyAt != 0
	})
	// The silent replica is released once quorums saw the honest one
	// serve for 3 periods it was not seen in; by then the honest one has
	// been paid.
	var ended ledger.ReplicaEnd
	defer func() {
		if t.Failed() {
			s := svc()
			t.Logf("service: replicas %+v ended %+v", s.Replicas, s.Ended)
		}
	}()
	waitForWithin(t, 90*time.Second, "the silent replica released as unwitnessed", func() bool {
		for _, e := range svc().Ended {
			if e.Provider == silent {
				ended = e
				return true
			}
		}
		return false
	})
	s := svc()
	if ended.Code != ledger.EndUnwitnessed || ended.Paid != 0 || ended.ReadySeconds != 0 {
		t.Errorf("the silent replica ended %+v, want unwitnessed, paid 0 for 0 s", ended)
	}
	h := replica(s, honest)
	if h == nil || h.Paid == 0 || h.ServedPeriod == 0 {
		t.Fatalf("the honest replica: %+v, want it kept and paid for witnessed periods", h)
	}
	if want := h.PricePerHour * h.ReadySeconds / 3600; h.Paid != want {
		t.Errorf("honest paid %d, want %d × %d s / 3600 = %d", h.Paid, h.PricePerHour, h.ReadySeconds, want)
	}
	kv, release := n.d.Node.View()
	p, _, err := ledger.GetProvider(kv, silent)
	release()
	if err != nil || p.Slashed != 0 {
		t.Errorf("the silent provider: %v, slashed %d; want no slash (a partition looks the same)", err, p.Slashed)
	}
	t.Logf("honest replica: %d s witnessed, paid %d usync; silent replica: paid %d, released as %s", h.ReadySeconds, h.Paid, ended.Paid, ended.Code)
}

// runServiceAgent runs the agent of key name with a fake oci executor
// whose services answer GET /health and every other path, and a relay
// link to the network's node, as `provider start` has.
func runServiceAgent(t *testing.T, n *network, name string, price uint64, faults *provider.Faults) {
	t.Helper()
	startNetworkServiceAgent(t, n, name, price, faults)
}

// startNetworkServiceAgent is runServiceAgent, returning a func that stops the
// agent (at once; the test's end stops it too).
func startNetworkServiceAgent(t *testing.T, n *network, name string, price uint64, faults *provider.Faults) (stop func()) {
	t.Helper()
	k, err := n.kr.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	ex := fake.New(nil).WithName("oci").WithService(func(svc *sandbox.Service, logs io.Writer) ([]uint16, http.Handler, error) {
		mux := http.NewServeMux()
		mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {})
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello from %s", name) })
		return []uint16{8000}, mux, nil
	})
	a := provider.NewInHome(filepath.Join(n.home, "agents"), n.cl, nil, provider.Options{
		Key: k, Region: "eu", Executors: []string{"oci"}, Poll: 25 * time.Millisecond,
		Prices:    map[string]uint64{provider.AnyClass: price},
		Sandboxes: map[string]sandbox.Executor{"oci": ex},
		Inventory: &hwinfo.Inventory{CPUModel: "test", CPUCores: 4, RAMBytes: 8 << 30, DiskFreeBytes: 100 << 30, OS: "linux", Arch: "amd64"},
		Figures:   figures(), Faults: faults,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("agent %s: %v", name, err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// deployEcho deploys, from owner, a public service of replicas replicas
// of an echo image (its digest all c's) with readiness on /health, and
// returns a reader of its record (service 1: the network's first).
func deployEcho(t *testing.T, n *network, owner *keys.Key, replicas uint64, c string) func() *ledger.Service {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	spec := ledger.ServiceSpec{
		Name: "echo", Image: "example.com/echo@sha256:" + strings.Repeat(c, 64), CPUMilli: 500, Memory: 64 << 20, Disk: 1 << 20,
		MaxPricePerHour: 200_000, Replicas: replicas,
		Ports:     []ledger.ServicePort{{Port: 8000, Protocol: ledger.PortHTTP}},
		Readiness: ledger.ServiceReadiness{Port: 8000, Path: "/health", IntervalSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 3, StartSeconds: 60},
	}
	res, err := n.cl.SendMsg(t.Context(), owner, 0, &ledger.MsgDeployService{Spec: spec, Budget: 50_000_000, ConsumerKey: id.Recipient().String(), Public: true})
	if err != nil || res.Code != 0 {
		t.Fatalf("deploy: %v %+v", err, res)
	}
	return func() *ledger.Service {
		kv, release := n.d.Node.View()
		defer release()
		s, ok, err := ledger.GetService(kv, 1)
		if err != nil || !ok {
			t.Fatalf("service 1: %v %v", ok, err)
		}
		return s
	}
}

// ledgerManagedValidators sets a network up whose validator set the ledger
// manages: its validator is bonded by an operator account (with a key of
// its own), so its node acts for it (witnesses replicas, reports them
// down).
func ledgerManagedValidators(t *testing.T) func(*validator.InitOptions) {
	return func(o *validator.InitOptions) {
		o.ValidatorStake, o.OperatorBalance = validator.DefaultValidatorStake, validator.DefaultOperatorBalance
		o.OperatorKey = func(string) (address.Address, error) {
			kr, err := keys.Open(t.TempDir())
			if err != nil {
				return address.Address{}, err
			}
			k, err := kr.AddUnencrypted("operator")
			if err != nil {
				return address.Address{}, err
			}
			return k.Address, nil
		}
	}
}
