package provider

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/relay"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/seal"
)

// Running service replicas (docs/ledger.md, "Services"). Each poll the
// agent compares the services that list a replica on it with the replicas
// it runs: it starts a container for a new one and stops the container of
// one no longer listed (stopped, evicted, scaled down, dropped). A
// replica's own goroutine starts its container (an oci ServiceRunner),
// checks its readiness through the container's network namespace (at
// once, then backing off up to the spec's interval until it is first
// ready), and gives the replica back (MsgReleaseReplica) when it fails:
// not ready within its StartSeconds, FailureThreshold failed checks in a
// row after it was ready, or the container ended. One heartbeat
// (MsgServiceHeartbeat) reports on every replica each
// params.service_heartbeat_interval, and sooner when one's readiness
// changes or the relay link moves to another node. The relay link
// (RelayLink), opened when an agent that can run services starts, lets
// the nodes reach the ready replicas' ports (DialReplica). A replica has
// at most one container: a new placement of the same service waits until
// the last container is gone.

// ServiceChain is what the agent needs of a node to run services. A Chain
// that implements it (chainclient.Client does) has its provider's service
// replicas run; one that does not runs jobs only.
type ServiceChain interface {
	ProviderServices(ctx context.Context, provider address.Address) (*apiwire.ServiceList, error)
	PostServiceLog(ctx context.Context, key chainclient.Signer, service, seq uint64, data []byte) error
}

// RelayLink is the agent's connection to a node's relay (package relay's
// Agent): Run keeps it up until ctx ends; Relay is the API URL of the node
// it is on now ("" while it has none), which heartbeats report.
type RelayLink interface {
	Run(ctx context.Context) error
	Relay() string
}

// ReplicaDialer connects to a port of this provider's ready replica of a
// service: what a relay link calls for each stream a node opens.
type ReplicaDialer func(ctx context.Context, service, port uint64) (net.Conn, error)

// minHeartbeatWait is the least time a heartbeat is given to reach a
// block.
const minHeartbeatWait = 5 * time.Second

// DefaultServiceHeartbeat is the heartbeat interval of a chain whose
// params do not say (params.service_heartbeat_interval).
const DefaultServiceHeartbeat = 30 * time.Second

// Readiness defaults, for a spec that leaves a field 0.
const (
	defaultReadyInterval  = 5 * time.Second
	defaultReadyTimeout   = 2 * time.Second
	defaultReadyThreshold = 3
	defaultReadyStart     = 5 * time.Minute
)

// maxServiceLogQueue bounds a replica's output waiting to be relayed.
const maxServiceLogQueue = 1 << 20

// serviceGPUKey keeps services' GPU reservations apart from jobs' in the
// pool, which is keyed by job id.
func serviceGPUKey(id uint64) uint64 { return id | 1<<63 }

type services struct {
	mu   sync.Mutex
	byID map[uint64]*replicaRun
	// released are the replicas given back (service → AssignedAt), not
	// to be started again while the chain still lists them.
	released map[uint64]int64
	wg       sync.WaitGroup
	loops    sync.Once
	kick     chan struct{}
	link     RelayLink
	listErr  bool // the last list failed (said once)
}

// replicaRun is one replica this agent runs.
type replicaRun struct {
	id         uint64
	assignedAt int64
	cancel     context.CancelFunc
	done       chan struct{}

	// Under services.mu:
	svc   *ledger.Service
	h     sandbox.ServiceHandle
	ready bool
	gone  bool // released, or stopped: not reported any more
}

func replicaOf(s *ledger.Service, me address.Address) *ledger.Replica {
	for i := range s.Replicas {
		if s.Replicas[i].Provider == me {
			return &s.Replicas[i]
		}
	}
	return nil
}

