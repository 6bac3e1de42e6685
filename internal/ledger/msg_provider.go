package ledger

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
)

// The provider registry's messages: register, update, set status; and what a
// declaration may claim (ProviderInfo.Validate).

// MsgRegisterProvider registers the sender as a provider. It comes online
// at once; it is schedulable once it has staked the minimum.
type MsgRegisterProvider struct {
	ProviderInfo
}

// MsgUpdateProvider replaces a registered provider's declared info. The
// hardware-challenge rulings follow the devices (Provider.redeclare); an
// online provider's GPU bindings follow the declaration.
type MsgUpdateProvider struct {
	ProviderInfo
}

// MsgSetProviderStatus marks a provider online or offline. Going offline
// is how an agent leaves cleanly: it closes any open challenge unpenalised.
type MsgSetProviderStatus struct {
	Online bool `json:"online"`
}

// Type implements Msg.
func (*MsgRegisterProvider) Type() MsgType { return MsgTypeRegisterProvider }

// Type implements Msg.
func (*MsgUpdateProvider) Type() MsgType { return MsgTypeUpdateProvider }

// Type implements Msg.
func (*MsgSetProviderStatus) Type() MsgType { return MsgTypeSetProviderStatus }

// ValidateBasic implements Msg.
func (m *MsgRegisterProvider) ValidateBasic() error { return m.ProviderInfo.Validate() }

// ValidateBasic implements Msg.
func (m *MsgUpdateProvider) ValidateBasic() error { return m.ProviderInfo.Validate() }

// ValidateBasic implements Msg.
func (m *MsgSetProviderStatus) ValidateBasic() error { return nil }

