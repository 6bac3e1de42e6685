package sched

import "fmt"

// Place on three CPU offers (memState is the tests' in-memory State): the
// cheapest is busy, so the job gets the cheaper of the other two, and the
// miss counts the busy one.
func ExamplePlace() {
	st := newState(offer(1, 300), offer(2, 200), with(offer(3, 100), func(o *Offer) { o.Jobs = o.MaxJobs }))
	r := req() // one replica of a one-core job, at most 1 000 usync an hour
	plan, err := Place(st, &r)
	if err != nil {
		panic(err)
	}
	for _, p := range plan.Ranked {
		fmt.Printf("provider %d: %d usync/h, score %d\n", p.Provider[0], p.Price, p.Score)
	}
	fmt.Printf("picks provider %d; %d offers seen, %d busy\n", plan.Picks[0].Provider[0], plan.Miss.Seen, plan.Miss.Busy)
	// Output:
	// provider 2: 200 usync/h, score 6700
	// provider 1: 300 usync/h, score 6300
	// picks provider 2; 3 offers seen, 1 busy
}
