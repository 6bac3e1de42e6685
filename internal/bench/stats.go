package bench

import (
	"time"

	"github.com/gpunet/gpunet/internal/bench/measure"
)

// percentile and ms64 are measure's Percentile and ExactMs under the names
// wasm.go used before it called measure itself; they go once it does.
func percentile(ds []time.Duration, p float64) time.Duration { return measure.Percentile(ds, p) }

func ms64(d time.Duration) float64 { return measure.ExactMs(d) }
