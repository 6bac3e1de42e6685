package oci_test

import (
	"errors"
	"os"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpunet/gpunet/internal/sandbox/oci"
)

// TestNVCDINoDriver: each way a host can lack a driver is ErrNoGPUs with
// a reason a provider operator can act on.
func TestNVCDINoDriver(t *testing.T) {
	for _, tc := range []struct {
		init nvml.Return
		want string
	}{
		{nvml.ERROR_LIBRARY_NOT_FOUND, "no NVIDIA driver (libnvidia-ml.so.1 not found)"},
		{nvml.ERROR_DRIVER_NOT_LOADED, "the NVIDIA kernel driver is not loaded"},
		{nvml.ERROR_UNKNOWN, "NVML did not initialise"},
	} {
		lib := &mock.Interface{InitFunc: func() nvml.Return { return tc.init }}
		_, err := oci.NVCDI{NVML: lib}.GenerateCDI(t.Context())
		if !errors.Is(err, oci.ErrNoGPUs) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NVML init %v: %v, want ErrNoGPUs saying %q", tc.init, err, tc.want)
		}
	}
	// NVML answers, but the driver's control device is missing.
	lib := &mock.Interface{
		InitFunc:     func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc: func() nvml.Return { return nvml.SUCCESS },
	}
	_, err := oci.NVCDI{NVML: lib, DriverRoot: t.TempDir()}.GenerateCDI(t.Context())
	if !errors.Is(err, oci.ErrNoGPUs) || !strings.Contains(err.Error(), "/dev/nvidiactl") {
		t.Errorf("no /dev/nvidiactl: %v", err)
	}
}

// TestRealNVCDI generates the CDI spec of the machine it runs on with
// nvcdi and the real NVML, and prepares it as the executor does. It runs
// only where GPUNET_REAL_NVML=1 says the machine has an NVIDIA GPU and
// driver; without Go there, build it elsewhere:
//
//	go test -c -o oci.test ./internal/sandbox/oci
//	GPUNET_REAL_NVML=1 ./oci.test -test.run TestRealNVCDI -test.v
func TestRealNVCDI(t *testing.T) {
	if os.Getenv("GPUNET_REAL_NVML") != "1" {
		t.Skip("set GPUNET_REAL_NVML=1 on a machine with an NVIDIA GPU and driver")
	}
	gs, err := oci.NVCDI{}.GenerateCDI(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if gs.Generator != "nvcdi" || !regexp.MustCompile(`^\d+\.\d+`).MatchString(gs.Driver) {
		t.Errorf("generator %q, driver %q", gs.Generator, gs.Driver)
	}
	s := gs.Spec
	var names []string
	byIndex, byUUID := false, false
	for _, d := range s.Devices {
		names = append(names, d.Name)
		byIndex = byIndex || d.Name == "0"
		byUUID = byUUID || strings.HasPrefix(d.Name, "GPU-")
		if len(d.ContainerEdits.DeviceNodes) == 0 {
			t.Errorf("device %s has no device node", d.Name)
		}
	}
	if !byIndex || !byUUID {
		t.Errorf("devices %v, want GPU 0 by index and by UUID", names)
	}
	if len(s.ContainerEdits.Hooks) != 0 {
		t.Errorf("nvcdi was asked for no hooks and gave %d", len(s.ContainerEdits.Hooks))
	}
	libs := map[string]bool{}
	for _, m := range s.ContainerEdits.Mounts {
		b := path.Base(m.ContainerPath)
		for _, l := range []string{"libcuda.so.", "libnvidia-ptxjitcompiler.so.", "libnvidia-ml.so."} {
			if strings.HasPrefix(b, l) {
				libs[l] = true
			}
		}
	}
	for _, l := range []string{"libcuda.so.", "libnvidia-ptxjitcompiler.so.", "libnvidia-ml.so."} {
		if !libs[l] {
			t.Errorf("no %s* among the driver's mounts", l)
		}
	}
	nodes := map[string]bool{}
	for _, n := range s.ContainerEdits.DeviceNodes {
		nodes[n.Path] = true
	}
	if !nodes["/dev/nvidiactl"] {
		t.Errorf("common device nodes %v, want /dev/nvidiactl", nodes)
	}
	y := oci.PreparedSpecYAML(t, gs)
	if !strings.Contains(string(y), "/libcuda.so.1\n") || !strings.Contains(string(y), "LD_LIBRARY_PATH=") {
		t.Errorf("the prepared spec has no libcuda.so.1 mount or no LD_LIBRARY_PATH")
	}
	t.Logf("driver %s, devices %v; prepared spec:\n%s", gs.Driver, names, y)
}