// syncServices starts and stops replicas to match the ledger. A node that
// cannot list services is logged (once) and tried again next poll: it does
// not take the agent off its node, as a failed job list does.
func (a *Agent) syncServices(ctx context.Context) {
	sc := a.services
	if sc == nil {
		return
	}
	me := a.o.Key.Address
	list, err := sc.ProviderServices(ctx, me)
	a.svcs.mu.Lock()
	defer a.svcs.mu.Unlock()
	if err != nil {
		if !a.svcs.listErr {
			a.log.Warn("cannot list this provider's services; trying again", "err", err)
		}
		a.svcs.listErr = true
		return
	}
	a.svcs.listErr = false
	if a.runsServices() {
		// The relay session and the heartbeat start with the agent, not
		// with its first replica: the session's handshake is then off
		// the path of the first answer, and the first ready heartbeat
		// names the node that reaches the replica.
		a.svcs.loops.Do(func() { a.startServiceLoops(ctx) })
	}
	want := map[uint64]bool{}
	listed := map[uint64]bool{}
	for _, s := range list.Services {
		r := replicaOf(s, me)
		if r == nil || s.Done() {
			continue
		}
		listed[s.ID] = true
		if at, ok := a.svcs.released[s.ID]; ok && at == r.AssignedAt {
			continue // given back; the chain does not show it yet
		}
		want[s.ID] = true
		run := a.svcs.byID[s.ID]
		switch {
		case run == nil:
			a.svcs.loops.Do(func() { a.startServiceLoops(ctx) })
			a.startReplica(ctx, s, r.AssignedAt)
		case run.assignedAt != r.AssignedAt:
			// Placed here again: the old container goes first.
			if !run.gone {
				run.gone = true
				run.cancel()
			}
		default:
			run.svc = s
		}
	}
	for id, run := range a.svcs.byID {
		if !want[id] && !run.gone {
			a.log.Info("service replica no longer ours; stopping it", "service", id)
			run.gone = true
			run.cancel()
		}
	}
	for id := range a.svcs.released {
		if !listed[id] {
			delete(a.svcs.released, id)
		}
	}
}

// runsServices reports whether this agent can run service replicas: it
// has a container executor that runs services.
func (a *Agent) runsServices() bool {
	_, ok := a.o.Sandboxes[ledger.ExecutorOCI].(sandbox.ServiceRunner)
	return ok
}

