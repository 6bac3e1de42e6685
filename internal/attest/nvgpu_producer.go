package attest

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// GPUProducer gets an NVIDIA GPU's evidence through NVML (go-nvml), the
// agent's side: nvmlDeviceGetConfComputeGpuAttestationReport over the
// SPDM nonce (the first 32 bytes of the report data, GPUNonce), and
// nvmlDeviceGetConfComputeGpuCertificate for the attestation chain.
// go-nvml loads libnvidia-ml only at Init, which Produce calls: a machine
// without the library gets an error from Produce, never a binary that
// fails to start. It has not run on a GPU in CC mode
// (docs/confidential.md); tests drive it with recorded evidence through
// go-nvml's mock.
type GPUProducer struct {
	// NVML is the library; nil: nvml.New(), the real one.
	NVML nvml.Interface
	// Index is the GPU's NVML index.
	Index int
}

// Kind is KindNVIDIAGPU.
func (GPUProducer) Kind() Kind { return KindNVIDIAGPU }

// nvmlCall runs one NVML call: a non-SUCCESS return or a panic (a mock's
// unimplemented method) becomes an error naming what.
func nvmlCall(what string, f func() nvml.Return) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("NVML %s: panic: %v", what, r)
		}
	}()
	if ret := f(); ret != nvml.SUCCESS {
		return fmt.Errorf("NVML %s: %w", what, ret)
	}
	return nil
}

// session runs f between NVML's Init and Shutdown.
func (p GPUProducer) session(f func(lib nvml.Interface) error) error {
	lib := p.NVML
	if lib == nil {
		lib = nvml.New()
	}
	if err := nvmlCall("init (is the NVIDIA driver with libnvidia-ml.so.1 installed?)", lib.Init); err != nil {
		return err
	}
	defer func() { _ = nvmlCall("shutdown", lib.Shutdown) }()
	return f(lib)
}

// Produce gets the GPU's report over reportData's first 32 bytes and its
// attestation chain.
func (p GPUProducer) Produce(reportData [64]byte) (Evidence, error) {
	var ev Evidence
	err := p.session(func(lib nvml.Interface) error {
		var dev nvml.Device
		if err := nvmlCall(fmt.Sprintf("GPU %d handle", p.Index), func() (r nvml.Return) { dev, r = lib.DeviceGetHandleByIndex(p.Index); return }); err != nil {
			return err
		}
		var rep nvml.ConfComputeGpuAttestationReport
		copy(rep.Nonce[:], reportData[:32])
		if err := nvmlCall("attestation report (is the GPU in confidential-computing mode?)", func() nvml.Return { return dev.GetConfComputeGpuAttestationReport(&rep) }); err != nil {
			return err
		}
		n := int(rep.AttestationReportSize)
		if n <= 0 || n > len(rep.AttestationReport) {
			return fmt.Errorf("NVML attestation report of %d bytes (buffer %d)", n, len(rep.AttestationReport))
		}
		raw := bytes.Clone(rep.AttestationReport[:n])
		if len(raw) < spdmRequestLen || !bytes.Equal(raw[4:36], reportData[:32]) {
			return errors.New("NVML returned an attestation report over another nonce than the one asked for")
		}
		var cert nvml.ConfComputeGpuCertificate
		if err := nvmlCall("certificate chain", func() (r nvml.Return) { cert, r = dev.GetConfComputeGpuCertificate(); return }); err != nil {
			return err
		}
		m := int(cert.AttestationCertChainSize)
		if m <= 0 || m > len(cert.AttestationCertChain) {
			return fmt.Errorf("NVML attestation certificate chain of %d bytes (buffer %d)", m, len(cert.AttestationCertChain))
		}
		ev = Evidence{Kind: KindNVIDIAGPU, Raw: raw, Collateral: map[string][]byte{GPUCertChain: bytes.Clone(cert.AttestationCertChain[:m])}}
		return nil
	})
	if err != nil {
		return Evidence{}, err
	}
	return ev, nil
}

// State reads what NVML reports about the GPU: its UUID and the system's
// confidential-computing state. Neither is signed by the GPU.
func (p GPUProducer) State() (uuid string, cc GPUCCState, err error) {
	err = p.session(func(lib nvml.Interface) error {
		var dev nvml.Device
		if err := nvmlCall(fmt.Sprintf("GPU %d handle", p.Index), func() (r nvml.Return) { dev, r = lib.DeviceGetHandleByIndex(p.Index); return }); err != nil {
			return err
		}
		if err := nvmlCall("UUID", func() (r nvml.Return) { uuid, r = dev.GetUUID(); return }); err != nil {
			return err
		}
		var s nvml.ConfComputeSystemState
		if err := nvmlCall("confidential-computing state", func() (r nvml.Return) { s, r = lib.SystemGetConfComputeState(); return }); err != nil {
			return err
		}
		cc = GPUCCState{Environment: s.Environment, CCFeature: s.CcFeature, DevToolsMode: s.DevToolsMode}
		return nil
	})
	return uuid, cc, err
}
