package jobbench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpunet/gpunet/internal/bench/measure"
	"github.com/gpunet/gpunet/internal/jobclient"
	"github.com/gpunet/gpunet/internal/ledger"
)

// jobRecord is one job's measurement.
type jobRecord struct {
	ok            bool
	multiAssigned bool
	err           string
	total         time.Duration // submit start → result block committed
	submit        time.Duration // the Submit call
	observed      time.Duration // submit start → Follow returned
	blocks        int
}

// runOne submits and follows one job; submitMu, if set, is held while
// submitting.
func (n *network) runOne(ctx context.Context, jc *jobclient.Client, o Options, submitMu *sync.Mutex) jobRecord {
	ctx, cancel := context.WithTimeout(ctx, o.JobTimeout)
	defer cancel()
	t0 := time.Now()
	if submitMu != nil {
		submitMu.Lock()
	}
	id, err := jc.Submit(ctx, n.spec)
	if submitMu != nil {
		submitMu.Unlock()
	}
	if err != nil {
		return jobRecord{err: "submit: " + err.Error()}
	}
	r := jobRecord{submit: time.Since(t0)}
	j, err := jc.Follow(ctx, id, o.Poll, nil)
	r.observed = time.Since(t0)
	if j != nil && uint64(len(j.Assignments)) > j.Replicas {
		r.multiAssigned = true
	}
	if err != nil {
		r.err = fmt.Sprintf("job %d: %v", id, err)
		if j != nil {
			r.err += fmt.Sprintf(" (state %s: %s; %d assignments)", j.State, j.Reason, len(j.Assignments))
		}
		// Free its providers for the jobs after it.
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		jc.Chain.SendMsg(cctx, jc.Key, 0, &ledger.MsgCancelJob{JobID: id})
		ccancel()
		return r
	}
	if j.State != ledger.JobSucceeded {
		r.err = fmt.Sprintf("job %d %s: %s", id, j.State, j.Reason)
		return r
	}
	var last uint64
	for _, a := range j.Assignments {
		if a.Result != nil {
			last = max(last, a.Result.Height)
		}
	}
	at, ok := n.clock.when(int64(last))
	if !ok {
		r.err = "node stopped"
		return r
	}
	r.ok, r.total, r.blocks = true, at.Sub(t0), int(last-j.Height)
	return r
}

// runPhase runs jobs jobs from the clients, each client one job at a time.
func (n *network) runPhase(ctx context.Context, clients []*jobclient.Client, jobs int, o Options, serial bool) Phase {
	recs := make([]jobRecord, jobs)
	var submitMu *sync.Mutex
	if serial {
		submitMu = &sync.Mutex{}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	cpu0 := measure.ProcessCPU()
	start := time.Now()
	for _, jc := range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= jobs || ctx.Err() != nil {
					return
				}
				recs[i] = n.runOne(ctx, jc, o, submitMu)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := measure.ProcessCPU() - cpu0
	ph := summarise(recs, len(clients), elapsed)
	ph.CPUCores = cpu.Seconds() / elapsed.Seconds()
	return ph
}

// summarise makes a phase's figures of its jobs' records.
func summarise(recs []jobRecord, concurrency int, elapsed time.Duration) Phase {
	ph := Phase{Concurrency: concurrency, Jobs: len(recs), BlocksHist: map[int]int{}}
	var total, submit, observed []time.Duration
	var blocks []int
	for _, r := range recs {
		if r.multiAssigned {
			ph.MultiAssigned++
		}
		if !r.ok {
			ph.Failed++
			if ph.FirstError == "" {
				ph.FirstError = r.err
			}
			continue
		}
		ph.Succeeded++
		total = append(total, r.total)
		submit = append(submit, r.submit)
		observed = append(observed, r.observed)
		blocks = append(blocks, r.blocks)
		ph.BlocksHist[r.blocks]++
	}
	p, ms := measure.Percentile, measure.ExactMs
	ph.P50Ms, ph.P90Ms = ms(p(total, 50)), ms(p(total, 90))
	ph.P99Ms, ph.MaxMs = ms(p(total, 99)), ms(p(total, 100))
	ph.SubmitP50Ms = ms(p(submit, 50))
	ph.ObservedP50Ms = ms(p(observed, 50))
	if len(blocks) > 0 {
		slices.Sort(blocks)
		ph.BlocksP50 = blocks[(len(blocks)+1)/2-1]
		ph.BlocksMax = blocks[len(blocks)-1]
	}
	ph.ElapsedS = elapsed.Seconds()
	ph.JobsPerS = float64(ph.Succeeded) / ph.ElapsedS
	return ph
}