// Validate checks a provider's declaration for what no real machine can
// have: no or absurd hardware, throughput above the physical peak of the
// claimed hardware, unknown executors, asks for hardware it lacks.
func (pi *ProviderInfo) Validate() error {
	inv := &pi.Inventory
	if len(inv.GPUs) > maxGPUs {
		return invalid("inventory lists %d GPUs, at most %d per provider", len(inv.GPUs), maxGPUs)
	}
	classes := map[string]bool{CPUClass: true}
	for i, g := range inv.GPUs {
		if !ValidHardwareClass(g.Class) {
			return invalid("gpus[%d].class %q: want upper-case letters, digits and _ (e.g. H100_80GB)", i, g.Class)
		}
		if g.VRAM == 0 {
			return invalid("gpus[%d] (%s) has no VRAM", i, g.Class)
		}
		if g.VRAM > maxVRAM {
			return invalid("gpus[%d] (%s) claims %d GiB of VRAM, more than any GPU has", i, g.Class, g.VRAM>>30)
		}
		if hc, ok := gpuClasses[g.Class]; ok && hc.VRAMGiB > 0 && g.VRAM > hc.VRAMGiB<<30*11/10 {
			return invalid("gpus[%d] (%s) claims %d GiB of VRAM; that model has %d GiB", i, g.Class, g.VRAM>>30, hc.VRAMGiB)
		}
		if g.ComputeCap != "" && !ValidComputeCap(g.ComputeCap) {
			return invalid("gpus[%d].compute_cap %q: want MAJOR.MINOR, e.g. 9.0", i, g.ComputeCap)
		}
		for _, f := range [...]struct{ name, v string }{{"uuid", g.UUID}, {"serial", g.Serial}} {
			if len(f.v) > maxTextLength {
				return invalid("gpus[%d].%s is longer than %d characters", i, f.name, maxTextLength)
			}
		}
		if peak := gpuPeakGOPS(g.Class); g.Int8GOPS > peak {
			return invalid("gpus[%d] (%s) measured int8 throughput %d GOPS is above the physical peak of that GPU (%d GOPS)", i, g.Class, g.Int8GOPS, peak)
		}
		classes[g.Class] = true
	}
	if err := checkDistinctGPUs(inv.GPUs); err != nil {
		return err
	}
	switch {
	case inv.CPUCores == 0 || inv.CPUCores > maxCPUCores:
		return invalid("inventory.cpu_cores %d out of range [1, %d]", inv.CPUCores, maxCPUCores)
	case inv.RAM == 0 || inv.RAM > maxRAM:
		return invalid("inventory.ram %d bytes out of range (1 byte to 64 TiB)", inv.RAM)
	case inv.Disk > maxDisk:
		return invalid("inventory.disk %d bytes is more than 1 PiB", inv.Disk)
	case inv.Interconnect != "" && inv.Interconnect != InterconnectNVLink && inv.Interconnect != InterconnectPCIe:
		return invalid("inventory.interconnect %q: want nvlink, pcie or empty", inv.Interconnect)
	case inv.Interconnect != "" && len(inv.GPUs) < 2:
		return invalid("inventory.interconnect %q links GPUs to each other: it needs at least 2 GPUs, the inventory has %d", inv.Interconnect, len(inv.GPUs))
	}
	for _, f := range [...]struct{ name, v string }{{"cpu_model", inv.CPUModel}, {"os", inv.OS}, {"arch", inv.Arch}, {"driver", inv.Driver}, {"cuda", inv.CUDA}} {
		if len(f.v) > maxTextLength {
			return invalid("inventory.%s is longer than %d characters", f.name, maxTextLength)
		}
	}
	if peak := cpuPeakGOPS(inv.CPUCores); pi.Measured.Int8GOPS > peak {
		return invalid("measured.int8_gops %d GOPS (the CPU's) is above the physical peak of %d CPU cores (%d GOPS; each GPU's figure goes in its gpus[i].int8_gops)", pi.Measured.Int8GOPS, inv.CPUCores, peak)
	}
	if len(pi.Measured.Device) > maxTextLength {
		return invalid("measured.device is longer than %d characters", maxTextLength)
	}
	if !ValidRegion(pi.Region) {
		return invalid("region %q: want 1-32 lower-case letters, digits and -, e.g. eu or us-east", pi.Region)
	}
	if err := CheckLabel(pi.Label); err != nil {
		return err
	}
	if len(pi.Executors) == 0 {
		return invalid("executors is empty; want some of %v", knownExecutors)
	}
	if pi.Network && !slices.Contains(pi.Executors, ExecutorOCI) {
		return invalid("network: only oci jobs can have network access, and this provider offers no oci")
	}
	seen := map[string]bool{}
	for _, e := range pi.Executors {
		if !slices.Contains(knownExecutors, e) {
			return invalid("unknown executor %q; known: %v", e, knownExecutors)
		}
		if seen[e] {
			return invalid("executor %q listed twice", e)
		}
		seen[e] = true
	}
	if err := checkWasmEngine(pi.WasmEngine, seen[ExecutorWASM]); err != nil {
		return err
	}
	asked := map[string]bool{}
	for i, a := range pi.Asks {
		if !classes[a.Class] {
			return invalid("asks[%d] prices class %q, which the inventory does not have", i, a.Class)
		}
		if asked[a.Class] {
			return invalid("asks[%d]: class %q priced twice", i, a.Class)
		}
		asked[a.Class] = true
		if a.PricePerHour == 0 || uint64(a.PricePerHour) > maxPriceHour {
			return invalid("asks[%d].price_per_hour %d usync out of range [1, %d]", i, a.PricePerHour, maxPriceHour)
		}
	}
	for _, g := range inv.GPUs {
		if !asked[g.Class] {
			return invalid("no ask for GPU class %s: every GPU class needs a price", g.Class)
		}
	}
	if len(inv.GPUs) == 0 && !asked[CPUClass] {
		return invalid("a CPU-only provider needs an ask for class %q", CPUClass)
	}
	if pi.MaxJobs == 0 || pi.MaxJobs > maxMaxJobs {
		return invalid("max_jobs %d out of range [1, %d]", pi.MaxJobs, maxMaxJobs)
	}
	hrp, key, err := address.DecodeBech32(pi.EncryptionKey)
	if err != nil || hrp != "age" || len(key) != 32 {
		return invalid("encryption_key %q is not an age X25519 recipient (age1…)", pi.EncryptionKey)
	}
	return nil
}

// checkWasmEngine checks a declaration's wasm_engine: required, and well
// formed, when it offers wasm (offersWasm); absent otherwise.
func checkWasmEngine(engine string, offersWasm bool) error {
	const example = "wasmtime-39.0.1/linux-amd64/cranelift-speed/wasi-gpunet-1"
	switch {
	case offersWasm && engine == "":
		return invalid("wasm_engine is empty: a provider offering the wasm executor declares the engine it runs wasm jobs on, e.g. %s", example)
	case !offersWasm && engine != "":
		return invalid("wasm_engine is set, but executors do not include wasm: declare an engine only with the wasm executor")
	case len(engine) > MaxWasmEngineLen:
		return invalid("wasm_engine is %d bytes long, at most %d", len(engine), MaxWasmEngineLen)
	case engine != "" && !ValidWasmEngine(engine):
		return invalid("wasm_engine %q: want 1-%d of A-Z a-z 0-9 . _ , + = : @ / -, starting with a letter or digit, e.g. %s", engine, MaxWasmEngineLen, example)
	}
	return nil
}

