package ledger

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/gpunet/gpunet/internal/address"
)

// The provider registry: what each provider offers, its stake, whether it is
// online, and its reputation. Its messages are in msg_provider.go.

// GPUSpec is one GPU of a provider.
type GPUSpec struct {
	Class      string `json:"class"`       // hardware class, e.g. H100_80GB
	VRAM       uint64 `json:"vram"`        // bytes
	ComputeCap string `json:"compute_cap"` // e.g. "9.0"
	// UUID is the GPU's own identifier (NVML's "GPU-…"). A non-empty UUID
	// is bound to one online provider at a time (gpubind.go), and names the
	// GPU a hardware challenge is for. It is self-reported.
	UUID string `json:"uuid,omitempty"`
	// Serial is the board serial where NVML can read it; bound like UUID.
	Serial string `json:"serial,omitempty"`
	// Int8GOPS is this GPU's own measured int8 GEMM throughput, giga-ops
	// per second; 0 = not measured (the GPU is then never challenged and
	// adds nothing to the provider's throughput).
	Int8GOPS uint64 `json:"int8_gops,omitempty"`
}

// Inventory is a provider's hardware as its agent detected it.
type Inventory struct {
	GPUs     []GPUSpec `json:"gpus"`
	CPUCores uint64    `json:"cpu_cores"`
	CPUModel string    `json:"cpu_model"`
	RAM      uint64    `json:"ram"`  // bytes
	Disk     uint64    `json:"disk"` // bytes free for jobs
	OS       string    `json:"os"`
	Arch     string    `json:"arch"`
	Driver   string    `json:"driver,omitempty"`
	CUDA     string    `json:"cuda,omitempty"`
	// Interconnect is what links the provider's GPUs to each other:
	// InterconnectNVLink when every pair is linked by NVLink (NVML's P2P
	// status over NVLink), InterconnectPCIe when two or more GPUs are not
	// all so linked, "" with fewer than two GPUs or when unknown.
	// Self-reported, like the rest of the inventory.
	Interconnect string `json:"interconnect,omitempty" rec:"since=8"`
}

// Measured is what the agent's own benchmark measured at start on the
// CPU: hardware challenges on device 0 are about Int8GOPS. Each GPU's own
// figure is its GPUSpec.Int8GOPS.
type Measured struct {
	Int8GOPS     uint64 `json:"int8_gops"`     // the CPU's int8 GEMM throughput, giga-ops per second
	BandwidthMBs uint64 `json:"bandwidth_mbs"` // memory bandwidth, MB/s
	Device       string `json:"device"`        // what was measured: "cpu"
}

// Ask is a provider's price for one hardware class it has.
type Ask struct {
	Class string `json:"class"` // one of its GPU classes, or "cpu"
	// PricePerHour is usync per unit-hour: per GPU for a GPU class, per
	// core for "cpu". Usage is metered per second at PricePerHour/3600.
	PricePerHour Amount `json:"price_per_hour"`
}

// ProviderInfo is what a provider declares when it registers or updates.
type ProviderInfo struct {
	Inventory Inventory `json:"inventory"`
	Measured  Measured  `json:"measured"`
	Region    string    `json:"region"`
	Executors []string  `json:"executors"`
	// WasmEngine names the engine the provider runs wasm jobs on: engine,
	// version, platform and settings, e.g.
	// "wasmtime-39.0.1/linux-amd64/cranelift-speed,…/wasi-gpunet-1" (the
	// sandbox's Engine()). Required when Executors include wasm, empty
	// otherwise. The replicas of a wasm job whose results are compared all
	// run on one engine (scheduler.go), so that two engines' legitimate
	// differences (NaN bits, say) are never taken for a wrong result.
	WasmEngine string `json:"wasm_engine,omitempty" rec:"since=3"`
	Asks       []Ask  `json:"asks"`
	MaxJobs    uint64 `json:"max_jobs"`
	// Network says the provider lets oci jobs that ask for it reach the
	// network.
	Network bool `json:"network,omitempty"`
	// EncryptionKey is the provider's age X25519 recipient ("age1…"); job
	// keys are wrapped to it.
	EncryptionKey string `json:"encryption_key"`
	// Label is a name the provider gives itself, shown beside its address
	// ("Acme GPUs #2"); empty: none. It is self-declared and not unique:
	// two providers may pick the same one, so wherever it is shown the
	// address is shown with it (ValidLabel says what it may hold).
	Label string `json:"label,omitempty" rec:"since=8"`
}

