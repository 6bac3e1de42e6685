package hwinfo

import (
	"fmt"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// linkedDevices are n mock H100s whose NVLink peer-to-peer status for the
// pair (i, j) is status(i, j), asked only over NVLink.
func linkedDevices(t *testing.T, n int, status func(i, j int) (nvml.GpuP2PStatus, nvml.Return)) []nvml.Device {
	devs := make([]*mock.Device, n)
	for i := range devs {
		devs[i] = mockDevice(fmt.Sprintf("GPU-%d", i))
	}
	out := make([]nvml.Device, n)
	for i, d := range devs {
		d.GetP2PStatusFunc = func(peer nvml.Device, idx nvml.GpuP2PCapsIndex) (nvml.GpuP2PStatus, nvml.Return) {
			if idx != nvml.P2P_CAPS_INDEX_NVLINK {
				t.Errorf("P2P status asked for index %d, want NVLink's", idx)
			}
			for j, p := range devs {
				if nvml.Device(p) == peer {
					return status(i, j)
				}
			}
			t.Errorf("P2P status asked for a device that is not one of the GPUs")
			return nvml.P2P_STATUS_UNKNOWN, nvml.ERROR_INVALID_ARGUMENT
		}
		out[i] = d
	}
	return out
}

// TestNVMLInterconnect: eight GPUs every pair of which NVML reports
// peer-to-peer over NVLink are NVLinked; one pair short, or a pair NVML
// cannot answer for, is PCIe (with a Note for the latter); one GPU has no
// interconnect.
func TestNVMLInterconnect(t *testing.T) {
	ok := func(i, j int) (nvml.GpuP2PStatus, nvml.Return) { return nvml.P2P_STATUS_OK, nvml.SUCCESS }
	for _, tc := range []struct {
		name   string
		n      int
		status func(i, j int) (nvml.GpuP2PStatus, nvml.Return)
		want   string
		note   string
	}{
		{"nvswitch", 8, ok, InterconnectNVLink, ""},
		{"one pair over pcie", 8, func(i, j int) (nvml.GpuP2PStatus, nvml.Return) {
			if i == 3 && j == 6 {
				return nvml.P2P_STATUS_NOT_SUPPORTED, nvml.SUCCESS
			}
			return ok(i, j)
		}, InterconnectPCIe, ""},
		{"pairs of bridges", 4, func(i, j int) (nvml.GpuP2PStatus, nvml.Return) {
			if i/2 == j/2 {
				return ok(i, j)
			}
			return nvml.P2P_STATUS_NOT_SUPPORTED, nvml.SUCCESS
		}, InterconnectPCIe, ""},
		{"not supported", 2, func(i, j int) (nvml.GpuP2PStatus, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }, InterconnectPCIe, ""},
		{"not answered", 2, func(i, j int) (nvml.GpuP2PStatus, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }, InterconnectPCIe, "NVLink peer-to-peer status"},
		{"one gpu", 1, ok, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := fingerprintNVML(t, mockLib(linkedDevices(t, tc.n, tc.status)...))
			if len(inv.GPUs) != tc.n || inv.Interconnect != tc.want {
				t.Fatalf("%d GPUs, interconnect %q; want %d, %q (notes %q)", len(inv.GPUs), inv.Interconnect, tc.n, tc.want, inv.Notes)
			}
			if noted := strings.Contains(strings.Join(inv.Notes, "\n"), "NVLink"); noted != (tc.note != "") {
				t.Errorf("notes %q; want a note on NVLink: %v", inv.Notes, tc.note != "")
			}
		})
	}
}
