package jobtext

import (
	"fmt"
	"strings"

	"github.com/gpunet/gpunet/internal/ledger"
)

// JobMiss renders why the scheduler could not place a job with spec
// (a WaitUnplaced wait's Miss), as its queue shows it.
func JobMiss(m *ledger.PlacementMiss, spec *ledger.JobSpec) string {
	reason := QuoteMiss(m, spec)
	if m.Assigned > 0 {
		reason = fmt.Sprintf("waiting for %d more distinct provider(s) to verify it: %s", m.Need, reason)
	}
	return reason + preemptNote(m)
}

// QuoteMiss renders why a job with spec would not be placed now (a
// quote's miss): the verdict, with how many distinct providers its
// verification needs when some fit.
func QuoteMiss(m *ledger.PlacementMiss, spec *ledger.JobSpec) string {
	reason := Verdict(m, spec)
	switch {
	case spec.Gang() && m.Fit >= m.Need && m.Need > 1:
		// Enough fit, but not in one site (region).
		reason = fmt.Sprintf("needs %d members together in one region for its gang: %d providers fit, in %d region(s), at most %d in one",
			spec.Nodes, m.Fit, m.Sites, m.Together)
	case spec.Gang() && m.Fit > 0:
		reason = fmt.Sprintf("needs %d distinct providers in one region for its gang, %d fit; %s", spec.Nodes, m.Fit, reason)
	case m.Engines > 1:
		reason = fmt.Sprintf("needs %d distinct providers on one wasm engine for verification %s: %d fit, but they run %d engines, at most %d on one; %s",
			spec.PlannedReplicas(), spec.Verification, m.Fitting, m.Engines, m.Fit, reason)
	case m.Fit > 0:
		reason = fmt.Sprintf("needs %d distinct providers for verification %s, %d fit; %s", spec.PlannedReplicas(), spec.Verification, m.Fit, reason)
	}
	return reason
}

// ServiceMiss renders why replicas of a service with spec wait for
// providers.
func ServiceMiss(m *ledger.PlacementMiss, spec *ledger.ServiceSpec) string {
	view := spec.JobView()
	reason := fmt.Sprintf("waiting for %d more provider(s): %s", m.Need-min(m.Fit, m.Need), Verdict(m, &view))
	if m.Excluded > 0 {
		reason += fmt.Sprintf("; %d that fit are excluded (they gave back, dropped or were evicted from a replica of it)", m.Excluded)
	}
	return reason
}

// ServiceQuoteMiss renders why replicas of a service with spec would
// wait if it were deployed now.
func ServiceQuoteMiss(m *ledger.PlacementMiss, spec *ledger.ServiceSpec) string {
	if m.Fit > 0 {
		return fmt.Sprintf("%d of %d replica(s) would wait for a provider: each needs its own, and %d fit now", m.Need-min(m.Fit, m.Need), m.Need, m.Fit)
	}
	view := spec.JobView()
	return "no replica would be placed: " + Verdict(m, &view)
}

func preemptNote(m *ledger.PlacementMiss) string {
	switch {
	case m.PreemptWait != 0:
		return fmt.Sprintf("; waiting for the slots of the spot jobs it preempted (free by %d)", m.PreemptWait)
	case m.Preempting != 0:
		return fmt.Sprintf("; preempting %d spot job(s), whose slots free at %d", m.Preempting, m.PreemptAt)
	}
	return ""
}

// Verdict renders the scheduler's tally of why the offers it saw cannot
// run a job with spec j.
func Verdict(v *ledger.PlacementMiss, j *ledger.JobSpec) string {
	if v.OverMarket > 0 && v.Seen == 0 {
		return fmt.Sprintf("the market price for tier %s is %s/h (the class's index × the tier's factor), above max %s/h", j.TierName(), syncString(v.MarketPrice), syncString(j.MaxPricePerHour))
	}
	if v.Classes == 0 || (v.Seen == 0 && v.CheapestAbove == 0) {
		if j.GPUCount > 0 {
			models := "any GPU class"
			if len(j.GPUModels) > 0 {
				models = strings.Join(j.GPUModels, " or ")
			}
			return fmt.Sprintf("no online provider offers %s", models)
		}
		return "no online provider offers CPU capacity"
	}
	var parts []string
	add := func(n uint64, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(v.Executor, "lack the "+j.Executor+" executor")
	add(v.GPUs, fmt.Sprintf("have fewer than %d GPUs", j.GPUCount))
	add(v.VRAM, fmt.Sprintf("have less than %d GiB VRAM", j.MinVRAM>>30))
	add(v.ComputeCap, "have compute capability below "+j.MinComputeCap)
	add(v.CPU, fmt.Sprintf("have fewer than %.3g cores", float64(j.CPUMilli)/1000))
	add(v.RAM, fmt.Sprintf("have less than %d MiB RAM", j.Memory>>20))
	add(v.Disk, fmt.Sprintf("have less than %d MiB disk", j.Disk>>20))
	add(v.Region, "are outside region "+j.Region)
	add(v.Network, "do not allow network access")
	add(v.NVLink, "lack NVLink between their GPUs")
	add(v.Stake, "are under-staked")
	add(v.Busy, "match but are busy")
	add(v.OtherEngine, "run another wasm engine than its replicas' ("+v.Pinned+")")
	add(v.NoEngine, "declare no wasm engine")
	s := fmt.Sprintf("0 of %d providers within the price can run it", v.Seen)
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, ", ")
	}
	if v.CheapestAbove > 0 {
		s += fmt.Sprintf("; cheapest other ask %s/h > max %s/h", syncString(v.CheapestAbove), syncString(j.MaxPricePerHour))
	}
	return s
}

// syncString is usync as SYNC, without trailing zeros.
func syncString(usync uint64) string {
	s := fmt.Sprintf("%d.%06d", usync/1_000_000, usync%1_000_000)
	return strings.TrimRight(strings.TrimRight(s, "0"), ".") + " SYNC"
}
