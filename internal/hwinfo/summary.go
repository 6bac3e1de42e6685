package hwinfo

import (
	"fmt"
	"strconv"
	"strings"
)

// Summary describes the inventory in a few lines for a log: the GPUs grouped
// by identical model, then CPU, memory, disk and platform, then one line per
// note. For example:
//
//	8× A100_80GB (80 GiB, cc 8.0, PCIe gen4 x16), driver 550.54.15, CUDA 12.4
//	AMD EPYC 7763 64-Core Processor, 128 cores, 512 GiB RAM, 1.8 TiB free disk, linux/amd64
func (inv *Inventory) Summary() string {
	var b strings.Builder
	if len(inv.GPUs) == 0 {
		b.WriteString("no GPUs (CPU-only)")
	} else {
		type group struct {
			GPU   // Index, UUID and Name zeroed: the key
			count int
		}
		var groups []*group
		byKey := map[GPU]*group{}
		for _, g := range inv.GPUs {
			k := GPU{Class: g.Class, VRAMBytes: g.VRAMBytes, ComputeCapability: g.ComputeCapability, PCIeGen: g.PCIeGen, PCIeWidth: g.PCIeWidth}
			if gr, ok := byKey[k]; ok {
				gr.count++
				continue
			}
			gr := &group{GPU: k, count: 1}
			byKey[k] = gr
			groups = append(groups, gr)
		}
		for i, gr := range groups {
			if i > 0 {
				b.WriteString(" + ")
			}
			var details []string
			if gr.VRAMBytes > 0 {
				details = append(details, humanBytes(gr.VRAMBytes))
			}
			if gr.ComputeCapability != "" {
				details = append(details, "cc "+gr.ComputeCapability)
			}
			if gr.PCIeGen > 0 || gr.PCIeWidth > 0 {
				details = append(details, fmt.Sprintf("PCIe gen%d x%d", gr.PCIeGen, gr.PCIeWidth))
			}
			fmt.Fprintf(&b, "%d× %s", gr.count, gr.Class)
			if len(details) > 0 {
				fmt.Fprintf(&b, " (%s)", strings.Join(details, ", "))
			}
		}
		if inv.DriverVersion != "" {
			fmt.Fprintf(&b, ", driver %s", inv.DriverVersion)
		}
		if inv.CUDAVersion != "" {
			fmt.Fprintf(&b, ", CUDA %s", inv.CUDAVersion)
		}
	}
	b.WriteByte('\n')

	var host []string
	if inv.CPUModel != "" {
		host = append(host, inv.CPUModel)
	}
	if inv.CPUCores > 0 {
		host = append(host, fmt.Sprintf("%d cores", inv.CPUCores))
	}
	if inv.RAMBytes > 0 {
		host = append(host, humanBytes(inv.RAMBytes)+" RAM")
	}
	if inv.DiskFreeBytes > 0 {
		host = append(host, humanBytes(inv.DiskFreeBytes)+" free disk")
	}
	if inv.OS != "" || inv.Arch != "" {
		host = append(host, inv.OS+"/"+inv.Arch)
	}
	if len(host) == 0 {
		host = append(host, "host unknown")
	}
	b.WriteString(strings.Join(host, ", "))
	for _, n := range inv.Notes {
		b.WriteString("\nnote: ")
		b.WriteString(n)
	}
	return b.String()
}

// humanBytes formats n in binary units with at most one decimal: "80 GiB",
// "79.6 GiB", "1.8 TiB".
func humanBytes(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, u := float64(n), 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	if v >= 1024 || u == 0 {
		s = strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strings.TrimSuffix(s, ".0") + " " + units[u]
}
