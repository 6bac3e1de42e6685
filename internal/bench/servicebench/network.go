package servicebench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpunet/gpunet/examples/tinylm/lmimage"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/devnet"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
)

// network is two validators, each a `gpunet node` process; two providers,
// each a `gpunet provider start` process with a home of its own, whose
// agents talk to node1 only; and an owner, alice, who deploys through
// node0 and whose client asks node0: every answer crosses both nodes.
type network struct {
	o            Options
	root         string
	keyHome      string
	node0, node1 string
	nodes        []*proc
	provs        map[string]*provider // by address
	reg          *devnet.Registry
	image        string
	cl           *chainclient.Client // node0's API
	http         *http.Client
	progress     func(string, ...any)
	// relayAtStart: the agents open their relay session when they start
	// (newer binaries); a restarted one is waited for until it has.
	relayAtStart bool
}

type provider struct {
	name, home, addr string
	p                *proc
}

// servicePrice is what each provider asks (per core-hour).
const servicePrice = "0.05sync"

func startNetwork(ctx context.Context, o Options, progress func(string, ...any)) (_ *network, err error) {
	if _, err := oci.Probe(ctx, oci.Options{Dir: filepath.Join(o.Dir, "probe")}); err != nil {
		return nil, fmt.Errorf("containers cannot run here (the benchmark needs runc): %w", err)
	}
	if err := lmimage.Supported(); err != nil {
		return nil, fmt.Errorf("the example image cannot be built here: %w", err)
	}
	bin, err := absBin(o.Bin)
	if err != nil {
		return nil, err
	}
	o.Bin = bin
	n := &network{o: o, root: o.Dir, provs: map[string]*provider{}, progress: progress,
		http: &http.Client{Timeout: 10 * time.Second}}
	defer func() {
		if err != nil {
			err = errors.Join(err, n.stop())
		}
	}()
	n.keyHome = filepath.Join(n.root, "alice")
	var k struct {
		Address string `json:"address"`
	}
	if err := runJSON(ctx, bin, &k, "keys", "add", "alice", "--home", n.keyHome); err != nil {
		return nil, err
	}
	accounts := []string{"--account", k.Address + "=1000sync"}
	for _, name := range []string{"carol", "dave"} {
		home := filepath.Join(n.root, name)
		if err := runJSON(ctx, bin, &k, "keys", "add", name, "--home", home); err != nil {
			return nil, err
		}
		n.provs[k.Address] = &provider{name: name, home: home, addr: k.Address}
		accounts = append(accounts, "--account", k.Address+"=100sync")
	}
	params := filepath.Join(n.root, "params.json")
	if err := os.WriteFile(params, fmt.Appendf(nil, `{"service_heartbeat_interval": %d, "service_heartbeat_timeout": %d, "min_fee": 0}`,
		o.HeartbeatInterval, o.HeartbeatTimeout), 0o644); err != nil {
		return nil, err
	}
	var homes struct {
		Homes []string `json:"homes"`
	}
	progress("starting two nodes (%s blocks)…", o.BlockTime)
	if err := runJSON(ctx, bin, &homes, append([]string{"init", "--validators", "2", "--home", filepath.Join(n.root, "net"),
		"--chain-id", "bench-services", "--block-time", o.BlockTime.String(), "--genesis-params", params, "--hw-challenges=false"}, accounts...)...); err != nil {
		return nil, err
	}
	apis := make([]string, len(homes.Homes))
	for i, h := range homes.Homes {
		p, err := startProc(bin, fmt.Sprintf("node%d", i), "node", "--home", h, "--output", "json")
		if err != nil {
			return nil, err
		}
		n.nodes = append(n.nodes, p)
		first, err := p.stdout.first(ctx, 90*time.Second)
		if err != nil {
			return nil, fmt.Errorf("node%d: %w: %s", i, err, tail(p.stderr.String(), 2000))
		}
		var info struct {
			API string `json:"api"`
		}
		if err := json.Unmarshal([]byte(first), &info); err != nil {
			return nil, fmt.Errorf("node%d's first line %q: %w", i, first, err)
		}
		apis[i] = strings.TrimSuffix(info.API, "/")
		if !strings.HasPrefix(apis[i], "http") {
			apis[i] = "http://" + apis[i]
		}
	}
	if len(apis) != 2 {
		return nil, fmt.Errorf("init made %d homes, want 2", len(apis))
	}
	n.node0, n.node1 = apis[0], apis[1]
	n.cl = chainclient.New(n.node0)

	progress("building and publishing the example image (examples/tinylm)…")
	if n.reg, _, err = devnet.StartRegistry(n.root, "127.0.0.1:0"); err != nil {
		return nil, err
	}
	bin2 := filepath.Join(n.root, "tinylm")
	if err := lmimage.BuildProgram(ctx, o.Repo, bin2); err != nil {
		return nil, err
	}
	img, err := lmimage.Build(bin2)
	if err != nil {
		return nil, err
	}
	if n.image, err = oci.PushImage(n.reg.Addr, lmimage.Repo, img); err != nil {
		return nil, err
	}

	progress("starting two providers (connected to node1 only)…")
	for _, pv := range n.provs {
		if err := n.startProvider(pv); err != nil {
			return nil, err
		}
	}
	if err := n.waitOffers(ctx, len(n.provs), 2*time.Minute); err != nil {
		return nil, err
	}
	// A relay session opened when the agent starts is up within its
	// handshake: give it that long before it is judged.
	time.Sleep(time.Second)
	n.relayAtStart = n.relayConnected()
	return n, nil
}

