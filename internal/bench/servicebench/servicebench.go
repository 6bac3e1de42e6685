// Package servicebench measures a service's first answer (issue 36):
// deploy → the first 200 through a node other than the one its provider
// is connected to, and a killed replica → the first answer again, on a
// network of two nodes and two providers, each a process of the gpunet
// binary, with the image already in the providers' caches. Each step of
// the path is timed from the providers' logs and from the chain as the
// client's node sees it: `gpunet bench service`.
package servicebench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Defaults of Options.
const (
	DefaultBlockTime = 200 * time.Millisecond
	DefaultReps      = 3
	// The service test's heartbeats (test/e2e): every second; a silent
	// replica is dropped after DefaultHeartbeatTimeout, as in the service test.
	DefaultHeartbeatInterval = 1
	DefaultHeartbeatTimeout  = 5
	DefaultReadyInterval     = time.Second
	// DefaultPoll is how often the client asks for the service's port and
	// reads its record while it waits.
	DefaultPoll = 10 * time.Millisecond
)

// Options configure Run.
type Options struct {
	// Bin is the gpunet binary the nodes and providers run (required):
	// the benchmark drives any build, an older one included.
	Bin string
	// Repo is the repository the example image (examples/tinylm) is built
	// from (required).
	Repo string
	// Dir holds the network's homes; a temporary directory, removed
	// after, when empty.
	Dir       string
	BlockTime time.Duration
	// Reps is the deploys measured, each followed by a kill of its
	// replica's provider (single-replica failover), and the two-replica
	// kills (route-around).
	Reps int
	// HeartbeatInterval and HeartbeatTimeout are the genesis's
	// service_heartbeat_interval and _timeout, seconds.
	HeartbeatInterval, HeartbeatTimeout uint64
	// ReadyInterval is the spec's readiness interval.
	ReadyInterval time.Duration
	Poll          time.Duration
	Progress      io.Writer
}

