//go:build cgo

package main

import (
	"errors"

	"github.com/gpunet/gpunet/examples/tinylm/devicegemm"
	"github.com/gpunet/gpunet/examples/tinylm/model"
	"github.com/gpunet/gpunet/internal/gpu"
)

// openGPU is the int8 model on this machine's first CUDA device, checked
// against cpu (the same weights on the CPU) before it serves: a kernel
// that computes wrongly is never served. With orCPU, a machine without a
// GPU gets cpu.
func openGPU(cpu *model.Int8, orCPU bool) (*model.Int8, string, error) {
	devs, err := gpu.Open()
	if len(devs) == 0 {
		if orCPU {
			return cpu, cpu.GEMM() + ", no GPU", nil
		}
		if err == nil {
			err = errors.New("the driver reports no GPU")
		}
		return nil, "", err
	}
	// The process keeps its devices until it exits.
	m, err := model.DefaultInt8(devicegemm.Device{Dev: devs[0]})
	if err == nil {
		err = m.SameLogits(cpu)
	}
	if err != nil {
		return nil, "", err
	}
	return m, m.GEMM(), nil
}
