package challengebench

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"github.com/gpunet/gpunet/internal/challenge"
	"github.com/gpunet/gpunet/internal/challenge/prove"
	"github.com/gpunet/gpunet/internal/hwinfo"
)

// measureLoads is part 1: this machine's figure measured as the agent
// measures it, then proofs of a plan sized for it, idle and beside each
// load. It returns the slowdowns per load, idle first.
func measureLoads(ctx context.Context, o Options, res *Result) ([][]float64, error) {
	fig, err := (&hwinfo.CPUBenchmarker{Workers: res.Workers}).Run(ctx, time.Second)
	if err != nil {
		return nil, fmt.Errorf("measuring this CPU: %w", err)
	}
	res.ClaimOPS = max(1, uint64(fig.Int8TOPS*1000))
	cp := challenge.DefaultParams()
	cp.TargetMillis = o.Target
	plan, err := challenge.NewPlan(res.ClaimOPS, cp)
	if err != nil {
		return nil, err
	}
	res.Size, res.Compute = plan.Size.String(), plan.ComputeMillis
	progressf(o, "this CPU: %d GOPS with %d prover workers; proving %s (%d ms at the claim) %d times per load", res.ClaimOPS, res.Workers, plan.Size, plan.ComputeMillis, o.Reps)
	var slow [][]float64
	for i, perCore := range append([]int{0}, o.Loads...) {
		l := Load{PerCore: perCore, Processes: perCore * res.Cores}
		stop, err := startLoad(l.Processes)
		if err != nil {
			return nil, err
		}
		for r := range o.Reps {
			seed := sha256.Sum256(binary.BigEndian.AppendUint64([]byte("gpunet-bench/challenge/load"), uint64(i*100+r)))
			t0 := time.Now()
			cm, err := (&prove.CPU{Workers: res.Workers}).Commit(ctx, challenge.Challenge{Seed: seed, Size: plan.Size, Openings: cp.Openings})
			if err != nil {
				stop()
				return nil, err
			}
			cm.Close()
			ms := float64(time.Since(t0).Microseconds()) / 1e3
			l.ProofMs = append(l.ProofMs, ms)
			l.Slowdowns = append(l.Slowdowns, ms/float64(plan.ComputeMillis))
		}
		stop()
		progressf(o, "load %d per core (%d busy processes): proofs %v ms, slowdown %v", perCore, l.Processes, l.ProofMs, l.Slowdowns)
		res.Loads = append(res.Loads, l)
		slow = append(slow, l.Slowdowns)
	}
	return slow, nil
}

// startLoad starts n busy processes (a shell spinning in a loop, each in
// its own process group) and returns what stops them. They also stop
// after ten minutes on their own, should this process die first.
func startLoad(n int) (stop func(), err error) {
	var cmds []*exec.Cmd
	stop = func() {
		for _, c := range cmds {
			syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			c.Wait()
		}
	}
	for range n {
		c := exec.Command("timeout", "600", "sh", "-c", "while :; do :; done")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			stop()
			return nil, fmt.Errorf("starting the background load: %w", err)
		}
		cmds = append(cmds, c)
	}
	return stop, nil
}
