package bench

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

// The scheduler benchmark's market: a deterministic mix of providers
// (CPU-only machines and eight GPU classes, varied sizes, asks, regions,
// executors and job slots) and of jobs (CPU wasm jobs, GPU jobs naming
// one or two classes, GPU jobs taking any class, replicated jobs), drawn
// from a seeded generator so that every run and every provider count sees
// the same kind of market and exactly the same job stream.

// schedGPU is a GPU class of the benchmark's market.
type schedGPU struct {
	class      string
	vramGiB    uint64
	computeCap string
	price      uint64 // typical ask, usync per GPU-hour
	gops       uint64 // int8 GOPS per GPU the agent would measure (below the class's peak)
	weight     int    // share of providers, in percent
}

var schedGPUs = []schedGPU{
	{"RTX_4090", 24, "8.9", 400_000, 500_000, 15},
	{"RTX_3090", 24, "8.6", 250_000, 220_000, 8},
	{"A100_80GB", 80, "8.0", 1_500_000, 500_000, 8},
	{"H100_80GB", 80, "9.0", 2_500_000, 1_600_000, 6},
	{"L4", 24, "8.9", 350_000, 200_000, 6},
	{"T4", 16, "7.5", 150_000, 110_000, 6},
	{"A10", 24, "8.6", 300_000, 220_000, 5},
	{"L40S", 48, "8.9", 900_000, 650_000, 6},
}

// schedCPUShare is the percentage of CPU-only providers; the GPU weights
// above make up the rest.
const schedCPUShare = 40

var schedRegions = []string{"eu", "us-east", "us-west", "ap-south", "ap-east", "sa-east", "af-south", "me-central"}

// schedUnderStakedPct of providers stake half the minimum: indexed, but
// never schedulable.
const schedUnderStakedPct = 3

// benchKey is a deterministic account key.
type benchKey struct {
	priv ed25519.PrivateKey
	addr address.Address
}

// benchKeys derives n keys named prefix/i, on all cores.
func benchKeys(prefix string, n int) []benchKey {
	out := make([]benchKey, n)
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for i := g; i < n; i += workers {
				seed := sha256.Sum256([]byte("gpunet-bench/" + prefix + "/" + strconv.Itoa(i)))
				priv := ed25519.NewKeyFromSeed(seed[:])
				out[i] = benchKey{priv: priv, addr: address.FromPubKey(priv.Public().(ed25519.PublicKey))}
			}
		})
	}
	wg.Wait()
	return out
}

// signedTx is one tx to sign: from key, with sequence seq.
type signedTx struct {
	key *benchKey
	seq uint64
	msg ledger.Msg
}

// rawTxFee is the fee of every tx the benchmarks sign themselves: the
// params.min_fee of their genesis, which keeps the default's (chainclient
// pays it by itself for the txs it sends).
var rawTxFee = ledger.DefaultParams().MinFee

