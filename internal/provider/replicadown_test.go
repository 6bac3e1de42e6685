package provider_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/provider"
)

// TestDeadProviderReplacedBeforeTimeout (issue 36): on a real chain whose
// one validator's node holds the agents' relay sessions, the provider of
// a service's only replica dies (its agent stops without giving the
// replica back, as a killed one would). The node sees the agent's session
// end, confirms through the relay that the replica cannot be reached, and
// reports it (report_replica_down, with its consensus key: all the power
// of this chain); the ledger ends it as unreachable and places the
// replacement, which answers through the node long before the 30-s
// heartbeat timeout would have ended the dead replica.
func TestDeadProviderReplacedBeforeTimeout(t *testing.T) {
	const timeout = 30 // service_heartbeat_timeout, seconds
	n := startNetworkInit(t, func(g *ledger.Genesis) {
		g.Params.ServiceHeartbeatInterval = 1
		g.Params.ServiceHeartbeatTimeout = timeout
		// No liveness challenges: at 50-ms blocks their misses would
		// mark the dead provider offline within seconds, another way
		// its replica ends.
		g.Params.LivenessRatePPM = 0
	}, ledgerManagedValidators(t), "owner", "first", "second") // its validator's node reports
	const price = 36_000
	stops := map[address.Address]func(){}
	names := map[address.Address]string{}
	for _, name := range []string{"first", "second"} {
		k, err := n.kr.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		stops[k.Address] = startNetworkServiceAgent(t, n, name, price, &provider.Faults{DieOnStop: true})
		names[k.Address] = name
	}
	waitFor(t, "both providers registered and staked", func() bool {
		kv, release := n.d.Node.View()
		defer release()
		for a := range stops {
			p, ok, err := ledger.GetProvider(kv, a)
			if err != nil || !ok || p.Stake == 0 || !p.Online {
				return false
			}
		}
		return true
	})
	owner, err := n.kr.Get("owner")
	if err != nil {
		t.Fatal(err)
	}
	svc := deployEcho(t, n, owner, 1, "c")
	defer func() {
		if t.Failed() {
			s := svc()
			t.Logf("service: replicas %+v ended %+v", s.Replicas, s.Ended)
		}
	}()
	// ask GETs the service's root through the node: its body, or "".
	ask := func() string {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.d.APIURL+"/svc/1/8000/", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != http.StatusOK {
			return ""
		}
		return string(b)
	}
	var dead address.Address
	waitForWithin(t, time.Minute, "the replica answering through the node", func() bool {
		s := svc()
		if len(s.Replicas) != 1 || s.Replicas[0].ReadyAt == 0 {
			return false
		}
		dead = s.Replicas[0].Provider
		return ask() == "hello from "+names[dead]
	})
	var other string
	for a, name := range names {
		if a != dead {
			other = name
		}
	}
	killed := time.Now()
	stops[dead]()
	waitForWithin(t, timeout/2*time.Second, "the replacement answering through the node", func() bool {
		return ask() == "hello from "+other
	})
	took := time.Since(killed)
	s := svc()
	if len(s.Ended) != 1 || s.Ended[0].Provider != dead || s.Ended[0].Code != ledger.EndUnreachable {
		t.Fatalf("ended %+v, want %s's replica, unreachable", s.Ended, names[dead])
	}
	kv, release := n.d.Node.View()
	p, _, err := ledger.GetProvider(kv, dead)
	release()
	if err != nil || p.Slashed != 0 {
		t.Errorf("the dead provider: %v, slashed %d; want no slash (unreachable is no proof of cheating)", err, p.Slashed)
	}
	t.Logf("provider killed → the replacement's first answer: %v (heartbeat timeout %d s)", took.Round(time.Millisecond), timeout)
}
