package ledger

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger/sched"
)

func TestOfferRoundTrip(t *testing.T) {
	p := &Provider{
		Address: address.Address{1, 2, 3},
		ProviderInfo: ProviderInfo{
			Inventory: Inventory{
				GPUs: []GPUSpec{
					{Class: "H100_80GB", VRAM: 80 << 30, ComputeCap: "9.0"},
					{Class: "L4", VRAM: 24 << 30, ComputeCap: "8.9"},
					{Class: "H100_80GB", VRAM: 80 << 30, ComputeCap: ""},
				},
				CPUCores: 64, RAM: 512 << 30, Disk: 2 << 40,
			},
			Measured:  Measured{Int8GOPS: 1_600_000},
			Region:    "eu",
			Executors: []string{"wasm", "oci"},
			MaxJobs:   4,
		},
		Stake: 7_000_000, Online: true, Reputation: 812_345, Jobs: 1, Tentative: 5,
	}
	cp := classPrefix("H100_80GB")
	key := providerIndexKey("H100_80GB", 2_500_000, p.Address)
	var o sched.Offer
	if err := decodeOffer(cp, key, encodeOffer(p, "H100_80GB"), &o); err != nil {
		t.Fatal(err)
	}
	want := sched.Offer{Provider: p.Address, Ask: 2_500_000, Executors: 3, Stake: 7_000_000, GPUs: 3, CPUCores: 64,
		RAM: 512 << 30, Disk: 2 << 40, Region: []byte("eu"), Jobs: 1, MaxJobs: 4, Tentative: 5, Reputation: 812_345, Int8GOPS: 1_600_000,
		ClassGPUs: []sched.GPU{{VRAM: 80 << 30, ComputeCap: 9000}, {VRAM: 80 << 30, ComputeCap: 0}}}
	if string(o.Region) != string(want.Region) || len(o.ClassGPUs) != 2 || o.ClassGPUs[0] != want.ClassGPUs[0] || o.ClassGPUs[1] != want.ClassGPUs[1] {
		t.Fatalf("decoded %+v, want %+v", o, want)
	}
	o.ClassGPUs, want.ClassGPUs = nil, nil
	if fmt.Sprint(o) != fmt.Sprint(want) {
		t.Fatalf("decoded %+v, want %+v", o, want)
	}
}

// TestOfferEngine: a wasm provider's offer carries its engine's id behind
// the offerEngine flag; an offer without wasm, or written before engines
// (no flag), has none.
func TestOfferEngine(t *testing.T) {
	const engine = "wazero-1.12.0/linux-amd64/wasi-gpunet-1"
	p := &Provider{Address: address.Address{4}, ProviderInfo: ProviderInfo{
		Inventory: Inventory{CPUCores: 8, RAM: 16 << 30}, Region: "eu", Executors: []string{"wasm"}, WasmEngine: engine, MaxJobs: 2,
	}}
	cp := classPrefix(CPUClass)
	key := providerIndexKey(CPUClass, 10_000, p.Address)
	var o sched.Offer
	v := encodeOffer(p, CPUClass)
	if err := decodeOffer(cp, key, v, &o); err != nil {
		t.Fatal(err)
	}
	if o.Engine != engineID(engine) || o.Engine == 0 || v[1]&offerEngine == 0 || o.Executors != executorBits(p.Executors) || o.CPUCores != 8 || string(o.Region) != "eu" {
		t.Fatalf("decoded engine %x flags %b executors %b cores %d region %q, want engine %x", o.Engine, v[1], o.Executors, o.CPUCores, o.Region, engineID(engine))
	}
	if engineID("") != 0 || engineID(engine) == engineID(engine+"x") {
		t.Fatal("engine ids: none must be 0, two engines two ids")
	}
	// The same offer as written before engines: no flag, no id.
	old := append([]byte{v[0], v[1] &^ offerEngine}, v[2+8:]...)
	if err := decodeOffer(cp, key, old, &o); err != nil || o.Engine != 0 {
		t.Fatalf("an offer without the flag: engine %x, %v", o.Engine, err)
	}
	// The flag without the id, or with id 0, is corrupt.
	for _, bad := range [][]byte{v[:2+7], append(append([]byte{v[0], v[1]}, make([]byte, 8)...), v[2+8:]...)} {
		if err := decodeOffer(cp, key, bad, &o); err == nil {
			t.Fatalf("corrupt engine %x accepted", bad)
		}
	}
	p.Executors, p.WasmEngine = []string{"oci"}, ""
	if err := decodeOffer(cp, key, encodeOffer(p, CPUClass), &o); err != nil || o.Engine != 0 {
		t.Fatalf("oci offer: engine %x, %v", o.Engine, err)
	}
}

func TestComputeCapValue(t *testing.T) {
	for in, want := range map[string]uint64{"9.0": 9000, "8.9": 8009, "10.12": 10012, "": 0, "8": 8000, "x.1": 0, "1.2.3": 0} {
		if got := computeCapValue(in); got != want {
			t.Errorf("computeCapValue(%q) = %d, want %d", in, got, want)
		}
	}
	if computeCapValue("8.10") <= computeCapValue("8.9") {
		t.Error("8.10 must rank above 8.9")
	}
}

// FuzzDecodeOffer: a corrupt index value is an error, never a panic, and a
// value that decodes re-encodes to itself.
func FuzzDecodeOffer(f *testing.F) {
	p := &Provider{ProviderInfo: ProviderInfo{Inventory: Inventory{GPUs: []GPUSpec{{Class: "T4", VRAM: 16 << 30, ComputeCap: "7.5"}}}, Region: "us-east", Executors: []string{"wasm"}, WasmEngine: "e"}}
	f.Add(encodeOffer(p, "T4"))
	f.Add([]byte{offerVersion, 1})
	cp := classPrefix("T4")
	key := providerIndexKey("T4", 1, address.Address{})
	f.Fuzz(func(t *testing.T, value []byte) {
		var o sched.Offer
		if decodeOffer(cp, key, value, &o) != nil {
			return
		}
		if len(value) > 0 && !bytes.HasPrefix(value, []byte{offerVersion}) {
			t.Fatalf("accepted version %d", value[0])
		}
	})
}

// TestReputationCeiling: after outvoted results, answering liveness
// challenges cannot buy the reputation back; confirmed results can.
func TestReputationCeiling(t *testing.T) {
	p := &Provider{Reputation: 4_000, Invalid: 7}
	for range 1000 {
		p.raiseReputation()
	}
	if c := p.ReputationCeiling(); p.Reputation > c || c > 15_000 {
		t.Fatalf("reputation %d, ceiling %d after 7 invalid results", p.Reputation, c)
	}
	p.Validated = 500
	for range 1000 {
		p.raiseReputation()
	}
	if p.Reputation < 800_000 {
		t.Fatalf("500 validated results left the reputation at %d", p.Reputation)
	}
	honest := &Provider{Reputation: ppm / 2}
	honest.raiseReputation()
	if honest.Reputation != ppm/2+(ppm/2)/reputationGainDiv {
		t.Fatalf("honest gain %d", honest.Reputation)
	}
}
