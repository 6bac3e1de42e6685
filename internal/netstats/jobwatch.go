package netstats

import (
	"context"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
)

// jobWatch follows the jobs waiting for their first placement (for
// gpunet_scheduler_wait_seconds) and the queued jobs' hardware classes
// (for gpunet_scheduler_queue_jobs). Only the goroutine that loads and
// applies blocks uses it.
type jobWatch struct {
	// unplaced are the jobs never placed, by id: where they were
	// submitted.
	unplaced map[uint64]submitted
	// queued are the class labels of the jobs in state queued, by id;
	// perClass counts them.
	queued   map[uint64][]string
	perClass map[string]int
}

// submitted is where a job was submitted: its block, and the block's time
// when known (zero for the jobs found waiting at load, whose block is
// read when they are placed).
type submitted struct {
	height uint64
	at     time.Time
}

func newJobWatch() jobWatch {
	return jobWatch{unplaced: map[uint64]submitted{}, queued: map[uint64][]string{}, perClass: map[string]int{}}
}

// loaded records a job read at load.
func (w *jobWatch) loaded(j *ledger.Job) {
	if j.State == ledger.JobQueued && j.Attempts == 0 {
		w.unplaced[j.ID] = submitted{height: j.Height}
	}
	w.setQueued(j)
}

// waits returns the waits of the jobs block b placed for the first time.
// submittedHere and placedHere are the jobs b's events say it submitted
// and placed (job_submitted, job_assigned): a job submitted and placed in
// the same block is never seen queued, and its wait is 0. jobs are the
// records of the jobs b touched, as the latest state has them (later
// than b when the stats fall behind: placement is read from b's events,
// never from the record). blockTime reads the time of an earlier block
// (a job found waiting at load).
func (w *jobWatch) waits(ctx context.Context, b blockRef, jobs []*ledger.Job, submittedHere, placedHere map[uint64]bool, blockTime func(ctx context.Context, height uint64) (time.Time, bool)) []float64 {
	for id := range submittedHere {
		if _, ok := w.unplaced[id]; !ok {
			w.unplaced[id] = submitted{height: b.height, at: b.time}
		}
	}
	var out []float64
	for _, j := range jobs {
		sub, waiting := w.unplaced[j.ID]
		if !waiting {
			continue
		}
		switch {
		case placedHere[j.ID]:
			at := sub.at
			if at.IsZero() {
				t, ok := blockTime(ctx, sub.height)
				if !ok {
					t = time.Unix(j.SubmittedAt, 0) // whole seconds: the best the record has
				}
				at = t
			}
			out = append(out, max(0, b.time.Sub(at).Seconds()))
			delete(w.unplaced, j.ID)
		case j.Attempts == 0 && j.State != ledger.JobQueued:
			delete(w.unplaced, j.ID) // ended without a placement (cancelled, expired)
		}
	}
	return out
}

// blockRef is a block's height and time.
type blockRef struct {
	height uint64
	time   time.Time
}

// setQueued records j's classes while it is queued, and forgets them when
// it is not.
func (w *jobWatch) setQueued(j *ledger.Job) {
	old, was := w.queued[j.ID]
	if j.State == ledger.JobQueued {
		if was {
			return
		}
		classes := queueClasses(&j.Spec)
		w.queued[j.ID] = classes
		for _, c := range classes {
			w.perClass[c]++
		}
		return
	}
	if !was {
		return
	}
	delete(w.queued, j.ID)
	for _, c := range old {
		if w.perClass[c]--; w.perClass[c] <= 0 {
			delete(w.perClass, c)
		}
	}
}

// Queue class labels besides the classes themselves.
const (
	queueAnyGPU = "any_gpu"
	queueOther  = "other"
)

// queueClasses are the class labels a queued job counts under: the
// classes it may be placed in, as the scheduler reads them
// (ledger/sched Place). Classes outside the ledger's
// table count as "other", so the labels stay a bounded set whatever
// names jobs carry.
func queueClasses(s *ledger.JobSpec) []string {
	switch {
	case s.GPUCount == 0:
		return []string{ledger.CPUClass}
	case len(s.GPUModels) == 0:
		return []string{queueAnyGPU}
	}
	var out []string
	add := func(c string) {
		for _, o := range out {
			if o == c {
				return
			}
		}
		out = append(out, c)
	}
	for _, m := range s.GPUModels {
		if _, known := ledger.ClassPeakGOPS(m); known {
			add(m)
		} else {
			add(queueOther)
		}
	}
	return out
}