func (n *network) startProvider(pv *provider) error {
	p, err := startProc(n.o.Bin, "provider "+pv.name, "provider", "start", "--from", pv.name, "--home", pv.home,
		"--node", n.node1, "--bench-time", "200ms", "--region", "eu", "--price", servicePrice, "--allow-fetch-network", "127.0.0.1")
	if err != nil {
		return err
	}
	pv.p = p
	return nil
}

// logs is the tail of each provider's log, for an error.
func (n *network) logs() string {
	var b strings.Builder
	for _, pv := range n.provs {
		if pv.p != nil {
			fmt.Fprintf(&b, "\n--- provider %s (%s):\n%s", pv.name, pv.addr, tail(pv.p.stderr.String(), 3000))
		}
	}
	return b.String()
}

// relayConnected reports whether every provider's agent holds its relay
// session now.
func (n *network) relayConnected() bool {
	for _, pv := range n.provs {
		if _, ok := pv.p.stderr.find(time.Time{}, "relay: connected"); !ok {
			return false
		}
	}
	return true
}

// waitOffers waits until count providers offer containers, online.
func (n *network) waitOffers(ctx context.Context, count int, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		offs, err := n.cl.Offers(ctx, "executor=oci", "", false)
		online := 0
		if err == nil {
			seen := map[string]bool{}
			for _, o := range offs {
				if o.Online && !seen[o.Address] {
					seen[o.Address] = true
					online++
				}
			}
		}
		if online >= count {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d providers offer containers after %s (last error: %v)%s", online, count, d, err, n.logs())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (n *network) stop() error {
	for _, pv := range n.provs {
		if pv.p != nil {
			pv.p.stop(15 * time.Second)
		}
	}
	for _, pv := range n.provs {
		// A killed provider's containers outlive it until an executor on
		// its directory cleans up, as its next start would.
		if ex, err := oci.New(context.Background(), oci.Options{Dir: filepath.Join(pv.home, "provider", "oci")}); err == nil {
			ex.Close()
		}
	}
	for _, p := range n.nodes {
		p.stop(15 * time.Second)
		// Kept with the homes (--home): what each node said.
		p.stderr.save(filepath.Join(n.root, p.name+".log"))
	}
	if n.reg != nil {
		n.reg.Close()
	}
	return nil
}

// spec writes a service spec of the example image with replicas replicas.
func (n *network) spec(name string, replicas int) (string, error) {
	p := filepath.Join(n.root, name+".yaml")
	y := fmt.Sprintf(`kind: service
name: %s
image: %s
args: ["-addr", ":8000"]
ports:
  - {port: 8000, name: api}
readiness: {path: /health, interval: %s, timeout: 1s, failure_threshold: 3, start: 1m}
resources: {cpu: 0.5, memory: 128MiB, disk: 64MiB}
replicas: %d
max_price: 1 SYNC/h
budget: 2 SYNC
`, name, n.image, n.o.ReadyInterval, replicas)
	return p, os.WriteFile(p, []byte(y), 0o644)
}

type deployed struct {
	ID        uint64 `json:"id"`
	AccessKey string `json:"access_key"`
}

func (n *network) deploy(ctx context.Context, name string, replicas int) (deployed, error) {
	var d deployed
	spec, err := n.spec(name, replicas)
	if err != nil {
		return d, err
	}
	if err := runJSON(ctx, n.o.Bin, &d, "service", "deploy", spec, "--from", "alice", "--home", n.keyHome, "--node", n.node0); err != nil {
		return d, err
	}
	if d.ID == 0 {
		return d, errors.New("deploy printed no service id")
	}
	return d, nil
}

func (n *network) stopService(ctx context.Context, id uint64) error {
	return runJSON(ctx, n.o.Bin, nil, "service", "stop", fmt.Sprint(id), "--from", "alice", "--home", n.keyHome, "--node", n.node0)
}

// get asks node0 for the service's /health with its key: the status, or
// 0 when no answer came.
func (n *network) get(ctx context.Context, d deployed) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/svc/%d/8000/health", n.node0, d.ID), nil)
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+d.AccessKey)
	resp, err := n.http.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// watch follows a service at node0 until stop: each Poll it asks the port