// startReplica starts the run of a replica (a.svcs.mu held).
func (a *Agent) startReplica(ctx context.Context, s *ledger.Service, assignedAt int64) {
	if a.svcs.byID == nil {
		a.svcs.byID = map[uint64]*replicaRun{}
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	run := &replicaRun{id: s.ID, assignedAt: assignedAt, cancel: cancel, done: make(chan struct{}), svc: s}
	a.svcs.byID[s.ID] = run
	a.svcs.wg.Add(1)
	go func() {
		defer a.svcs.wg.Done()
		defer close(run.done)
		a.runReplica(rctx, run)
		cancel()
		a.svcs.mu.Lock()
		if a.svcs.byID[run.id] == run {
			delete(a.svcs.byID, run.id)
		}
		a.svcs.mu.Unlock()
	}()
}

// runReplica runs one replica's container until ctx ends (no longer
// listed, or the agent stops) or it fails, when it is given back.
func (a *Agent) runReplica(ctx context.Context, run *replicaRun) {
	a.svcs.mu.Lock()
	s := run.svc
	a.svcs.mu.Unlock()
	log := a.log.With("service", s.ID)
	spec := &s.Spec
	ex, ok := a.o.Sandboxes[ledger.ExecutorOCI]
	sr, runs := ex.(sandbox.ServiceRunner)
	if !ok || !runs {
		a.releaseReplica(ctx, run, "this provider has no container executor that runs services")
		return
	}
	owner, err := seal.ParseRecipient(s.ConsumerKey)
	if err != nil {
		a.releaseReplica(ctx, run, "the service's consumer key: "+err.Error())
		return
	}
	gpus, err := a.gpus.take(serviceGPUKey(s.ID), &ledger.JobSpec{GPUCount: spec.GPUCount, GPUModels: spec.GPUModels, MinVRAM: spec.MinVRAM})
	if err != nil {
		a.releaseReplica(ctx, run, err.Error())
		return
	}
	defer a.gpus.release(serviceGPUKey(s.ID))
	dir := filepath.Join(a.o.WorkDir, fmt.Sprintf("svc-%d", s.ID))
	os.RemoveAll(dir)
	defer os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		log.Error("service replica: scratch directory", "err", err)
		return
	}
	logs := &logQueue{max: maxServiceLogQueue}
	sc := a.services
	// A node refuses a post number it has had from this provider for this
	// service (no replays). A replica may run again here (a restarted
	// agent, a placement after a release), so each run numbers its posts
	// from the time it started, in milliseconds: later than any number an
	// earlier run used, at one post per flush interval. Nodes take such a
	// gap for services (apiserver's serviceLogs).
	base := uint64(a.clk.Now().UnixMilli())
	stopLogs := a.relayLogs(ctx, fmt.Sprintf("service %d", s.ID), logs, owner, func(ctx context.Context, seq uint64, sealed []byte) error {
		return sc.PostServiceLog(ctx, a.o.Key, s.ID, base+seq, sealed)
	})
	logsStopped := false
	flushLogs := func() {
		if !logsStopped {
			logsStopped = true
			stopLogs()
		}
	}
	defer flushLogs()
	limits := sandbox.Limits{MemoryBytes: spec.Memory, CPU: float64(spec.CPUMilli) / 1000, DiskBytes: spec.Disk}
	limits.DiskBytes = limits.Disk()
	rd := readinessOf(spec)
	startBy := a.clk.Now().Add(rd.start) // the image's pull counts
	log.Info("starting service replica", "image", spec.Image)
	started := a.clk.Now()
	h, err := sr.StartService(ctx, &sandbox.Service{
		ID: fmt.Sprintf("svc-%d", s.ID), Image: spec.Image, Command: spec.Command, Args: spec.Args, Env: spec.Env,
		GPUs: gpus, Network: spec.Network, WorkDir: dir, Limits: limits,
	}, logs)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		// The executor's words go on chain and to the owner: an image
		// that could not be pulled says its reference and a fixed cause,
		// never the registry's answer (oci.PullError; the executor
		// logs the details here).
		fmt.Fprintf(logs, "[gpunet] the replica did not start: %v\n", err)
		flushLogs()
		a.releaseReplica(ctx, run, "did not start: "+err.Error())
		return
	}
	defer h.Stop()
	a.svcs.mu.Lock()
	run.h = h
	a.svcs.mu.Unlock()

	log.Info("service replica's container started", "took", a.clk.Now().Sub(started).Round(time.Millisecond))
	fails := 0
	everReady := false
	check := func() (release string) {
		mark := pausesHere.mark()
		err := checkReady(ctx, h, rd)
		if ctx.Err() != nil {
			return ""
		}
		if err != nil && pausesHere.since(mark) {
			// An agent paused the replica for a proof during the check
			// (proofpause.go): its silence is ours, not its failure.
			return ""
		}
		a.setReady(run, err == nil)
		if err == nil {
			if !everReady {
				log.Info("service replica ready", "after", a.clk.Now().Sub(started).Round(time.Millisecond))
			}
			fails, everReady = 0, true
			return ""
		}
		fails++
		switch {
		case everReady && fails >= rd.threshold:
			return fmt.Sprintf("readiness check failed %d times in a row: %v", fails, err)
		case !everReady && !a.clk.Now().Before(startBy):
			return fmt.Sprintf("not ready within %s: %v", rd.start, err)
		}
		return ""
	}
	// Checked at once, then, until it is first ready, after
	// firstReadyWait doubling up to the spec's interval: a server up in
	// 100 ms is reported ready then, not an interval later.
	why := check()
	for n := 0; why == ""; n++ {
		select {
		case <-ctx.Done():
			log.Info("service replica stopped")
			return
		case <-h.Done():
			why = "the container ended: " + h.Reason()
		case <-a.clk.After(readyWait(everReady, n, rd.interval)):
			why = check()
		}
	}
	if ctx.Err() != nil {
		return
	}
	a.setReady(run, false)
	fmt.Fprintf(logs, "[gpunet] giving the replica back: %s\n", why)
	h.Stop()
	flushLogs() // the last lines reach the owner before the replica ends
	a.releaseReplica(ctx, run, why)
}

// setReady records a replica's readiness; a change is reported at once.
func (a *Agent) setReady(run *replicaRun, ready bool) {
	a.svcs.mu.Lock()
	changed := run.ready != ready
	run.ready = ready
	a.svcs.mu.Unlock()
	if changed {
		select {
		case a.svcs.kick <- struct{}{}:
		default:
		}
	}
}

// releaseReplica gives a replica back on the ledger; the agent does not
// start it again while the chain still lists it.
func (a *Agent) releaseReplica(ctx context.Context, run *replicaRun, why string) {
	why = truncateText(why, ledger.MaxServiceReleaseReason)
	if len(why) > ledger.MaxReleaseLen {
		why = why[:ledger.MaxReleaseLen]
	}
	a.svcs.mu.Lock()
	if a.svcs.released == nil {
		a.svcs.released = map[uint64]int64{}
	}
	a.svcs.released[run.id] = run.assignedAt
	run.gone, run.ready = true, false
	a.svcs.mu.Unlock()
	a.log.Warn("giving the service replica back", "service", run.id, "reason", why)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := a.o.Chain.SendMsg(rctx, a.o.Key, 0, &ledger.MsgReleaseReplica{ServiceID: run.id, Reason: why}); err != nil && !errors.Is(err, chainclient.ErrNotInBlockYet) {
		a.log.Error("giving the service replica back", "service", run.id, "err", err)
	}
}

