package market

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/gpunet/gpunet/internal/ledger"
)

// ProvidersPerBlock is how many providers a benchmark registers (and
// stakes: two txs each) per block while it builds a state.
const ProvidersPerBlock = 2_500

// gpuClass is a GPU class of the benchmark's market.
type gpuClass struct {
	class      string
	vramGiB    uint64
	computeCap string
	price      uint64 // typical ask, usync per GPU-hour
	gops       uint64 // int8 GOPS per GPU the agent would measure (below the class's peak)
	weight     int    // share of providers, in percent
}

var gpuClasses = []gpuClass{
	{"RTX_4090", 24, "8.9", 400_000, 500_000, 15},
	{"RTX_3090", 24, "8.6", 250_000, 220_000, 8},
	{"A100_80GB", 80, "8.0", 1_500_000, 500_000, 8},
	{"H100_80GB", 80, "9.0", 2_500_000, 1_600_000, 6},
	{"L4", 24, "8.9", 350_000, 200_000, 6},
	{"T4", 16, "7.5", 150_000, 110_000, 6},
	{"A10", 24, "8.6", 300_000, 220_000, 5},
	{"L40S", 48, "8.9", 900_000, 650_000, 6},
}

// cpuShare is the percentage of CPU-only providers; the GPU weights
// above make up the rest.
const cpuShare = 40

// Regions are the regions providers declare and jobs ask for.
var Regions = []string{"eu", "us-east", "us-west", "ap-south", "ap-east", "sa-east", "af-south", "me-central"}

// WasmEngine is the wasm engine the market's wasm providers declare.
const WasmEngine = "wasmtime-39.0.1/linux-amd64/cranelift-speed/wasi-gpunet-1"

// underStakedPct of providers stake half the minimum: indexed, but
// never schedulable.
const underStakedPct = 3

// Provider is one provider of the market: its declaration and the
// stake it bonds.
type Provider struct {
	Info  ledger.ProviderInfo
	Stake uint64
}

// Providers draws the market's n providers.
func Providers(seed uint64, n int, p ledger.Params) []Provider {
	r := rand.New(rand.NewPCG(seed, 0x70726f76))
	weights := []int{cpuShare}
	for _, g := range gpuClasses {
		weights = append(weights, g.weight)
	}
	out := make([]Provider, n)
	for i := range out {
		kind := pick(r, weights)
		pi := ledger.ProviderInfo{
			Inventory: ledger.Inventory{
				CPUModel: "Bench CPU", OS: "linux", Arch: "amd64",
			},
			Region:        Regions[r.IntN(len(Regions))],
			MaxJobs:       Between(r, 1, 16),
			EncryptionKey: AgeRecipient("provider/" + strconv.Itoa(i)),
		}
		cpuAsk := Between(r, 10_000, 50_000) // usync per core-hour
		var required uint64
		if kind == 0 {
			pi.Inventory.CPUCores = []uint64{4, 8, 16, 32, 64}[r.IntN(5)]
			pi.Inventory.RAM = pi.Inventory.CPUCores * Between(r, 2, 8) << 30
			pi.Inventory.Disk = Between(r, 100, 2000) << 30
			pi.Measured = ledger.Measured{Int8GOPS: pi.Inventory.CPUCores * Between(r, 50, 200), BandwidthMBs: 20_000, Device: "cpu"}
			pi.Executors = [][]string{{"wasm"}, {"oci", "wasm"}}[r.IntN(2)]
			pi.Asks = []ledger.Ask{{Class: ledger.CPUClass, PricePerHour: ledger.Amount(cpuAsk)}}
			required = p.MinStakeCPU
		} else {
			g := gpuClasses[kind-1]
			count := []int{1, 2, 4, 8}[pick(r, []int{50, 20, 15, 15})]
			for range count {
				pi.Inventory.GPUs = append(pi.Inventory.GPUs, ledger.GPUSpec{Class: g.class, VRAM: g.vramGiB << 30, ComputeCap: g.computeCap})
			}
			pi.Inventory.CPUCores = uint64(count) * []uint64{8, 16, 32}[r.IntN(3)]
			pi.Inventory.RAM = pi.Inventory.CPUCores * Between(r, 4, 8) << 30
			pi.Inventory.Disk = Between(r, 200, 8000) << 30
			pi.Inventory.Driver, pi.Inventory.CUDA = "550.54", "12.4"
			// Each GPU declares its own figure, the machine's tuning
			// (one draw, so the generator's sequence and so the rest of
			// the market stay as they were) applied to every GPU; the
			// CPU declares its own, the same tuning at 1 GOPS per
			// percent per core (70 to 100 per core, like the CPU-only
			// machines' 50 to 200).
			tuning := Between(r, 70, 100)
			for j := range pi.Inventory.GPUs {
				pi.Inventory.GPUs[j].Int8GOPS = g.gops * tuning / 100
			}
			pi.Measured = ledger.Measured{Int8GOPS: pi.Inventory.CPUCores * tuning, BandwidthMBs: 200_000, Device: "cpu"}
			pi.Executors = [][]string{{"oci"}, {"oci", "wasm"}}[r.IntN(2)]
			ask := g.price * Between(r, 60, 160) / 100
			pi.Asks = []ledger.Ask{{Class: g.class, PricePerHour: ledger.Amount(ask)}, {Class: ledger.CPUClass, PricePerHour: ledger.Amount(cpuAsk)}}
			required = uint64(count) * p.MinStakePerGPU
		}
		if slices.Contains(pi.Executors, ledger.ExecutorWASM) {
			pi.WasmEngine = WasmEngine // one engine: every wasm provider may replicate every job
		}
		stake := required
		if r.IntN(100) < underStakedPct {
			stake = required / 2
		}
		out[i] = Provider{Info: pi, Stake: stake}
	}
	return out
}

