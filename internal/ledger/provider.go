package ledger

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
)

// The provider registry: what each provider offers, its stake, whether it is
// online, and its reputation.

// Hash is a 32-byte digest, hex in JSON.
type Hash [32]byte

// MarshalText implements encoding.TextMarshaler.
func (h Hash) MarshalText() ([]byte, error) { return []byte(hex.EncodeToString(h[:])), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (h *Hash) UnmarshalText(b []byte) error {
	if len(b) != 64 {
		return fmt.Errorf("hash must be 64 hex characters, got %d", len(b))
	}
	_, err := hex.Decode(h[:], b)
	return err
}

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
	Asks      []Ask     `json:"asks"`
	MaxJobs   uint64    `json:"max_jobs"`
	// Network says the provider lets oci jobs that ask for it reach the
	// network.
	Network bool `json:"network,omitempty"`
	// EncryptionKey is the provider's age X25519 recipient ("age1…"); job
	// keys are wrapped to it.
	EncryptionKey string `json:"encryption_key"`
}

// LivenessChallenge is an open liveness challenge.
type LivenessChallenge struct {
	Height   uint64 `json:"height"`   // block that issued it
	Deadline uint64 `json:"deadline"` // last block in which the answer counts
	Seed     Hash   `json:"seed"`
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
	Jobs             uint64             `json:"jobs"`   // jobs assigned and not finished
	// Verification record (verify.go): results a replica confirmed,
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
	return p.Online && p.Stake >= p.RequiredStake(params)
}

const ppm = 1_000_000

// Reputation moves: a new provider starts at half; each answered challenge
// closes 2% of the gap to 1, each miss takes away a fifth.
const (
	initialReputation = ppm / 2
	reputationGainDiv = 50
	reputationLossDiv = 5
)

var (
	prefixProvider = []byte("prov/")
	keyOnlineCount = []byte("online/count")
	prefixOnline   = []byte("online/i/")
	keyStaked      = []byte("chain/staked")
)

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
	rebindGPUs(o, old, p)
	o.Set(providerKey(p.Address), encodeRecord(p))
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

func prefixEnd(p []byte) []byte {
	end := slices.Clone(p)
	end[len(end)-1]++
	return end
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
	return nil
}

// Messages.

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

// MsgLivenessProof answers the sender's open liveness challenge.
type MsgLivenessProof struct {
	Height uint64 `json:"height"` // the challenge's height
	Proof  Hash   `json:"proof"`  // LivenessProof(seed, sender)
}

// Type implements Msg.
func (*MsgRegisterProvider) Type() MsgType { return MsgTypeRegisterProvider }

// Type implements Msg.
func (*MsgUpdateProvider) Type() MsgType { return MsgTypeUpdateProvider }

// Type implements Msg.
func (*MsgSetProviderStatus) Type() MsgType { return MsgTypeSetProviderStatus }

// Type implements Msg.
func (*MsgLivenessProof) Type() MsgType { return MsgTypeLivenessProof }

// ValidateBasic implements Msg.
func (m *MsgRegisterProvider) ValidateBasic() error { return m.ProviderInfo.Validate() }

// ValidateBasic implements Msg.
func (m *MsgUpdateProvider) ValidateBasic() error { return m.ProviderInfo.Validate() }

// ValidateBasic implements Msg.
func (m *MsgSetProviderStatus) ValidateBasic() error { return nil }

// ValidateBasic implements Msg.
func (m *MsgLivenessProof) ValidateBasic() error {
	if m.Height == 0 {
		return fmt.Errorf("liveness proof for height 0: %w", ErrInvalidMsg)
	}
	return nil
}

// Executors the ledger knows.
var knownExecutors = []string{"oci", "wasm"}

var (
	classRE       = regexp.MustCompile(`^[A-Z0-9][A-Z0-9_]{0,31}$`)
	regionRE      = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
	computeCapRE  = regexp.MustCompile(`^[0-9]{1,2}\.[0-9]{1,2}$`)
	maxGPUs       = 64
	maxCPUCores   = uint64(4096)
	maxRAM        = uint64(64) << 40 // 64 TiB
	maxDisk       = uint64(1) << 50  // 1 PiB
	maxVRAM       = uint64(1) << 40  // 1 TiB per GPU
	maxMaxJobs    = uint64(1024)
	maxPriceHour  = uint64(1_000_000_000_000) // 1M SYNC per unit-hour
	maxTextLength = 128
)

func invalid(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, ErrInvalidMsg)...)
}

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
		if !classRE.MatchString(g.Class) {
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
		if g.ComputeCap != "" && !computeCapRE.MatchString(g.ComputeCap) {
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
	if !regionRE.MatchString(pi.Region) {
		return invalid("region %q: want 1-32 lower-case letters, digits and -, e.g. eu or us-east", pi.Region)
	}
	if len(pi.Executors) == 0 {
		return invalid("executors is empty; want some of %v", knownExecutors)
	}
	if pi.Network && !slices.Contains(pi.Executors, "oci") {
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

// LivenessProof is the answer to a liveness challenge with seed for addr.
func LivenessProof(seed Hash, addr address.Address) Hash {
	h := sha256.New()
	h.Write([]byte("gpunet/liveness/v1\x00"))
	h.Write(seed[:])
	h.Write(addr[:])
	var out Hash
	h.Sum(out[:0])
	return out
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

func execUpdateProvider(o *Overlay, from address.Address, m *MsgUpdateProvider, info BlockInfo) ([]Event, error) {
	p, err := mustProvider(o, from)
	if err != nil {
		return nil, err
	}
	if p.Online {
		if err := checkGPUsFree(o, from, m.Inventory.GPUs); err != nil {
			return nil, err
		}
	}
	p.redeclare(m.ProviderInfo)
	p.UpdatedHeight = uint64(info.Height)
	setProvider(o, p)
	return []Event{{Type: "provider_updated", Attrs: []Attr{{"provider", from.String()}}}}, nil
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
