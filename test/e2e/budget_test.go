package e2e

import (
	"flag"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// Running tests side by side.
//
// Most of a test's time is waiting for blocks, challenges and timeouts, so
// the suite runs its tests in parallel. What limits how many run at once is
// the CPU their processes use: each test says how much with its weight
// (weightLight: a devnet or a few nodes, mostly idle; weightHeavy: CPU-bound
// jobs, four validators, image builds), and the tests running at once
// weigh at most cpuBudget. The test about load (TestChallengesUnderLoad)
// takes the whole budget: it must be the only thing loading the machine.
//
// The tests are queued in source order, a test that takes the whole budget
// first, then the longest (see budget for who starts when). With -test.parallel given, go
// test alone decides (-parallel 1: one at a time, as before).

const (
	weightLight = 1
	weightHeavy = 2
)

// cpuBudget is the weight of the tests that may run at once: three light
// tests per core.
var cpuBudget = 3 * runtime.NumCPU()

// longest are the tests that take longest (BENCHMARKS.md, "e2e suite
// time"): they are queued first, so that the suite does not end waiting
// for one of them started last.
var longest = []string{"TestREADME", "TestPrimaryKilledBeforeReveal", "TestCheckpointResumeOCI", "TestValidatorSetChanges", "TestServiceBudgetEnds", "TestCheckpointResume"}

// budgetOn is whether the budget decides which tests run (setParallel).
var budgetOn bool

// setParallel lets every test past t.Parallel at once, so that the budget
// alone says which run (go test's default, GOMAXPROCS, would let 2 through
// on a 2-core machine, and in no set order), unless -test.parallel was
// given.
func setParallel() {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", "1000")
		budgetOn = true
	}
}

// budget is a weighted semaphore of cpuBudget. A queued test starts when
// its weight fits and no test queued before it fits: light tests fill what
// a heavy one at the head leaves, and a heavy one waits only for the light
// ones behind it that started while it could not.
var budget = struct {
	sync.Mutex
	cond  *sync.Cond
	used  int
	queue []queued
}{}

type queued struct {
	t      *testing.T
	weight int
}

// turn reports whether t, queued, may start now, and its place.
func turn(t *testing.T, weight int) (bool, int) {
	free := cpuBudget - budget.used
	for i, q := range budget.queue {
		if q.t == t {
			return weight <= free, i
		}
		if q.weight <= free {
			return false, i
		}
	}
	panic("e2e: a test waits for the budget without being queued")
}

func init() { budget.cond = sync.NewCond(&budget.Mutex) }

// parallel queues t, marks it parallel, then waits until its turn has come
// and weight fits in the budget (more than the budget counts as all of it);
// t gives its weight back when it ends.
func parallel(t *testing.T, weight int) {
	t.Helper()
	if !budgetOn {
		t.Parallel()
		return
	}
	weight = min(weight, cpuBudget)
	budget.Lock()
	q := queued{t, weight}
	switch rank := slices.Index(longest, t.Name()); {
	case weight == cpuBudget:
		budget.queue = slices.Insert(budget.queue, 0, q)
	case rank >= 0:
		// After the whole-budget tests and the longer ones.
		i := 0
		for ; i < len(budget.queue); i++ {
			if r := slices.Index(longest, budget.queue[i].t.Name()); budget.queue[i].weight != cpuBudget && (r < 0 || r > rank) {
				break
			}
		}
		budget.queue = slices.Insert(budget.queue, i, q)
	default:
		budget.queue = append(budget.queue, q)
	}
	budget.Unlock()
	t.Parallel()
	queuedAt := time.Now()
	budget.Lock()
	for {
		ok, i := turn(t, weight)
		if ok {
			budget.queue = slices.Delete(budget.queue, i, i+1)
			break
		}
		budget.cond.Wait()
	}
	budget.used += weight
	budget.cond.Broadcast()
	budget.Unlock()
	// go test's time for a parallel test counts its wait for the budget.
	start := time.Now()
	t.Logf("started after %s waiting for the budget (weight %d of %d)", start.Sub(queuedAt).Round(time.Second), weight, cpuBudget)
	t.Cleanup(func() {
		t.Logf("ran for %s (weight %d)", time.Since(start).Round(100*time.Millisecond), weight)
		budget.Lock()
		budget.used -= weight
		budget.cond.Broadcast()
		budget.Unlock()
	})
}