// Jobs draws n job specs. stream separates independent streams of the
// same seed (the scheduler benchmark's throughput and latency phases, the
// API benchmark's state).
func Jobs(seed, stream uint64, n int) []ledger.JobSpec {
	r := rand.New(rand.NewPCG(seed, stream))
	out := make([]ledger.JobSpec, n)
	hash := func(i int) string { return fmt.Sprintf("%064x", uint64(i)+stream<<32) }
	for i := range out {
		s := ledger.JobSpec{
			Name:           "bench-" + strconv.Itoa(i),
			Outputs:        []string{"/out"},
			TimeoutSeconds: 3600,
			Verification:   []string{"none", "spot"}[r.IntN(2)],
			Deterministic:  true,
		}
		cpuJob := func() {
			s.Executor, s.Module = "wasm", "sha256:"+hash(i)
			s.CPUMilli = Between(r, 2, 16) * 500
			s.Memory = Between(r, 1, 32) << 29
			s.Disk = Between(r, 1, 50) << 30
			units := (s.CPUMilli + 999) / 1000
			s.MaxPricePerHour = units * Between(r, 25_000, 60_000)
		}
		switch kind := pick(r, []int{45, 40, 10, 5}); kind {
		case 0: // a CPU job
			cpuJob()
		case 1: // a GPU job naming one or two classes
			s.Executor, s.Image = "oci", "registry.example/bench/train@sha256:"+hash(i)
			s.GPUCount = uint64([]int{1, 2, 4, 8}[pick(r, []int{60, 20, 12, 8})])
			classes := []gpuClass{gpuClasses[pick(r, gpuWeights())]}
			if r.IntN(100) < 30 {
				if c := gpuClasses[pick(r, gpuWeights())]; c.class != classes[0].class {
					classes = append(classes, c)
				}
			}
			var top uint64
			minVRAM, minCC := classes[0].vramGiB, classes[0].computeCap
			for _, c := range classes {
				s.GPUModels = append(s.GPUModels, c.class)
				top = max(top, c.price)
				minVRAM = min(minVRAM, c.vramGiB)
				if c.computeCap < minCC {
					minCC = c.computeCap
				}
			}
			if r.IntN(100) < 30 {
				s.MinVRAM = minVRAM << 30
			}
			if r.IntN(100) < 20 {
				s.MinComputeCap = minCC
			}
			s.CPUMilli = s.GPUCount * Between(r, 2, 8) * 1000
			s.Memory = s.GPUCount * Between(r, 4, 32) << 30
			s.Disk = Between(r, 10, 200) << 30
			s.MaxPricePerHour = s.GPUCount * top * Between(r, 100, 180) / 100
		case 2: // a GPU job taking any class
			s.Executor, s.Image = "oci", "registry.example/bench/infer@sha256:"+hash(i)
			s.GPUCount = 1
			if r.IntN(100) < 40 {
				s.MinVRAM = 24 << 30
			}
			s.CPUMilli = 4000
			s.Memory = 16 << 30
			s.Disk = 50 << 30
			s.MaxPricePerHour = Between(r, 400_000, 3_000_000)
		case 3: // a CPU job run twice and compared
			cpuJob()
			s.Verification = "full"
		}
		if r.IntN(100) < 30 {
			s.Region = Regions[r.IntN(len(Regions))]
			if s.GPUCount == 0 && r.IntN(10) == 0 {
				s.RegionRequired = true
			}
		}
		out[i] = s
	}
	return out
}

// gpuWeights are the GPU classes' shares of providers.
func gpuWeights() []int {
	w := make([]int, len(gpuClasses))
	for i, g := range gpuClasses {
		w[i] = g.weight
	}
	return w
}
