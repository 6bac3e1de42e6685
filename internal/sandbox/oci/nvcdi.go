package oci

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/nvidia-container-toolkit/pkg/nvcdi"
)

// NVCDI generates the CDI spec of this host's NVIDIA GPUs with NVIDIA's
// own generator (github.com/NVIDIA/nvidia-container-toolkit/pkg/nvcdi,
// the code behind `nvidia-ctk cdi generate`), from NVML and the driver's
// files, with no hooks (see the top of gpu.go for what replaces them).
// Each GPU is named twice: by index ("0") and by NVML UUID ("GPU-…"), the
// two ways Job.GPUs names one.
type NVCDI struct {
	// NVML is the library to ask; nil: the real libnvidia-ml.so.1.
	NVML nvml.Interface
	// DriverRoot is where the driver's files are ("" is "/").
	DriverRoot string
	Logger     *slog.Logger
}

// GenerateCDI returns the spec, or an error wrapping ErrNoGPUs when there
// is no driver (no /dev/nvidiactl, NVML not found or not initialising) or
// no GPU.
func (n NVCDI) GenerateCDI(ctx context.Context) (*GPUSpec, error) {
	root := n.DriverRoot
	if root == "" {
		root = "/"
	}
	log := n.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	lib := n.NVML
	if lib == nil {
		// nvml.New, not the package's functions: a reference count of our own.
		lib = nvml.New()
	}
	if err := nvmlCall(lib.Init); err != nil {
		switch {
		case errors.Is(err, nvml.ERROR_LIBRARY_NOT_FOUND):
			return nil, fmt.Errorf("%w: no NVIDIA driver (libnvidia-ml.so.1 not found)", ErrNoGPUs)
		case errors.Is(err, nvml.ERROR_DRIVER_NOT_LOADED):
			return nil, fmt.Errorf("%w: the NVIDIA kernel driver is not loaded (NVML: %v)", ErrNoGPUs, err)
		default:
			return nil, fmt.Errorf("%w: NVML did not initialise: %v", ErrNoGPUs, err)
		}
	}
	defer nvmlCall(lib.Shutdown)
	if _, err := os.Stat(filepath.Join(root, "dev", "nvidiactl")); err != nil {
		return nil, fmt.Errorf("%w: no %s (the NVIDIA driver's control device)", ErrNoGPUs, filepath.Join(root, "dev", "nvidiactl"))
	}
	var driver string
	if err := nvmlCall(func() (r nvml.Return) { driver, r = lib.SystemGetDriverVersion(); return }); err != nil {
		return nil, fmt.Errorf("%w: NVML driver version: %v", ErrNoGPUs, err)
	}
	var count int
	if err := nvmlCall(func() (r nvml.Return) { count, r = lib.DeviceGetCount(); return }); err != nil || count == 0 {
		return nil, fmt.Errorf("%w: NVML finds no GPU (driver %s; %v)", ErrNoGPUs, driver, err)
	}
	byIndex, _ := nvcdi.NewDeviceNamer(nvcdi.DeviceNameStrategyIndex)
	byUUID, _ := nvcdi.NewDeviceNamer(nvcdi.DeviceNameStrategyUUID)
	gen, err := nvcdi.New(
		nvcdi.WithMode(nvcdi.ModeNvml),
		nvcdi.WithNvmlLib(lib),
		nvcdi.WithDriverRoot(root),
		nvcdi.WithDeviceNamers(byIndex, byUUID),
		nvcdi.WithDisabledHooks(nvcdi.AllHooks),
		nvcdi.WithLogger(nvcdiLogger{log}),
	)
	if err != nil {
		return nil, fmt.Errorf("nvcdi: %w", err)
	}
	var spec *GPUSpec
	err = safely(func() error {
		s, err := gen.GetSpec()
		if err != nil {
			return err
		}
		raw := s.Raw()
		if raw == nil || len(raw.Devices) == 0 {
			return fmt.Errorf("%w: nvcdi generated no device (driver %s)", ErrNoGPUs, driver)
		}
		spec = &GPUSpec{Spec: raw, Generator: "nvcdi", Driver: driver}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("nvcdi: generate the CDI spec for driver %s: %w", driver, err)
	}
	return spec, nil
}

// nvmlCall runs one NVML call, turning a failure into an error (an
// nvml.Return, for errors.Is) and a panic (a mock's missing method) into
// an error.
func nvmlCall(f func() nvml.Return) error {
	return safely(func() error {
		if r := f(); r != nvml.SUCCESS {
			return r
		}
		return nil
	})
}

func safely(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}

// nvcdiLogger sends nvcdi's messages to the executor's logger: its
// warnings are mostly optional files it did not find, so they are debug
// lines; its errors are warnings.
type nvcdiLogger struct{ l *slog.Logger }

func (n nvcdiLogger) Debugf(f string, a ...any)   { n.l.Debug("nvcdi: " + fmt.Sprintf(f, a...)) }
func (n nvcdiLogger) Tracef(f string, a ...any)   { n.l.Debug("nvcdi: " + fmt.Sprintf(f, a...)) }
func (n nvcdiLogger) Infof(f string, a ...any)    { n.l.Debug("nvcdi: " + fmt.Sprintf(f, a...)) }
func (n nvcdiLogger) Warningf(f string, a ...any) { n.l.Debug("nvcdi: " + fmt.Sprintf(f, a...)) }
func (n nvcdiLogger) Errorf(f string, a ...any)   { n.l.Warn("nvcdi: " + fmt.Sprintf(f, a...)) }
func (n nvcdiLogger) Info(a ...any)               { n.l.Debug("nvcdi: " + fmt.Sprint(a...)) }
func (n nvcdiLogger) Warning(a ...any)            { n.l.Debug("nvcdi: " + fmt.Sprint(a...)) }