// firstReadyWait is the wait after the first readiness check of a
// replica that is not yet ready; each next wait doubles, up to the spec's
// interval.
const firstReadyWait = 25 * time.Millisecond

// readyWait is the wait before readiness check n+1 (n from 0): the spec's
// interval once the replica has been ready, and before that
// firstReadyWait doubling up to it, so that a replica is reported ready
// soon after its server listens. The checks' failures count as before:
// only after the replica was ready, or past its StartSeconds.
func readyWait(everReady bool, n int, interval time.Duration) time.Duration {
	if everReady || n >= 30 {
		return interval
	}
	return min(firstReadyWait<<n, interval)
}

// readiness is a spec's readiness check with the defaults filled in.
type readiness struct {
	port      uint16
	path      string
	interval  time.Duration
	timeout   time.Duration
	threshold int
	start     time.Duration
}

func readinessOf(spec *ledger.ServiceSpec) readiness {
	r := spec.Readiness
	rd := readiness{
		port: uint16(r.Port), path: r.Path,
		interval: time.Duration(r.IntervalSeconds) * time.Second, timeout: time.Duration(r.TimeoutSeconds) * time.Second,
		threshold: int(r.FailureThreshold), start: time.Duration(r.StartSeconds) * time.Second,
	}
	if rd.port == 0 && len(spec.Ports) > 0 {
		rd.port = uint16(spec.Ports[0].Port)
	}
	if rd.path != "" && !strings.HasPrefix(rd.path, "/") {
		rd.path = "/" + rd.path
	}
	if rd.interval <= 0 {
		rd.interval = defaultReadyInterval
	}
	if rd.timeout <= 0 {
		rd.timeout = defaultReadyTimeout
	}
	if rd.threshold <= 0 {
		rd.threshold = defaultReadyThreshold
	}
	if rd.start <= 0 {
		rd.start = defaultReadyStart
	}
	return rd
}

// checkReady runs one readiness check: an HTTP GET of the path answering
// 2xx, or, without a path, a TCP connect; through the container's own
// loopback (ServiceHandle.Dial).
func checkReady(ctx context.Context, h sandbox.ServiceHandle, rd readiness) error {
	ctx, cancel := context.WithTimeout(ctx, rd.timeout)
	defer cancel()
	_, err := relay.CheckReadiness(ctx, func(ctx context.Context) (net.Conn, error) { return h.Dial(ctx, rd.port) }, uint64(rd.port), rd.path, "gpunet-readiness/1")
	return err
}

// DialReplica connects to port of this provider's ready replica of
// service: what the relay link does for each stream a node opens. An
// unknown service, a port the spec does not declare and a replica that is
// not ready are refused.
func (a *Agent) DialReplica(ctx context.Context, service, port uint64) (net.Conn, error) {
	a.svcs.mu.Lock()
	run := a.svcs.byID[service]
	var h sandbox.ServiceHandle
	var err error
	switch {
	case run == nil || run.gone:
		err = fmt.Errorf("service %d has no replica on this provider", service)
	case run.svc.Spec.Port(port) == nil:
		err = fmt.Errorf("service %d declares no port %d", service, port)
	case !run.ready || run.h == nil:
		err = fmt.Errorf("this provider's replica of service %d is not ready", service)
	default:
		h = run.h
	}
	openai := err == nil && run.svc.Spec.OpenAI != nil && run.svc.Spec.OpenAI.Port == port
	a.svcs.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if a.o.Faults.silent() {
		// Fault injection: take the stream, read what comes, answer
		// nothing.
		mine, theirs := net.Pipe()
		go func() {
			io.Copy(io.Discard, mine)
			mine.Close()
		}()
		return theirs, nil
	}
	back, err := h.Dial(ctx, uint16(port))
	if err != nil || !openai {
		return back, err
	}
	return a.withReceipts(ctx, service, back), nil
}

// startServiceLoops starts the heartbeat and the relay link (once, with
// the first replica); both end with ctx.
func (a *Agent) startServiceLoops(ctx context.Context) {
	a.svcs.kick = make(chan struct{}, 1)
	if a.o.Relay != nil {
		a.svcs.link = a.o.Relay(a.DialReplica)
		a.setGangLink(a.svcs.link) // gang.go
	}
	if l := a.svcs.link; l != nil {
		a.svcs.wg.Add(1)
		go func() {
			defer a.svcs.wg.Done()
			if err := l.Run(ctx); err != nil && ctx.Err() == nil {
				a.log.Warn("the relay link ended; nodes cannot reach this provider's replicas", "err", err)
			}
		}()
	}
	a.svcs.wg.Add(1)
	go func() {
		defer a.svcs.wg.Done()
		a.heartbeats(ctx)
	}()
}