// Provider is a registered provider's state.
type Provider struct {
	Address address.Address `json:"address"`
	ProviderInfo
	Stake            uint64             `json:"stake"` // usync bonded
	Online           bool               `json:"online"`
	OnlineIndex      uint64             `json:"online_index"` // position in the online index while online
	RegisteredHeight uint64             `json:"registered_height"`
	UpdatedHeight    uint64             `json:"updated_height"`
	Reputation       uint64             `json:"reputation"` // parts per million
	Answered         uint64             `json:"answered"`   // liveness challenges answered
	Missed           uint64             `json:"missed"`     // liveness challenges missed
	MissedInARow     uint64             `json:"missed_in_a_row"`
	Challenge        *LivenessChallenge `json:"challenge,omitempty"`
	Earned           uint64             `json:"earned"` // usync paid for jobs
	// Jobs counts the slots taken for real: by job placements whose key
	// was granted (to its owner's grant or a handover) and that have not
	// reported, and by service replicas. It never exceeds MaxJobs but
	// when the provider lowered MaxJobs below it.
	Jobs uint64 `json:"jobs"`
	// Verification record (verification.go): results a replica confirmed,
	// results outvoted, commitments never opened, and per class.
	Validated  uint64        `json:"validated"`
	Invalid    uint64        `json:"invalid"`
	Unrevealed uint64        `json:"unrevealed"`
	Classes    []ClassRecord `json:"classes,omitempty"`
	// Slashed is all the usync ever slashed; SlashEvents the latest.
	Slashed     uint64       `json:"slashed"`
	SlashEvents []SlashEvent `json:"slash_events,omitempty"`
	// Hardware challenges (hwchallenge.go): the open one, and the record.
	HWChallenge *HardwareChallenge `json:"hw_challenge,omitempty"`
	Challenges  ChallengeRecord    `json:"challenges"`
	// Tentative counts the job placements on it whose key is not granted
	// yet: each holds a slot only tentatively, and the first granted
	// takes it (docs/ledger.md, Slots; sched.TentativePerSlot).
	Tentative uint64 `json:"tentative,omitempty" rec:"since=7"`
	// Delegated is the stake delegators bonded to it (its delegation
	// pool's tokens, delegation.go): it backs the stake it needs to be
	// schedulable, beside its own.
	Delegated uint64 `json:"delegated,omitempty" rec:"since=8"`
	// TEE is its attestation (tee.go): a pending nonce, and what its last
	// accepted TEE evidence proved; nil before it asks for a nonce.
	TEE *Attestation `json:"tee,omitempty" rec:"since=8"`
}

// Uptime returns the fraction of liveness challenges answered, in parts
// per million (1,000,000 before the first challenge).
func (p *Provider) Uptime() uint64 {
	total := p.Answered + p.Missed
	if total == 0 {
		return ppm
	}
	return p.Answered * ppm / total
}

// Backing is the stake that counts toward p's requirement: its own and
// what delegators bonded to it.
func (p *Provider) Backing() uint64 { return p.Stake + p.Delegated }

// RequiredStake is the minimum stake that makes p schedulable.
func (p *Provider) RequiredStake(params Params) uint64 {
	if n := uint64(len(p.Inventory.GPUs)); n > 0 {
		return n * params.MinStakePerGPU
	}
	return params.MinStakeCPU
}

// Schedulable reports whether jobs may be placed on p: online and staked at
// least the minimum.
func (p *Provider) Schedulable(params Params) bool {
	return p.Online && p.Backing() >= p.RequiredStake(params)
}

