package gpubench

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/gpu"
	"github.com/gpunet/gpunet/internal/hwinfo"
)

// TestWriteText: each kernel's figure is set against its class's peak when
// the class is known, "?" when not, and a kernel that failed says why.
func TestWriteText(t *testing.T) {
	r := &Result{
		Date: time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC),
		Devices: []*gpu.DeviceReport{
			{Device: "NVIDIA H100", Figures: hwinfo.Figures{Int8TOPS: 812.3, MemBandwidthGBs: 2900, Kernel: "mma",
				Kernels: []hwinfo.KernelFigure{{Kernel: "mma", Int8TOPS: 812.3, Shape: "8192³"}, {Kernel: "bad", Error: "mismatch"}}}},
			{Device: "Unknown GPU", Figures: hwinfo.Figures{Int8TOPS: 1, Kernels: []hwinfo.KernelFigure{{Kernel: "dp4a", Int8TOPS: 1, Shape: "64³"}}}},
		},
		PeakTOPS: []float64{1979, 0},
	}
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"gpunet bench gpu  2026-11-26T10:00:00Z\n",
		"\nNVIDIA H100\nmemory bandwidth 2900 GB/s (device-to-device copy)\n",
		"812.3  41.0% of 1979",
		"bad  failed: mismatch",
		"declared figure: 812.3 TOPS (mma)\n",
		"1.0              ?         64³",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