func execRegisterProvider(o *Overlay, from address.Address, m *MsgRegisterProvider, info BlockInfo) ([]Event, error) {
	if _, ok, err := GetProvider(o, from); err != nil {
		return nil, err
	} else if ok {
		return nil, fmt.Errorf("%s is already registered; send an update instead: %w", from, ErrAlreadyRegistered)
	}
	if err := checkGPUsFree(o, from, m.Inventory.GPUs); err != nil {
		return nil, err
	}
	h := uint64(info.Height)
	p := &Provider{Address: from, ProviderInfo: m.ProviderInfo, RegisteredHeight: h, UpdatedHeight: h, Reputation: initialReputation}
	setOnline(o, p)
	setProvider(o, p)
	return []Event{{Type: "provider_registered", Attrs: []Attr{{"provider", from.String()}}}}, nil
}

func execUpdateProvider(o *Overlay, from address.Address, m *MsgUpdateProvider, params Params, info BlockInfo) ([]Event, error) {
	p, err := mustProvider(o, from)
	if err != nil {
		return nil, err
	}
	if p.Online {
		if err := checkGPUsFree(o, from, m.Inventory.GPUs); err != nil {
			return nil, err
		}
	}
	wasTEE := teeCounts(p)
	p.redeclare(m.ProviderInfo)
	p.UpdatedHeight = uint64(info.Height)
	setProvider(o, p)
	events := []Event{{Type: "provider_updated", Attrs: []Attr{{"provider", from.String()}}}}
	evs, err := reassignOtherEngine(o, from, p.WasmEngine, params, info)
	if err != nil {
		return nil, err
	}
	events = append(events, evs...)
	if wasTEE && !teeCounts(p) {
		// A new encryption key ends the attestation: its trust: tee
		// service replicas go elsewhere (market_tee.go).
		if evs, err = dropTEEReplicasOf(o, from, params, info.Time.Unix()); err != nil {
			return nil, err
		}
		events = append(events, evs...)
	}
	// Fewer slots carry fewer ungranted placements (slots.go).
	evs, err = bumpExcess(o, from, 0, params, info)
	return append(events, evs...), err
}

// reassignOtherEngine puts back in the queue the replicas a provider holds
// of jobs pinned to a wasm engine it no longer runs (it was upgraded and
// declared the new one), before it runs them: run on another engine, a
// replica could disagree with its peers for no fault of anyone's. A
// replica it has already committed stands: it was computed on the engine
// recorded with it. Like going offline, this costs the provider nothing
// but the work.
func reassignOtherEngine(o *Overlay, provider address.Address, engine string, p Params, info BlockInfo) ([]Event, error) {
	var events []Event
	for _, id := range ActiveJobsOf(o, provider) {
		j, err := mustJob(o, id)
		if err != nil {
			return nil, err
		}
		a := j.assignment(provider)
		if j.Done() || a == nil || !j.Spec.SharesEngine() || a.WasmEngine == "" || a.WasmEngine == engine || a.Commitment != nil || a.Result != nil {
			continue
		}
		evs, err := reassign(o, j, []address.Address{provider}, Wait{Cause: CauseEngineChanged, Text: a.WasmEngine}, p, info)
		if err != nil {
			return nil, err
		}
		events = append(events, evs...)
	}
	return events, nil
}

func execSetProviderStatus(o *Overlay, from address.Address, m *MsgSetProviderStatus, params Params, info BlockInfo) ([]Event, error) {
	p, err := mustProvider(o, from)
	if err != nil {
		return nil, err
	}
	if m.Online {
		if !p.Online {
			if err := checkGPUsFree(o, from, p.Inventory.GPUs); err != nil {
				return nil, err
			}
		}
		setOnline(o, p)
		p.MissedInARow = 0
	} else {
		if p.Challenge != nil {
			o.Delete(livenessDeadlineKey(p.Challenge.Deadline, p.Address))
			p.Challenge = nil
		}
		if err := setOffline(o, p); err != nil {
			return nil, err
		}
	}
	setProvider(o, p)
	events := []Event{{Type: "provider_status", Attrs: []Attr{{"provider", from.String()}, {"online", strconv.FormatBool(m.Online)}}}}
	if !m.Online {
		evs, err := reassignJobsOf(o, from, params, info)
		if err != nil {
			return nil, err
		}
		events = append(events, evs...)
	}
	return events, nil
}
