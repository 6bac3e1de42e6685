//go:build !cgo

package main

import (
	"errors"

	"github.com/gpunet/gpunet/examples/tinylm/model"
)

// openGPU: without cgo (the static program tinylm's image holds) package
// gpu, whose NVML bindings need cgo, is not in the program; the int8
// model computes on the CPU, with the same answers.
func openGPU(cpu *model.Int8, orCPU bool) (*model.Int8, string, error) {
	if orCPU {
		return cpu, cpu.GEMM() + ", a build without GPU support (CGO_ENABLED=0)", nil
	}
	return nil, "", errors.New("this tinylm is built without cgo, which GPU support needs (go build with CGO_ENABLED=1)")
}
