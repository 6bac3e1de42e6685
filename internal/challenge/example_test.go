package challenge_test

import (
	"fmt"

	"github.com/gpunet/gpunet/internal/challenge"
)

// Plans for a range of claims with the default parameters: a slow CPU, a
// 100-GOPS CPU, a big CPU, a T4 and an H100 (their int8 peaks). The last
// hits MaxOps, so its challenge is a little shorter than the target.
func ExampleNewPlan() {
	for _, gops := range []uint64{1, 100, 2_000, 130_000, 1_979_000} {
		p, err := challenge.NewPlan(gops, challenge.DefaultParams())
		if err != nil {
			panic(err)
		}
		fmt.Printf("%-7d GOPS: %-19s compute %5d ms, deadline %5d ms, gap %4d s, depth %d, opening %d B\n",
			gops, p.Size, p.ComputeMillis, p.DeadlineMillis, p.MinGapMillis/1000,
			p.Size.Depth(), challenge.OpeningBytes(p.Size, challenge.DefaultOpenings))
	}
	// Output:
	// 1       GOPS: 1664×1728×1728      compute  9938 ms, deadline 18423 ms, gap  745 s, depth 16, opening 46324 B
	// 100     GOPS: 7936×7936×7936      compute  9997 ms, deadline 18497 ms, gap  749 s, depth 20, opening 54004 B
	// 2000    GOPS: 28288×21568×16384   compute  9997 ms, deadline 18497 ms, gap  749 s, depth 23, opening 59764 B
	// 130000  GOPS: 605376×65536×16384  compute 10001 ms, deadline 18502 ms, gap  750 s, depth 28, opening 69364 B
	// 1979000 GOPS: 8388608×65536×16384 compute  9103 ms, deadline 17379 ms, gap  682 s, depth 31, opening 75124 B
}
