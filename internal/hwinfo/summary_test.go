package hwinfo

import "testing"

func TestSummary(t *testing.T) {
	h100 := GPU{Class: ClassH100_80GB, VRAMBytes: 81559 << 20, ComputeCapability: "9.0", PCIeGen: 5, PCIeWidth: 16}
	tests := []struct {
		name string
		inv  Inventory
		want string
	}{
		{
			name: "mixed GPUs",
			inv: Inventory{
				GPUs: []GPU{
					withIndex(h100, 0, "GPU-a"), withIndex(h100, 1, "GPU-b"),
					{Index: 2, Class: ClassT4, VRAMBytes: 15360 << 20, ComputeCapability: "7.5"},
				},
				DriverVersion: "550.54.15", CUDAVersion: "12.4",
				CPUModel: "AMD EPYC 7763 64-Core Processor", CPUCores: 128,
				RAMBytes: 512 << 30, DiskFreeBytes: 1979 << 30, OS: "linux", Arch: "amd64",
			},
			want: "2× H100_80GB (79.6 GiB, cc 9.0, PCIe gen5 x16) + 1× T4 (15 GiB, cc 7.5), driver 550.54.15, CUDA 12.4\n" +
				"AMD EPYC 7763 64-Core Processor, 128 cores, 512 GiB RAM, 1.9 TiB free disk, linux/amd64",
		},
		{
			name: "CPU-only",
			inv: Inventory{
				CPUModel: "AMD EPYC", CPUCores: 2, RAMBytes: 23 << 30, OS: "linux", Arch: "amd64",
				Notes: []string{"no NVML library found: CPU-only provider"},
			},
			want: "no GPUs (CPU-only)\nAMD EPYC, 2 cores, 23 GiB RAM, linux/amd64\nnote: no NVML library found: CPU-only provider",
		},
		{name: "empty", want: "no GPUs (CPU-only)\nhost unknown"},
	}
	for _, tt := range tests {
		if got := tt.inv.Summary(); got != tt.want {
			t.Errorf("%s: Summary() =\n%s\nwant\n%s", tt.name, got, tt.want)
		}
	}
}

func withIndex(g GPU, i int, uuid string) GPU {
	g.Index, g.UUID = i, uuid
	return g
}

func TestHumanBytes(t *testing.T) {
	tests := map[uint64]string{
		0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB",
		80 << 30: "80 GiB", 81559 << 20: "79.6 GiB", 1979 << 30: "1.9 TiB", 1 << 60: "1 EiB",
	}
	for in, want := range tests {
		if got := humanBytes(in); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", in, got, want)
		}
	}
}
