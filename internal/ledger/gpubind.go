package ledger

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/gpunet/gpunet/internal/address"
)

// GPU identity binding. A GPU that declares a UUID or a board serial is
// bound to the provider that declares it while that provider is online:
// gpu/u/<uuid> and gpu/s/<serial> hold its address. A registration, an
// update or a return online that declares a GPU another online provider
// holds is refused (ErrGPUTaken), so one physical GPU is not offered by two
// providers at once. Going offline (by message or by missed liveness
// challenges) releases a provider's GPUs, so that a machine whose agent
// lost its key can register again under a new address once the old one
// has dropped offline; an update releases the GPUs it no longer declares.
//
// UUIDs and serials are self-reported. This stops the same GPU being
// registered twice and accidental double listing (two agents on one
// machine), not a forger who invents identifiers. A GPU whose NVIDIA
// evidence the chain verified (tee_gpu.go) also binds its attested
// identity, gpu/a/<id>, and the UUID it was attested under, whether
// declared or not; such a binding beats a self-reported one (the
// squatter goes offline). The keys are matched without regard to ASCII
// case. The index is
// part of the app hash (it decides which txs succeed), and CheckInvariants
// rebuilds it from the provider records.

// gpuBinding is one identity key a declaration binds.
type gpuBinding struct {
	key  []byte
	gpu  int    // position in inventory.gpus
	kind string // "uuid" or "serial"
	id   string // as declared
}

// what names the binding for messages, e.g. `uuid "GPU-…"`.
func (b gpuBinding) what() string { return fmt.Sprintf("%s %q", b.kind, b.id) }

// foldASCII lower-cases ASCII letters (and nothing else: Unicode case
// tables change between Go versions, the state must not).
func foldASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// declaredBindings lists the identity keys of gpus, in declaration order.
func declaredBindings(gpus []GPUSpec) []gpuBinding {
	var out []gpuBinding
	for i, g := range gpus {
		if g.UUID != "" {
			out = append(out, gpuBinding{append(slices.Clone(prefixGPUUUID), foldASCII(g.UUID)...), i, "uuid", g.UUID})
		}
		if g.Serial != "" {
			out = append(out, gpuBinding{append(slices.Clone(prefixGPUSerial), foldASCII(g.Serial)...), i, "serial", g.Serial})
		}
	}
	return out
}

// heldBindings are the keys p holds: its declared ones and its attested
// GPUs' (identity and UUID, each key once) while it is online, none
// otherwise (or for nil).
func heldBindings(p *Provider) []gpuBinding {
	if p == nil || !p.Online {
		return nil
	}
	out := declaredBindings(p.Inventory.GPUs)
	for _, g := range attestedGPUs(p) {
		out = append(out, gpuBinding{attestedKey(g.ID), -1, "attested identity", g.ID})
		k := append(slices.Clone(prefixGPUUUID), foldASCII(g.UUID)...)
		if !slices.ContainsFunc(out, func(b gpuBinding) bool { return bytes.Equal(b.key, k) }) {
			out = append(out, gpuBinding{k, -1, "uuid", g.UUID})
		}
	}
	return out
}

// holdsSame reports whether old and p hold the same bindings, without
// building them.
func holdsSame(old, p *Provider) bool {
	if (old != nil && old.Online) != p.Online {
		return false
	}
	if !p.Online {
		return true
	}
	a, b := old.Inventory.GPUs, p.Inventory.GPUs
	if len(a) != len(b) || !slices.EqualFunc(attestedGPUs(old), attestedGPUs(p), func(x, y AttestedGPU) bool { return x.ID == y.ID && x.UUID == y.UUID }) {
		return false
	}
	for i := range a {
		if a[i].UUID != b[i].UUID || a[i].Serial != b[i].Serial {
			return false
		}
	}
	return true
}

// checkDistinctGPUs refuses a declaration that lists one UUID or serial
// twice (Validate).
func checkDistinctGPUs(gpus []GPUSpec) error {
	seen := map[string]int{}
	for _, b := range declaredBindings(gpus) {
		if j, ok := seen[string(b.key)]; ok {
			return invalid("gpus[%d] has the %s of gpus[%d]: each GPU is listed once", b.gpu, b.what(), j)
		}
		seen[string(b.key)] = b.gpu
	}
	return nil
}

// checkGPUsFree refuses gpus if another provider than a holds any of them.
func checkGPUsFree(kv KV, a address.Address, gpus []GPUSpec) error {
	for _, b := range declaredBindings(gpus) {
		v := kv.Get(b.key)
		if v == nil || bytes.Equal(v, a[:]) {
			continue
		}
		holder, err := address.FromBytes(v)
		if err != nil {
			return fmt.Errorf("gpu binding %q: %w: %w", b.key, err, ErrInternal)
		}
		return fmt.Errorf("gpus[%d] (%s) is held by provider %s, which is online with it: one GPU serves one provider at a time (take %s offline or drop the GPU from its declaration first): %w",
			b.gpu, b.what(), holder, holder, ErrGPUTaken)
	}
	return nil
}

// rebindGPUs moves the index from what old held to what p holds
// (setProviderFrom; the handlers checked that the keys are free).
func rebindGPUs(o *Overlay, old, p *Provider) {
	if holdsSame(old, p) {
		return // most writes: a job count or reputation changed
	}
	before, after := heldBindings(old), heldBindings(p)
	if len(before) == len(after) && slices.EqualFunc(before, after, func(x, y gpuBinding) bool { return bytes.Equal(x.key, y.key) }) {
		return
	}
	keep := make(map[string]bool, len(after))
	for _, b := range after {
		keep[string(b.key)] = true
	}
	for _, b := range before {
		if !keep[string(b.key)] && bytes.Equal(o.Get(b.key), p.Address[:]) {
			o.Delete(b.key)
		}
	}
	for _, b := range after {
		if !bytes.Equal(o.Get(b.key), p.Address[:]) {
			o.Set(b.key, p.Address[:])
		}
	}
}

// gpuBindingCheck rebuilds the binding index from the provider records for
// CheckInvariants.
type gpuBindingCheck struct {
	want map[string]address.Address
}

func (c *gpuBindingCheck) add(p *Provider) error {
	if c.want == nil {
		c.want = map[string]address.Address{}
	}
	if !p.Online && len(attestedGPUs(p)) > 0 {
		return fmt.Errorf("invariant: offline provider %s keeps %d attested GPUs: %w", p.Address, len(attestedGPUs(p)), ErrInternal)
	}
	for _, b := range heldBindings(p) {
		if other, ok := c.want[string(b.key)]; ok {
			return fmt.Errorf("invariant: GPU %s declared by online providers %s and %s: %w", b.what(), other, p.Address, ErrInternal)
		}
		c.want[string(b.key)] = p.Address
	}
	return nil
}

func (c *gpuBindingCheck) check(kv KV) error {
	var err error
	n := 0
	kv.Iterate(prefixGPUBinding, prefixEnd(prefixGPUBinding), func(k, v []byte) bool {
		n++
		if a, ok := c.want[string(k)]; !ok || !bytes.Equal(v, a[:]) {
			err = fmt.Errorf("invariant: gpu binding %q is %x, the provider records want %x (bound: %v): %w", k, v, a[:], ok, ErrInternal)
			return false
		}
		return true
	})
	if err != nil {
		return err
	}
	if n != len(c.want) {
		return fmt.Errorf("invariant: %d gpu bindings stored, the online providers declare %d: %w", n, len(c.want), ErrInternal)
	}
	return nil
}