// (first200 is the first 200 answer after since) and reads the record.
type watch struct {
	first200 time.Time
	failed   int
	// readyBy is when node0 first showed each provider's replica ready;
	// goneAt when a provider's replica was first missing or not ready
	// after it had been ready.
	readyBy map[string]time.Time
	goneAt  map[string]time.Time
	// endedAs is the code each provider's replica ended with
	// (ledger.ReplicaEnd.Code), as node0's record says.
	endedAs map[string]string
}

// until polls the service's port and record every Poll until cond holds
// or d passes.
func (n *network) until(ctx context.Context, d deployed, w *watch, dur time.Duration, cond func(*watch) bool) error {
	if w.readyBy == nil {
		w.readyBy, w.goneAt = map[string]time.Time{}, map[string]time.Time{}
	}
	deadline := time.Now().Add(dur)
	recordEvery := 2 // the record every other poll: its reads cost the node
	for i := 0; ; i++ {
		if i%recordEvery == 0 {
			if s, err := n.cl.Service(ctx, d.ID); err == nil {
				now := time.Now()
				ready := map[string]bool{}
				for _, r := range s.Replicas {
					if r.Ready && r.ReadyAt != 0 {
						ready[r.Provider.String()] = true
						if _, ok := w.readyBy[r.Provider.String()]; !ok {
							w.readyBy[r.Provider.String()] = now
						}
					}
				}
				for p := range w.readyBy {
					if _, gone := w.goneAt[p]; !gone && !ready[p] {
						w.goneAt[p] = now
					}
				}
				for _, e := range s.Ended {
					if w.endedAs == nil {
						w.endedAs = map[string]string{}
					}
					w.endedAs[e.Provider.String()] = e.Code
				}
			}
		}
		if w.first200.IsZero() {
			code := n.get(ctx, d)
			if code == http.StatusOK {
				w.first200 = time.Now()
			} else {
				w.failed++
			}
		}
		if cond(w) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("service %d: not there after %s (answered: %v, ready: %v, gone: %v)", d.ID, dur, !w.first200.IsZero(), w.readyBy, w.goneAt)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(n.o.Poll):
		}
	}
}

// warm runs a service of two replicas until both answer, so that both
// providers have the image unpacked, then stops it.
func (n *network) warm(ctx context.Context) error {
	d, err := n.deploy(ctx, "warm", 2)
	if err != nil {
		return err
	}
	var w watch
	if err := n.until(ctx, d, &w, 3*time.Minute, func(w *watch) bool { return len(w.readyBy) == 2 && !w.first200.IsZero() }); err != nil {
		return err
	}
	return n.stopService(ctx, d.ID)
}

// replicaSteps are the provider's side of a replica's start, read from
// its log after since: when its agent noticed the assignment, its
// container started (logged by newer agents only) and it was ready.
func replicaSteps(pv *provider, id uint64, since time.Time) (notice, started, ready time.Time) {
	svc := fmt.Sprintf("service=%d", id)
	notice, _ = pv.p.stderr.find(since, "starting service replica", svc)
	started, _ = pv.p.stderr.find(since, "service replica's container started", svc)
	ready, _ = pv.p.stderr.find(since, "service replica ready", svc)
	return
}

func span(from, to time.Time) float64 {
	if from.IsZero() || to.IsZero() {
		return -1
	}
	return ms(to.Sub(from))
}

// startSteps are the steps from a placement to the first answer.
func startSteps(placed time.Time, pv *provider, id uint64, visible, first time.Time) []Step {
	notice, started, ready := replicaSteps(pv, id, placed.Add(-5*time.Second))
	steps := []Step{{"agent notices the assignment", span(placed, notice)}}
	if started.IsZero() {
		steps = append(steps, Step{"image + container start", -1}, Step{"readiness (container start included)", span(notice, ready)})
	} else {
		steps = append(steps, Step{"image + container start", span(notice, started)}, Step{"readiness", span(started, ready)})
	}
	return append(steps,
		Step{"heartbeat → block → node0 sees it ready", span(ready, visible)},
		Step{"first proxied answer through node0", span(visible, first)})
}