func providerKey(a address.Address) []byte { return append(slices.Clone(prefixProvider), a[:]...) }

func onlineKey(i uint64) []byte { return binary.BigEndian.AppendUint64(slices.Clone(prefixOnline), i) }

// GetProvider reads a provider; ok is false if addr is not registered.
func GetProvider(kv KV, addr address.Address) (p *Provider, ok bool, err error) {
	b := kv.Get(providerKey(addr))
	if b == nil {
		return nil, false, nil
	}
	p = &Provider{}
	if err := decodeRecord(b, p); err != nil {
		return nil, false, fmt.Errorf("provider %s: corrupt record: %w: %w", addr, err, ErrInternal)
	}
	return p, true, nil
}

// mustProvider reads a registered provider or fails with ErrUnknownProvider.
func mustProvider(kv KV, addr address.Address) (*Provider, error) {
	p, ok, err := GetProvider(kv, addr)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%s is not a registered provider (run `gpunet provider start` to register): %w", addr, ErrUnknownProvider)
	}
	return p, nil
}

// setProvider stores p and keeps the scheduler's index and the GPU
// bindings in step with it.
func setProvider(o *Overlay, p *Provider) {
	old, _, err := GetProvider(o, p.Address)
	if err != nil {
		panic(err) // a corrupt record; the block fails and the node halts
	}
	setProviderFrom(o, old, p)
}

// setProviderFrom is setProvider for a caller that holds the stored record
// (old; nil for a new provider), which spares decoding it again.
func setProviderFrom(o *Overlay, old, p *Provider) {
	reindexProvider(o, old, p)
	adjustOffered(o, old, p)
	reindexTEEExpiry(o, old, p)
	rebindGPUs(o, old, p)
	o.Set(providerKey(p.Address), encodeRecord(p))
	if old == nil || old.Stake != p.Stake {
		providerWeightChanged(o, p) // gov_weight.go
	}
}

// IterateProviders calls fn for each registered provider in address order.
func IterateProviders(kv KV, fn func(p *Provider) bool) error {
	var err error
	kv.Iterate(prefixProvider, prefixEnd(prefixProvider), func(k, v []byte) bool {
		p := &Provider{}
		if e := decodeRecord(v, p); e != nil {
			err = fmt.Errorf("provider record %x: %w: %w", k, e, ErrInternal)
			return false
		}
		return fn(p)
	})
	return err
}

// The online index lists online providers by position 0..n-1 so that a
// block can sample them uniformly in O(1) each.

// OnlineCount returns the number of online providers.
func OnlineCount(kv KV) uint64 { return getUint(kv, keyOnlineCount) }

func setOnline(o *Overlay, p *Provider) {
	if p.Online {
		return
	}
	n := OnlineCount(o)
	o.Set(onlineKey(n), p.Address[:])
	setUint(o, keyOnlineCount, n+1)
	p.Online, p.OnlineIndex = true, n
}

func setOffline(o *Overlay, p *Provider) error {
	if !p.Online {
		return nil
	}
	n := OnlineCount(o)
	last := n - 1
	if p.OnlineIndex != last {
		moved, err := address.FromBytes(o.Get(onlineKey(last)))
		if err != nil {
			return fmt.Errorf("online index %d: %w: %w", last, err, ErrInternal)
		}
		mp, err := mustProvider(o, moved)
		if err != nil {
			return err
		}
		mp.OnlineIndex = p.OnlineIndex
		o.Set(onlineKey(p.OnlineIndex), moved[:])
		setProvider(o, mp)
	}
	o.Delete(onlineKey(last))
	setUint(o, keyOnlineCount, last)
	p.Online, p.OnlineIndex = false, 0
	// Attested GPUs are held while online only, like declared ones; the
	// agent attests them again when it returns (tee_gpu.go).
	if p.TEE != nil {
		p.TEE.GPUs = nil
	}
	return nil
}