// heartbeatInterval is params.service_heartbeat_interval, or the default
// when the chain does not say.
func (a *Agent) heartbeatInterval(ctx context.Context) time.Duration {
	p, err := a.o.Chain.Params(ctx)
	if err != nil || p.ServiceHeartbeatInterval == 0 {
		return DefaultServiceHeartbeat
	}
	return time.Duration(p.ServiceHeartbeatInterval) * time.Second
}

// relayCheck is how often the heartbeat loop looks whether the relay
// link moved to another node since the last heartbeat.
const relayCheck = 200 * time.Millisecond

// heartbeats sends one MsgServiceHeartbeat for all the replicas every
// interval, when one's readiness changes, and when the relay link's node
// is not the one the last heartbeat named (it connected, or moved): the
// nodes route to a replica through the node its last heartbeat names. A
// failed one is logged once and the next tick tries again.
func (a *Agent) heartbeats(ctx context.Context) {
	interval := a.heartbeatInterval(ctx)
	t := a.clk.NewTicker(interval)
	defer func() { t.Stop() }()
	rt := a.clk.NewTicker(relayCheck)
	defer rt.Stop()
	failing := false
	sentRelay := ""
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-a.svcs.kick:
		case <-rt.C():
			if a.svcs.link == nil || a.svcs.link.Relay() == sentRelay {
				n--
				continue
			}
		}
		if n%20 == 0 { // the param may change by governance
			if iv := a.heartbeatInterval(ctx); iv != interval {
				interval = iv
				t.Stop()
				t = a.clk.NewTicker(interval)
			}
		}
		msg := a.heartbeat()
		if len(msg.Replicas) == 0 {
			continue
		}
		// A slow block is not a failed heartbeat: it may take a few
		// blocks to be included on a busy node.
		hctx, cancel := context.WithTimeout(ctx, max(interval, minHeartbeatWait))
		_, err := a.o.Chain.SendMsg(hctx, a.o.Key, 0, msg)
		cancel()
		switch {
		case err == nil || errors.Is(err, chainclient.ErrNotInBlockYet):
			sentRelay = msg.Replicas[0].Relay
			if failing {
				a.log.Info("service heartbeats go through again")
			}
			failing = false
		case ctx.Err() != nil:
			return
		case !failing:
			failing = true
			a.log.Warn("service heartbeat failed; trying again at the next", "err", err)
		default:
			a.log.Debug("service heartbeat failed", "err", err)
		}
	}
}

// heartbeat is the report on every replica running now.
func (a *Agent) heartbeat() *ledger.MsgServiceHeartbeat {
	relay := ""
	if a.svcs.link != nil {
		relay = a.svcs.link.Relay()
	}
	a.svcs.mu.Lock()
	defer a.svcs.mu.Unlock()
	msg := &ledger.MsgServiceHeartbeat{Replicas: []ledger.ReplicaStatus{}}
	for id, run := range a.svcs.byID {
		if !run.gone {
			msg.Replicas = append(msg.Replicas, ledger.ReplicaStatus{ServiceID: id, Ready: run.ready, Relay: relay})
		}
	}
	slices.SortFunc(msg.Replicas, func(x, y ledger.ReplicaStatus) int { return cmp.Compare(x.ServiceID, y.ServiceID) })
	return msg
}

// stopServices is the agent's clean shutdown of its replicas: each is
// given back first (so that the ledger places it elsewhere at once rather
// than at its missed heartbeats), then its container is stopped.
func (a *Agent) stopServices() {
	a.svcs.mu.Lock()
	var runs []*replicaRun
	for _, run := range a.svcs.byID {
		if !run.gone {
			runs = append(runs, run)
		}
	}
	a.svcs.mu.Unlock()
	if len(runs) > 0 && (a.o.Faults == nil || !a.o.Faults.DieOnStop) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for _, run := range runs {
			a.svcs.mu.Lock()
			run.gone, run.ready = true, false
			a.svcs.mu.Unlock()
			if _, err := a.o.Chain.SubmitMsg(ctx, a.o.Key, 0, &ledger.MsgReleaseReplica{ServiceID: run.id, Reason: "the provider's agent is stopping"}); err != nil {
				a.log.Warn("could not give the service replica back; the ledger drops it at its missed heartbeats", "service", run.id, "err", err)
			}
		}
		cancel()
	}
	a.svcs.mu.Lock()
	for _, run := range a.svcs.byID {
		run.cancel()
	}
	a.svcs.mu.Unlock()
	a.svcs.wg.Wait()
}
