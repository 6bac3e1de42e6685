package gpu

import (
	"errors"
	"fmt"

	"github.com/gpunet/gpunet/internal/gpu/cuda"
)

// Open opens every CUDA device of this machine. Without a driver it
// returns no device and ErrNoDriver's explanation, which callers log and
// carry on CPU-only with; a device that fails to open is left out, its
// error joined to the returned one.
func Open() ([]*CUDA, error) {
	dr, err := cuda.Load()
	if err != nil {
		return nil, err
	}
	n, err := dr.Count()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", cuda.ErrNoDriver, err)
	}
	var devs []*CUDA
	var errs []error
	for i := range n {
		d, err := OpenCUDA(dr, i)
		if err != nil {
			errs = append(errs, fmt.Errorf("GPU %d: %w", i, err))
			continue
		}
		devs = append(devs, d)
	}
	return devs, errors.Join(errs...)
}

// ErrNoDriver is wrapped by Open's error on a machine without the NVIDIA
// driver.
var ErrNoDriver = cuda.ErrNoDriver
