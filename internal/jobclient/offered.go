package jobclient

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/offers"
)

// describeOffered says what the providers offer for the spec's field that
// none of them meets (UnmetError): the largest size, the GPU models, the
// regions. offs are the schedulable offers, each summarising a provider
// by its most numerous GPU class.
func describeOffered(field string, s *ledger.JobSpec, offs []offers.Offer) string {
	if len(offs) == 0 {
		return "no provider that can take jobs now"
	}
	// The GPU needs are met, or not, within the job's models.
	gpuOffs := offs
	if len(s.GPUModels) > 0 {
		gpuOffs = slices.DeleteFunc(slices.Clone(offs), func(o offers.Offer) bool { return !slices.Contains(s.GPUModels, o.GPU) })
	}
	switch field {
	case "resources.cpu":
		return fmt.Sprintf("at most %d cores", int(maxOf(offs, func(o offers.Offer) float64 { return float64(o.CPU) })))
	case "resources.gpu.models", "resources.gpu.count":
		if field == "resources.gpu.count" && len(gpuOffs) > 0 && maxOf(gpuOffs, func(o offers.Offer) float64 { return float64(o.Count) }) > 0 {
			return fmt.Sprintf("at most %d GPUs on one provider", int(maxOf(gpuOffs, func(o offers.Offer) float64 { return float64(o.Count) })))
		}
		if !slices.ContainsFunc(offs, func(o offers.Offer) bool { return o.Count > 0 }) {
			return fmt.Sprintf("no GPUs: %d CPU-only provider(s)", len(offs))
		}
		return counted(offs, func(o offers.Offer) string { return o.GPU }, "GPU classes")
	case "resources.gpu.min_vram":
		return fmt.Sprintf("at most %s GiB per GPU", num(maxOf(gpuOffs, func(o offers.Offer) float64 { return o.VRAM })))
	case "resources.gpu.min_compute_cap":
		return "compute capabilities " + strings.Join(sortedSet(gpuOffs, func(o offers.Offer) string { return o.ComputeCap }), ", ")
	case "resources.memory":
		return fmt.Sprintf("at most %s GiB", num(maxOf(offs, func(o offers.Offer) float64 { return o.RAM })))
	case "resources.disk":
		return fmt.Sprintf("at most %s GiB free", num(maxOf(offs, func(o offers.Offer) float64 { return o.Disk })))
	case "executor":
		return counted(offs, func(o offers.Offer) string { return strings.Join(o.Executor, "+") }, "executors")
	case "region":
		return counted(offs, func(o offers.Offer) string { return o.Region }, "regions")
	case "network":
		return "no provider that allows network access (gpunet provider start --allow-network)"
	case "resources.gpu.interconnect":
		return counted(gpuOffs, func(o offers.Offer) string { return cmp.Or(o.Interconnect, "none") }, "interconnects")
	}
	return fmt.Sprintf("%d provider(s)", len(offs))
}

// counted lists the values key takes over offs, each with how many offers
// have it: "regions eu (3), us-east (1)".
func counted(offs []offers.Offer, key func(offers.Offer) string, what string) string {
	n := map[string]int{}
	for _, o := range offs {
		n[key(o)]++
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(n)) {
		name := k
		if name == "" {
			name = "none"
		}
		parts = append(parts, fmt.Sprintf("%s (%d)", name, n[k]))
	}
	return what + " " + strings.Join(parts, ", ")
}

func sortedSet(offs []offers.Offer, key func(offers.Offer) string) []string {
	var out []string
	for _, o := range offs {
		if k := key(o); k != "" && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}

func maxOf(offs []offers.Offer, v func(offers.Offer) float64) float64 {
	m := 0.0
	for _, o := range offs {
		m = max(m, v(o))
	}
	return m
}

// num writes a size in GiB to a tenth, without a needless ".0".
func num(f float64) string {
	return strings.TrimSuffix(strconv.FormatFloat(f, 'f', 1, 64), ".0")
}
