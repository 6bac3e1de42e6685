package attest

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// recordedNVML is go-nvml's mock serving the recorded Hopper evidence as
// the real library would: the report only for the nonce it was taken
// over, the chain, a UUID and CC on.
func recordedNVML(t *testing.T, initErr nvml.Return) (*mock.Interface, *int) {
	hopper := realGPU(t, "hopper")
	asked := new(int)
	dev := &mock.Device{
		GetConfComputeGpuAttestationReportFunc: func(r *nvml.ConfComputeGpuAttestationReport) nvml.Return {
			*asked++
			if !bytes.Equal(r.Nonce[:], hopper.Raw[4:36]) {
				// A real GPU would sign this nonce; the recording has one.
				return nvml.ERROR_INVALID_ARGUMENT
			}
			r.AttestationReportSize = uint32(copy(r.AttestationReport[:], hopper.Raw))
			return nvml.SUCCESS
		},
		GetConfComputeGpuCertificateFunc: func() (nvml.ConfComputeGpuCertificate, nvml.Return) {
			var c nvml.ConfComputeGpuCertificate
			c.AttestationCertChainSize = uint32(copy(c.AttestationCertChain[:], hopper.Collateral[GPUCertChain]))
			return c, nvml.SUCCESS
		},
		GetUUIDFunc: func() (string, nvml.Return) { return "GPU-11111111-2222-3333-4444-555555555555", nvml.SUCCESS },
	}
	return &mock.Interface{
		InitFunc:     func() nvml.Return { return initErr },
		ShutdownFunc: func() nvml.Return { return nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i != 0 {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return dev, nvml.SUCCESS
		},
		SystemGetConfComputeStateFunc: func() (nvml.ConfComputeSystemState, nvml.Return) {
			return nvml.ConfComputeSystemState{Environment: 2, CcFeature: 1}, nvml.SUCCESS
		},
	}, asked
}

func TestGPUProducerRecorded(t *testing.T) {
	lib, asked := recordedNVML(t, nvml.SUCCESS)
	p := GPUProducer{NVML: lib}
	var rd [64]byte
	copy(rd[:], realGPU(t, "hopper").Raw[4:36]) // the recorded report's nonce
	ev, err := p.Produce(rd)
	if err != nil {
		t.Fatal(err)
	}
	if *asked != 1 || ev.Kind != KindNVIDIAGPU {
		t.Fatalf("asked %d times, kind %s", *asked, ev.Kind)
	}
	c, err := Verify(ev, gpuOpts())
	if err != nil {
		t.Fatal(err)
	}
	if c.GPU.ID != "41431D480FE5E87274" {
		t.Errorf("GPU id %s", c.GPU.ID)
	}
	uuid, cc, err := p.State()
	if err != nil || uuid != "GPU-11111111-2222-3333-4444-555555555555" || cc.CCFeature != 1 || cc.Environment != 2 {
		t.Errorf("state %q %+v %v", uuid, cc, err)
	}

	// Produce through the Producer seam binds GPUNonce: the recording's
	// GPU cannot sign it, and the error says so.
	_, err = Produce(p, nonce1, key1)
	if err == nil || !strings.Contains(err.Error(), "attestation report") {
		t.Errorf("Produce over a chain nonce with recorded evidence: %v", err)
	}
	if _, err := (GPUProducer{NVML: lib, Index: 3}).Produce(rd); err == nil || !strings.Contains(err.Error(), "GPU 3 handle") {
		t.Errorf("missing GPU: %v", err)
	}
}

// Without libnvidia-ml, Init fails and Produce says so; nothing panics.
func TestGPUProducerNoLibrary(t *testing.T) {
	lib, _ := recordedNVML(t, nvml.ERROR_LIBRARY_NOT_FOUND)
	_, err := GPUProducer{NVML: lib}.Produce([64]byte{})
	if !errors.Is(err, nvml.ERROR_LIBRARY_NOT_FOUND) || !strings.Contains(err.Error(), "libnvidia-ml") {
		t.Errorf("err %v", err)
	}
	// The real library on this machine (none, on CI): an error, no crash.
	if _, err := (GPUProducer{}).Produce([64]byte{}); err == nil {
		t.Log("the real NVML produced evidence: this machine has a GPU in CC mode")
	}
}
