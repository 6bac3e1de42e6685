package hwinfo

import (
	"fmt"
	"testing"
)

func TestClassOf(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name string
		vram uint64
		want string
	}{
		{"NVIDIA H100 80GB HBM3", 81559 * mib, ClassH100_80GB},
		{"NVIDIA H100 PCIe", 81559 * mib, ClassH100_80GB},
		{"NVIDIA H100 NVL", 95830 * mib, "H100_NVL"},
		{"NVIDIA H200", 143771 * mib, ClassH200_141GB},
		{"NVIDIA H200 NVL", 0, ClassH200_141GB},
		{"NVIDIA GH200 480GB", 97871 * mib, "GH200_480GB"},
		{"NVIDIA A100-SXM4-80GB", 81920 * mib, ClassA100_80GB},
		{"NVIDIA A100 80GB PCIe", 81920 * mib, ClassA100_80GB},
		{"NVIDIA A100-SXM4-40GB", 40960 * mib, ClassA100_40GB},
		{"NVIDIA A100-PCIE-40GB", 40960 * mib, ClassA100_40GB},
		{"Mock NVIDIA A100-SXM4-40GB", 40960 * mib, ClassA100_40GB},
		{"NVIDIA A100-SXM4-80GB", 0, ClassA100_80GB},        // memory unknown: the name decides
		{"NVIDIA A100-SXM4-40GB", 80 * gib, ClassA100_80GB}, // memory beats the name
		{"NVIDIA A100-SXM4", 0, "A100_SXM4"},                // neither tells
		{"NVIDIA L40S", 46068 * mib, ClassL40S},
		{"NVIDIA L40", 46068 * mib, ClassL40},
		{"NVIDIA L4", 23034 * mib, ClassL4},
		{"NVIDIA A10", 23028 * mib, ClassA10},
		{"NVIDIA A10G", 23028 * mib, ClassA10G},
		{"Tesla T4", 15360 * mib, ClassT4},
		{"NVIDIA T400", 2048 * mib, "T400"},
		{"Tesla V100-SXM2-32GB", 32510 * mib, ClassV100_32GB},
		{"Tesla V100-PCIE-16GB", 16160 * mib, ClassV100_16GB},
		{"Tesla V100-SXM2-16GB", 0, ClassV100_16GB},
		{"NVIDIA GeForce RTX 4090", 24564 * mib, ClassRTX4090},
		{"NVIDIA GeForce RTX 4090 D", 24564 * mib, "RTX_4090_D"},
		{"NVIDIA GeForce RTX 4080", 16376 * mib, ClassRTX4080},
		{"NVIDIA GeForce RTX 4080 SUPER", 16376 * mib, "RTX_4080_SUPER"},
		{"NVIDIA GeForce RTX 3090", 24576 * mib, ClassRTX3090},
		{"NVIDIA GeForce RTX 3090 Ti", 24564 * mib, "RTX_3090_TI"},
		{"NVIDIA GeForce RTX 3080", 10240 * mib, ClassRTX3080},
		{"NVIDIA GeForce RTX 3080 Laptop GPU", 16384 * mib, "RTX_3080_LAPTOP_GPU"},
		{"NVIDIA RTX A6000", 49140 * mib, ClassRTXA6000},
		{"NVIDIA RTX 6000 Ada Generation", 49140 * mib, ClassRTX6000Ada},
		{"Quadro RTX 6000", 24576 * mib, "QUADRO_RTX_6000"},
		{"NVIDIA GeForce GTX 1080 Ti", 11264 * mib, "GTX_1080_TI"},
		{"  nvidia   geforce  rtx--2080 (super)  ", 0, "RTX_2080_SUPER"},
		{"", 0, "UNKNOWN"},
		{"---", 0, "UNKNOWN"},
	}
	for _, tt := range tests {
		if got := ClassOf(tt.name, tt.vram); got != tt.want {
			t.Errorf("ClassOf(%q, %d MiB) = %q, want %q", tt.name, tt.vram/mib, got, tt.want)
		}
	}
}

func FuzzClassOf(f *testing.F) {
	f.Add("NVIDIA H100 80GB HBM3", uint64(80<<30))
	f.Add("NVIDIA GeForce RTX 4090", uint64(0))
	f.Fuzz(func(t *testing.T, name string, vram uint64) {
		c := ClassOf(name, vram)
		if c == "" {
			t.Fatalf("ClassOf(%q) is empty", name)
		}
		for _, r := range c {
			if !('A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_') {
				t.Fatalf("ClassOf(%q) = %q has %q", name, c, r)
			}
		}
		if c[0] == '_' || c[len(c)-1] == '_' {
			t.Fatalf("ClassOf(%q) = %q is not trimmed", name, c)
		}
	})
}

func ExampleClassOf() {
	fmt.Println(ClassOf("NVIDIA A100-SXM4-80GB", 81920<<20))
	fmt.Println(ClassOf("NVIDIA GeForce RTX 4090", 24564<<20))
	fmt.Println(ClassOf("NVIDIA GeForce GTX 1080 Ti", 11264<<20))
	// Output:
	// A100_80GB
	// RTX_4090
	// GTX_1080_TI
}