// signAll signs and encodes txs on all cores.
func signAll(chainID string, txs []signedTx) ([][]byte, error) {
	out := make([][]byte, len(txs))
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for g := range workers {
		wg.Go(func() {
			for i := g; i < len(txs); i += workers {
				t := &ledger.Tx{ChainID: chainID, Sequence: txs[i].seq, Fee: rawTxFee, Msg: txs[i].msg}
				if err := t.Sign(txs[i].key.priv); err != nil {
					errs[g] = err
					return
				}
				raw, err := t.Encode()
				if err != nil {
					errs[g] = err
					return
				}
				out[i] = raw
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ageRecipient is a syntactically valid age X25519 recipient.
func ageRecipient(name string) string {
	k := sha256.Sum256([]byte("gpunet-bench/age/" + name))
	s, err := address.EncodeBech32("age", k[:])
	if err != nil {
		panic(err)
	}
	return s
}

func between(r *rand.Rand, lo, hi uint64) uint64 { return lo + r.Uint64N(hi-lo+1) }

// pick returns an index drawn with the given weights.
func pick(r *rand.Rand, weights []int) int {
	total := 0
	for _, w := range weights {
		total += w
	}
	x := r.IntN(total)
	for i, w := range weights {
		if x < w {
			return i
		}
		x -= w
	}
	return len(weights) - 1
}

// schedProvider is one provider of the market: its declaration and the
// stake it bonds.
type schedProvider struct {
	info  ledger.ProviderInfo
	stake uint64
}

// schedProviders draws the market's n providers.
func schedProviders(seed uint64, n int, p ledger.Params) []schedProvider {
	r := rand.New(rand.NewPCG(seed, 0x70726f76))
	weights := []int{schedCPUShare}
	for _, g := range schedGPUs {
		weights = append(weights, g.weight)
	}
	out := make([]schedProvider, n)
	for i := range out {
		kind := pick(r, weights)
		pi := ledger.ProviderInfo{
			Inventory: ledger.Inventory{
				CPUModel: "Bench CPU", OS: "linux", Arch: "amd64",
			},
			Region:        schedRegions[r.IntN(len(schedRegions))],
			MaxJobs:       between(r, 1, 16),
			EncryptionKey: ageRecipient("provider/" + strconv.Itoa(i)),
		}
		cpuAsk := between(r, 10_000, 50_000) // usync per core-hour
		var required uint64
		if kind == 0 {
			pi.Inventory.CPUCores = []uint64{4, 8, 16, 32, 64}[r.IntN(5)]
			pi.Inventory.RAM = pi.Inventory.CPUCores * between(r, 2, 8) << 30
			pi.Inventory.Disk = between(r, 100, 2000) << 30
			pi.Measured = ledger.Measured{Int8GOPS: pi.Inventory.CPUCores * between(r, 50, 200), BandwidthMBs: 20_000, Device: "cpu"}
			pi.Executors = [][]string{{"wasm"}, {"oci", "wasm"}}[r.IntN(2)]
			pi.Asks = []ledger.Ask{{Class: ledger.CPUClass, PricePerHour: ledger.Amount(cpuAsk)}}
			required = p.MinStakeCPU
		} else {
			g := schedGPUs[kind-1]
			count := []int{1, 2, 4, 8}[pick(r, []int{50, 20, 15, 15})]
			for range count {
				pi.Inventory.GPUs = append(pi.Inventory.GPUs, ledger.GPUSpec{Class: g.class, VRAM: g.vramGiB << 30, ComputeCap: g.computeCap})
			}
			pi.Inventory.CPUCores = uint64(count) * []uint64{8, 16, 32}[r.IntN(3)]
			pi.Inventory.RAM = pi.Inventory.CPUCores * between(r, 4, 8) << 30
			pi.Inventory.Disk = between(r, 200, 8000) << 30
			pi.Inventory.Driver, pi.Inventory.CUDA = "550.54", "12.4"
			// Each GPU declares its own figure, the machine's tuning
			// (one draw, so the generator's sequence and so the rest of
			// the market stay as they were) applied to every GPU; the
			// CPU declares its own, the same tuning at 1 GOPS per
			// percent per core (70 to 100 per core, like the CPU-only
			// machines' 50 to 200).
			tuning := between(r, 70, 100)
			for j := range pi.Inventory.GPUs {
				pi.Inventory.GPUs[j].Int8GOPS = g.gops * tuning / 100
			}
			pi.Measured = ledger.Measured{Int8GOPS: pi.Inventory.CPUCores * tuning, BandwidthMBs: 200_000, Device: "cpu"}
			pi.Executors = [][]string{{"oci"}, {"oci", "wasm"}}[r.IntN(2)]
			ask := g.price * between(r, 60, 160) / 100
			pi.Asks = []ledger.Ask{{Class: g.class, PricePerHour: ledger.Amount(ask)}, {Class: ledger.CPUClass, PricePerHour: ledger.Amount(cpuAsk)}}
			required = uint64(count) * p.MinStakePerGPU
		}
		stake := required
		if r.IntN(100) < schedUnderStakedPct {
			stake = required / 2
		}
		out[i] = schedProvider{info: pi, stake: stake}
	}
	return out
}

// schedJobs draws n job specs. stream separates independent streams of
// the same seed (the throughput phase's jobs and the latency phase's).
func schedJobs(seed, stream uint64, n int) []ledger.JobSpec {
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
			s.CPUMilli = between(r, 2, 16) * 500
			s.Memory = between(r, 1, 32) << 29
			s.Disk = between(r, 1, 50) << 30
			units := (s.CPUMilli + 999) / 1000
			s.MaxPricePerHour = units * between(r, 25_000, 60_000)
		}
		switch kind := pick(r, []int{45, 40, 10, 5}); kind {
		case 0: // a CPU job
			cpuJob()
		case 1: // a GPU job naming one or two classes
			s.Executor, s.Image = "oci", "registry.example/bench/train@sha256:"+hash(i)
			s.GPUCount = uint64([]int{1, 2, 4, 8}[pick(r, []int{60, 20, 12, 8})])
			classes := []schedGPU{schedGPUs[pick(r, gpuWeights())]}
			if r.IntN(100) < 30 {
				if c := schedGPUs[pick(r, gpuWeights())]; c.class != classes[0].class {
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
			s.CPUMilli = s.GPUCount * between(r, 2, 8) * 1000
			s.Memory = s.GPUCount * between(r, 4, 32) << 30
			s.Disk = between(r, 10, 200) << 30
			s.MaxPricePerHour = s.GPUCount * top * between(r, 100, 180) / 100
		case 2: // a GPU job taking any class
			s.Executor, s.Image = "oci", "registry.example/bench/infer@sha256:"+hash(i)
			s.GPUCount = 1
			if r.IntN(100) < 40 {
				s.MinVRAM = 24 << 30
			}
			s.CPUMilli = 4000
			s.Memory = 16 << 30
			s.Disk = 50 << 30
			s.MaxPricePerHour = between(r, 400_000, 3_000_000)
		case 3: // a CPU job run twice and compared
			cpuJob()
			s.Verification = "full"
		}
		if r.IntN(100) < 30 {
			s.Region = schedRegions[r.IntN(len(schedRegions))]
			if s.GPUCount == 0 && r.IntN(10) == 0 {
				s.RegionRequired = true
			}
		}
		out[i] = s
	}
	return out
}

func gpuWeights() []int {
	w := make([]int, len(schedGPUs))
	for i, g := range schedGPUs {
		w[i] = g.weight
	}
	return w
}