// deployAndFailover deploys a one-replica service and times its first
// answer through node0, then kills its provider and times the first
// answer of the replacement; the killed provider is started again.
func (n *network) deployAndFailover(ctx context.Context) (dep, fail Path, err error) {
	t0 := time.Now()
	d, err := n.deploy(ctx, fmt.Sprintf("bench-%d", t0.UnixNano()), 1)
	if err != nil {
		return dep, fail, err
	}
	committed := time.Now()
	var w watch
	if err := n.until(ctx, d, &w, 2*time.Minute, func(w *watch) bool { return !w.first200.IsZero() && len(w.readyBy) == 1 }); err != nil {
		return dep, fail, err
	}
	var first *provider
	var visible time.Time
	for p, at := range w.readyBy {
		first, visible = n.provs[p], at
	}
	if first == nil {
		return dep, fail, fmt.Errorf("service %d: its replica is on no provider of the benchmark", d.ID)
	}
	visible = minTime(visible, w.first200) // the record is read every other poll
	if notice, _, _ := replicaSteps(first, d.ID, t0); !notice.IsZero() {
		// The agent may see the block before the CLI has printed and
		// exited: the placement is then no later than that.
		committed = minTime(committed, notice)
	}
	dep = Path{TotalMs: span(t0, w.first200), Steps: append([]Step{{"deploy tx committed (CLI: sign, send, block)", span(t0, committed)}},
		startSteps(committed, first, d.ID, visible, w.first200)...)}

	// Failover: the provider is killed; the ledger ends its replica when
	// the validators report it unreachable (or at its missed heartbeats)
	// and places it on the other one.
	first.p.kill()
	killed := time.Now()
	w2 := watch{readyBy: map[string]time.Time{first.addr: killed}, goneAt: map[string]time.Time{}}
	var second *provider
	for _, pv := range n.provs {
		if pv != first {
			second = pv
		}
	}
	if err := n.until(ctx, d, &w2, 2*time.Minute, func(w *watch) bool {
		_, ok := w.readyBy[second.addr]
		return ok && !w.first200.IsZero()
	}); err != nil {
		return dep, fail, err
	}
	dropped := w2.goneAt[first.addr]
	if notice, _, _ := replicaSteps(second, d.ID, killed); !notice.IsZero() && !dropped.IsZero() {
		// The other agent, polling node1, may see the drop before node0's
		// record is read again: the drop is no later than that.
		dropped = minTime(dropped, notice)
	}
	visible2 := minTime(w2.readyBy[second.addr], w2.first200)
	fail = Path{TotalMs: span(killed, w2.first200), Steps: append([]Step{{"ledger ends the dead replica (validators' reports, or the heartbeat timeout)", span(killed, dropped)}},
		startSteps(dropped, second, d.ID, visible2, w2.first200)...)}
	fail.Failed = w2.failed
	fail.EndedAs = w2.endedAs[first.addr]

	if err := n.stopService(ctx, d.ID); err != nil {
		return dep, fail, err
	}
	if err := n.restart(ctx, first); err != nil {
		return dep, fail, err
	}
	return dep, fail, nil
}

// routeAround runs a service of two replicas, kills one's provider and
// times the first 200 after: the node must route around the dead one.
func (n *network) routeAround(ctx context.Context) (Path, error) {
	d, err := n.deploy(ctx, fmt.Sprintf("bench-ra-%d", time.Now().UnixNano()), 2)
	if err != nil {
		return Path{}, err
	}
	var w watch
	if err := n.until(ctx, d, &w, 2*time.Minute, func(w *watch) bool { return len(w.readyBy) == 2 && !w.first200.IsZero() }); err != nil {
		return Path{}, err
	}
	// Requests to both, so that node0 holds connections to each.
	for range 6 {
		n.get(ctx, d)
	}
	var victim *provider
	for _, pv := range n.provs {
		victim = pv
		break
	}
	victim.p.kill()
	killed := time.Now()
	// Every request for a second after the kill: the first 200 and how
	// many failed.
	var p Path
	first := time.Time{}
	for time.Since(killed) < time.Second {
		if n.get(ctx, d) == http.StatusOK {
			if first.IsZero() {
				first = time.Now()
			}
		} else {
			p.Failed++
		}
		time.Sleep(n.o.Poll)
	}
	if first.IsZero() {
		var w2 watch
		if err := n.until(ctx, d, &w2, 2*time.Minute, func(w *watch) bool { return !w.first200.IsZero() }); err != nil {
			return p, err
		}
		first = w2.first200
		p.Failed += w2.failed
	}
	p.TotalMs = span(killed, first)
	if err := n.stopService(ctx, d.ID); err != nil {
		return p, err
	}
	return p, n.restart(ctx, victim)
}

// restart starts a killed provider again and waits until both offer
// containers.
func (n *network) restart(ctx context.Context, pv *provider) error {
	// Its containers outlive it; its next start cleans them up. The
	// ledger still has it online: its own log says when it serves.
	if err := n.startProvider(pv); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, online := pv.p.stderr.find(time.Time{}, "provider online")
		if online && (!n.relayAtStart || n.relayConnected()) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("provider %s not back after 2m: %s", pv.name, tail(pv.p.stderr.String(), 1500))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
