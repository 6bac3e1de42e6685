package containerbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gpunet/gpunet/internal/bench/measure"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
)

// measurePull builds a large image (not timed) and pulls it PullReps
// times, each into an empty cache.
func measurePull(ctx context.Context, reg *registry, dir string, o Options, progress func(string, ...any)) (Pull, error) {
	progress("pull: building a %d MiB image of %d layers (not timed)", o.PullMiB, o.PullLayers)
	tb := time.Now()
	big, files, err := bulkImage(o.PullMiB, o.PullLayers)
	if err != nil {
		return Pull{}, err
	}
	bigRef, err := reg.add("bench/bulk", big)
	if err != nil {
		return Pull{}, err
	}
	p := Pull{BuildSeconds: time.Since(tb).Seconds(), Files: files, Layers: o.PullLayers, Reps: o.PullReps}
	var pulls []time.Duration
	for i := range o.PullReps {
		cache := filepath.Join(dir, fmt.Sprintf("pull-%d", i))
		s, err := oci.NewStore(cache, oci.RegistryOptions{}, oci.UnpackLimits{}, oci.CacheOptions{})
		if err != nil {
			return Pull{}, err
		}
		t0 := time.Now()
		im, _, err := s.Get(ctx, bigRef)
		d := time.Since(t0)
		s.Close()
		if err != nil {
			return Pull{}, err
		}
		p.CompressedBytes, p.UnpackedBytes = im.CompressedBytes, im.UnpackedBytes
		im.Release()
		pulls = append(pulls, d)
		progress("pull: %d/%d in %.2fs", i+1, o.PullReps, d.Seconds())
		os.RemoveAll(cache)
	}
	p50 := measure.Percentile(pulls, 50)
	p.P50Seconds, p.MinSeconds = p50.Seconds(), measure.Percentile(pulls, 0).Seconds()
	p.CompressedMBps = float64(p.CompressedBytes) / 1e6 / p50.Seconds()
	p.UnpackedMBps = float64(p.UnpackedBytes) / 1e6 / p50.Seconds()
	return p, nil
}