func (o *Options) fill() {
	if o.BlockTime <= 0 {
		o.BlockTime = DefaultBlockTime
	}
	if o.Reps <= 0 {
		o.Reps = DefaultReps
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if o.HeartbeatTimeout == 0 {
		o.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if o.ReadyInterval <= 0 {
		o.ReadyInterval = DefaultReadyInterval
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
}

// Step is one step of a path, in ms; -1 when the logs did not show it
// (an older binary logs less).
type Step struct {
	Name string  `json:"name"`
	Ms   float64 `json:"ms"`
}

// Path is one timed path: its total and its steps, which add up to it
// where each was seen.
type Path struct {
	TotalMs float64 `json:"total_ms"`
	Steps   []Step  `json:"steps"`
	// Failed counts the client's requests answered with another status
	// than 200 meanwhile (route-around only).
	Failed int `json:"failed,omitempty"`
	// EndedAs is the code the killed provider's replica ended with
	// (failover only): unreachable when the validators reported it,
	// silent at its missed heartbeats; empty when node0's record was not
	// read after it ended.
	EndedAs string `json:"ended_as,omitempty"`
}

// Summary is the median, min and max of a path's totals and the median
// of each step.
type Summary struct {
	Runs     int       `json:"runs"`
	P50Ms    float64   `json:"p50_ms"`
	MinMs    float64   `json:"min_ms"`
	MaxMs    float64   `json:"max_ms"`
	StepsP50 []Step    `json:"steps_p50"`
	Each     []float64 `json:"each_ms"`
}

// Result is what Run measured.
type Result struct {
	Date              time.Time `json:"date"`
	Bin               string    `json:"bin"`
	BlockTimeMs       float64   `json:"block_time_ms"`
	HeartbeatInterval uint64    `json:"heartbeat_interval_s"`
	HeartbeatTimeout  uint64    `json:"heartbeat_timeout_s"`
	ReadyIntervalMs   float64   `json:"ready_interval_ms"`
	// RelayBeforeDeploy reports whether both providers held their relay
	// session before the first deploy (opened at the agent's start).
	RelayBeforeDeploy bool `json:"relay_before_deploy"`
	// Deploy: `gpunet service deploy` started → first 200 through node0;
	// Failover: a single replica's provider killed → first 200 from its
	// replacement; RouteAround: one of two replicas' provider killed →
	// first 200 (from the other).
	Deploy      Summary `json:"deploy"`
	Failover    Summary `json:"failover"`
	RouteAround Summary `json:"route_around"`
	Runs        struct {
		Deploy      []Path `json:"deploy"`
		Failover    []Path `json:"failover"`
		RouteAround []Path `json:"route_around"`
	} `json:"runs"`
}

// Run sets up the network, warms the providers' image caches, and
// measures o.Reps deploys, failovers and route-arounds.
func Run(ctx context.Context, o Options) (_ *Result, err error) {
	o.fill()
	if o.Bin == "" || o.Repo == "" {
		return nil, errors.New("servicebench: Bin and Repo are required")
	}
	if o.Dir == "" {
		dir, err := os.MkdirTemp("", "gpunet-bench-service-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		o.Dir = dir
	}
	progress := func(format string, args ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, format+"\n", args...)
		}
	}
	n, err := startNetwork(ctx, o, progress)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, n.stop()) }()
	res := &Result{Date: time.Now().UTC(), Bin: o.Bin, BlockTimeMs: ms(o.BlockTime), HeartbeatInterval: o.HeartbeatInterval,
		HeartbeatTimeout: o.HeartbeatTimeout, ReadyIntervalMs: ms(o.ReadyInterval)}
	res.RelayBeforeDeploy = n.relayAtStart

	progress("warming the providers' image caches (a service of two replicas)…")
	if err := n.warm(ctx); err != nil {
		return nil, fmt.Errorf("warm-up: %w%s", err, n.logs())
	}
	for i := range o.Reps {
		progress("run %d of %d: deploy, then kill its replica's provider…", i+1, o.Reps)
		d, f, err := n.deployAndFailover(ctx)
		if err != nil {
			return nil, fmt.Errorf("run %d: %w%s", i+1, err, n.logs())
		}
		res.Runs.Deploy = append(res.Runs.Deploy, d)
		res.Runs.Failover = append(res.Runs.Failover, f)
		progress("  deploy → first answer %s; failover %s (the replica ended as %q)", fmtMs(d.TotalMs), fmtMs(f.TotalMs), f.EndedAs)
		progress("run %d of %d: two replicas, one killed…", i+1, o.Reps)
		r, err := n.routeAround(ctx)
		if err != nil {
			return nil, fmt.Errorf("run %d: route-around: %w%s", i+1, err, n.logs())
		}
		res.Runs.RouteAround = append(res.Runs.RouteAround, r)
		progress("  first answer after the kill %s (%d failed requests)", fmtMs(r.TotalMs), r.Failed)
	}
	res.Deploy = summarize(res.Runs.Deploy)
	res.Failover = summarize(res.Runs.Failover)
	res.RouteAround = summarize(res.Runs.RouteAround)
	return res, nil
}

func summarize(ps []Path) Summary {
	s := Summary{Runs: len(ps)}
	if len(ps) == 0 {
		return s
	}
	for _, p := range ps {
		s.Each = append(s.Each, p.TotalMs)
	}
	s.P50Ms, s.MinMs, s.MaxMs = median(s.Each), slices.Min(s.Each), slices.Max(s.Each)
	for i, st := range ps[0].Steps {
		var v []float64
		for _, p := range ps {
			if i < len(p.Steps) && p.Steps[i].Ms >= 0 {
				v = append(v, p.Steps[i].Ms)
			}
		}
		m := -1.0
		if len(v) > 0 {
			m = median(v)
		}
		s.StepsP50 = append(s.StepsP50, Step{Name: st.Name, Ms: m})
	}
	return s
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func fmtMs(v float64) string {
	if v < 0 {
		return "—"
	}
	return time.Duration(v * float64(time.Millisecond)).Round(time.Millisecond).String()
}

// absBin makes a relative binary path absolute: the processes run in
// other directories.
func absBin(p string) (string, error) { return filepath.Abs(p) }
