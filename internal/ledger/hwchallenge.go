package ledger

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/challenge"
)

// Hardware challenges (Proof of Sync, DESIGN.md section 5; the protocol
// and its security argument are in internal/challenge). At the end of a
// block the chain draws online providers and, for each, one of its devices
// with a claim (the CPU's measured figure, or a GPU's own), and gives it a
// seed and a GEMM sized for that device's claim. The provider runs it on
// that device and commits the Merkle root of the product
// (MsgChallengeCommit); the seed of the next block chooses the entries it
// must open; it opens them with proofs within params.hw_open_millis of
// that block (MsgChallengeOpen), and every validator checks them at about
// a thousandth of the work.
//
// Slashing is only for objective evidence of a lie (DESIGN.md section 5);
// being slow is not one. The rulings (docs/challenge.md, "Rulings"):
//
//   - passed: a correct opening of a commit made by the deadline. The
//     device's claim is proven.
//   - late: a correct opening of a commit made after the deadline but
//     within params.hw_late_factor times its span. Not slashed: the
//     throughput the commit shows replaces the device's claim in offers
//     and scheduling, reputation falls a little, and the device is checked
//     again after params.hw_recheck_permille of its gap. A late ruling
//     that shows less than 1/params.hw_overclaim_factor of the claim is a
//     strike; two strikes in a row on one device are slashed (a claim shown
//     twice to be far above what the device does).
//   - missed: no commit in the late window, or no opening in time. A
//     liveness failure: reputation falls, the device counts 0 until a
//     challenge proves some, it is checked again soon; params.hw_miss_limit
//     misses in a row are slashed.
//   - failed: a wrong opening (slashed at once), or the repeats above.
//   - busy: no commit in the late window on a GPU while its provider ran
//     GPU work (a started job that asked for GPUs and has not committed,
//     or a replica of a service that asked for GPUs): the work's memory
//     may leave the prover none for longer than the window. Not a miss:
//     nothing is slashed or lost, but a claim no challenge has proven no
//     longer counts, nor does the device after params.hw_miss_limit busy
//     rulings in a row; the device is checked again as soon as the work
//     ends, and at least once per gap while it lasts (busyChallenge).
//
// A ruling is about one device: it leaves the provider's other devices as
// they were. A provider is challenged at most once per the drawn device's
// plan.MinGapMillis (a late or missed device: the recheck share of it),
// which keeps an honest provider's load (and so each of its devices')
// within 60 s an hour.

// HardwareChallenge is a provider's open hardware challenge.
type HardwareChallenge struct {
	Seed     Hash   `json:"seed"`
	Height   uint64 `json:"height"`    // block that issued it
	IssuedAt int64  `json:"issued_at"` // that block's time, unix ms
	// Device is the device to run it on, as declared when it was issued:
	// 0 is the CPU (the claim is measured.int8_gops), i ≥ 1 is
	// inventory.gpus[i-1] (the claim is that GPU's int8_gops).
	Device uint64 `json:"device"`
	// DeviceUUID is that GPU's UUID (empty for the CPU, or for a GPU
	// declared without one). The ruling goes to the GPU with this UUID even
	// if a re-declaration moved it.
	DeviceUUID  string `json:"device_uuid,omitempty"`
	N           uint64 `json:"n"`
	K           uint64 `json:"k"`
	M           uint64 `json:"m"`
	ClaimedGOPS uint64 `json:"claimed_gops"`
	Openings    uint64 `json:"openings"` // entries the provider will open
	Deadline    int64  `json:"deadline"` // unix ms by which the commit must be in a block to pass
	// LateBy is the last block time (unix ms) a commit is taken at: after
	// Deadline it is late (measured, not slashed), after LateBy the
	// challenge is missed. 0 in a challenge issued before late rulings
	// existed: Deadline is then the end.
	LateBy int64 `json:"late_by,omitempty" rec:"since=5"`
	// Filled by MsgChallengeCommit, then by the next block.
	Root         *Hash  `json:"root,omitempty"`
	CommittedAt  int64  `json:"committed_at,omitempty"` // unix ms
	CommitHeight uint64 `json:"commit_height,omitempty"`
	Randomness   *Hash  `json:"randomness,omitempty"`
	OpenBy       int64  `json:"open_by,omitempty"` // unix ms: the last block time an opening counts at
}

func (c *HardwareChallenge) size() challenge.Size {
	return challenge.Size{N: int(c.N), K: int(c.K), M: int(c.M)}
}

// Challenge is the computation the provider must do.
func (c *HardwareChallenge) Challenge() challenge.Challenge {
	return challenge.Challenge{Seed: c.Seed, Size: c.size(), Openings: int(c.Openings)}
}

// ChallengeRecord is a provider's history of hardware challenges.
type ChallengeRecord struct {
	Passed uint64 `json:"passed"`
	Failed uint64 `json:"failed"`
	// LastAt is when the latest challenge was issued (unix ms), on any
	// device; CPULastAt when the latest on the CPU was (each GPU's is in
	// its DeviceProof). The minimum gap between challenges is per device.
	// A recheck counts at the end of the gap it came early in (slotFor),
	// which may be later than when it was issued.
	LastAt    int64 `json:"last_at,omitempty"`
	CPULastAt int64 `json:"cpu_last_at,omitempty"`
	// Proven says a ruling caps the CPU's throughput (device 0);
	// ProvenGOPS is that cap: the claim if a challenge passed, what a late
	// commit showed, 0 if nothing was shown, or what the device counted
	// before a re-declaration after a failure (see redeclare).
	Proven     bool   `json:"proven"`
	ProvenGOPS uint64 `json:"proven_gops"`
	// GPUs are the same for each GPU: GPUs[i] is about inventory.gpus[i]
	// (device i+1). The list is empty while no GPU has been challenged,
	// and has one entry per declared GPU otherwise.
	GPUs []DeviceProof `json:"gpus,omitempty"`
	// LastFailure is the sentence records of version 5 and earlier kept
	// for the latest failure; the ledger writes LastFail instead, and the
	// API serves the sentence internal/jobtext renders of it here.
	LastFailure string `json:"last_failure,omitempty"`
	// Late counts correct proofs committed after the deadline (they
	// measured the device), Missed the challenges with no commit in the
	// late window or no opening in time; neither is Failed, which counts
	// the slashed rulings only. MissesInARow is the current run of misses
	// (any device): params.hw_miss_limit of them are slashed.
	Late         uint64 `json:"late,omitempty" rec:"since=5"`
	Missed       uint64 `json:"missed,omitempty" rec:"since=5"`
	MissesInARow uint64 `json:"misses_in_a_row,omitempty" rec:"since=5"`
	// CPUStrikes and CPURecheck are the CPU's DeviceProof.Strikes and
	// Recheck (each GPU's are in its DeviceProof).
	CPUStrikes uint64 `json:"cpu_strikes,omitempty" rec:"since=5"`
	CPURecheck bool   `json:"cpu_recheck,omitempty" rec:"since=5"`
	// LastFail says why the latest failed ruling failed, and on which
	// device: data, which internal/jobtext renders (a sentence in a record
	// would make a reworded message a fork).
	LastFail *ChallengeFailure `json:"last_fail,omitempty" rec:"since=6"`
	// Busy counts the GPU challenges ruled busy (busyChallenge): no commit
	// while the provider ran GPU work. They are not Missed, and do not
	// count in MissesInARow or the pass rate.
	Busy uint64 `json:"busy,omitempty" rec:"since=7"`
}

// Codes of a ChallengeFailure.
const (
	ChallengeWrongOpening = "wrong_opening" // Cause: which check the opening failed
	ChallengeOverclaim    = "overclaim"     // a second late proof in a row under 1/Factor of the claim
	ChallengeMissLimit    = "miss_limit"    // Misses challenges missed in a row; Cause: the last miss
)

// Causes of a ChallengeFailure: which check a wrong opening failed
// (challenge.ErrLeaf, ErrProof, ErrEntry; other for any other), or how
// the last of the misses missed.
const (
	ChallengeCauseLeaf      = "leaf"       // an opened leaf is not the selected one
	ChallengeCauseProof     = "proof"      // a Merkle proof does not lead to the committed root
	ChallengeCauseEntry     = "entry"      // an opened entry is not the product A·B
	ChallengeCauseOther     = "other"      // another verification error
	ChallengeCauseNoCommit  = "no_commit"  // no commit within the late window
	ChallengeCauseNoOpening = "no_opening" // committed, no opening in time
)

// ChallengeFailure is why a hardware challenge was ruled failed. Which
// numbers a code uses is in its comment; the others are zero.
type ChallengeFailure struct {
	Code string `json:"code"`
	// Device is the challenged device (0 the CPU, i gpus[i-1]);
	// DeviceUUID is what the provider declared for it.
	Device     uint64 `json:"device"`
	DeviceUUID string `json:"device_uuid,omitempty"`
	Cause      string `json:"cause,omitempty"`
	// ElapsedMillis is when the late commit came, DeadlineMillis the
	// deadline and CommitByMillis the end of the late window, each from
	// the challenge's issue; ShownGOPS what the late proof showed,
	// ClaimedGOPS the claim; Factor params.hw_overclaim_factor; Misses
	// the misses in a row.
	ElapsedMillis  uint64 `json:"elapsed_ms,omitempty"`
	DeadlineMillis uint64 `json:"deadline_ms,omitempty"`
	CommitByMillis uint64 `json:"commit_by_ms,omitempty"`
	ShownGOPS      uint64 `json:"shown_gops,omitempty"`
	ClaimedGOPS    uint64 `json:"claimed_gops,omitempty"`
	Factor         uint64 `json:"factor,omitempty"`
	Misses         uint64 `json:"misses,omitempty"`
}

// openingCause is the cause code of a wrong opening's error.
func openingCause(err error) string {
	switch {
	case errors.Is(err, challenge.ErrLeaf):
		return ChallengeCauseLeaf
	case errors.Is(err, challenge.ErrProof):
		return ChallengeCauseProof
	case errors.Is(err, challenge.ErrEntry):
		return ChallengeCauseEntry
	}
	return ChallengeCauseOther
}

// DeviceProof is the ruling on one GPU's throughput (see ChallengeRecord),
// and when it was last challenged.
type DeviceProof struct {
	Proven     bool   `json:"proven"`
	ProvenGOPS uint64 `json:"proven_gops"`
	LastAt     int64  `json:"last_at,omitempty"`
	// Strikes is the current run of late rulings that showed less than
	// 1/params.hw_overclaim_factor of the claim; two are slashed.
	Strikes uint64 `json:"strikes,omitempty" rec:"since=5"`
	// Recheck says the latest ruling was late, missed or busy: the device
	// is challenged again after params.hw_recheck_permille of its gap.
	Recheck bool `json:"recheck,omitempty" rec:"since=5"`
	// Busy is the current run of busy rulings on the device (a GPU):
	// while its provider runs GPU work it waits its whole gap, not the
	// recheck's share of it, and the params.hw_miss_limit-th counts it 0.
	Busy uint64 `json:"busy,omitempty" rec:"since=7"`
}

// Devices is the number of devices a hardware challenge can be for: the
// CPU (device 0) and each GPU (device i is inventory.gpus[i-1]).
func (p *Provider) Devices() uint64 { return 1 + uint64(len(p.Inventory.GPUs)) }

// DeviceClaim is device d's declared int8 throughput (0 for no such
// device).
func (p *Provider) DeviceClaim(d uint64) uint64 {
	switch {
	case d == 0:
		return p.Measured.Int8GOPS
	case d <= uint64(len(p.Inventory.GPUs)):
		return p.Inventory.GPUs[d-1].Int8GOPS
	}
	return 0
}

// DeviceRuling is the ruling on device d (none: Proven is false).
func (p *Provider) DeviceRuling(d uint64) DeviceProof {
	switch {
	case d == 0:
		c := &p.Challenges
		return DeviceProof{Proven: c.Proven, ProvenGOPS: c.ProvenGOPS, LastAt: c.CPULastAt, Strikes: c.CPUStrikes, Recheck: c.CPURecheck}
	case d <= uint64(len(p.Challenges.GPUs)):
		return p.Challenges.GPUs[d-1]
	}
	return DeviceProof{}
}

// DeviceGOPS is device d's throughput as the ledger counts it: its claim,
// capped by its ruling if it has one.
func (p *Provider) DeviceGOPS(d uint64) uint64 {
	claim := p.DeviceClaim(d)
	if pr := p.DeviceRuling(d); pr.Proven {
		return min(claim, pr.ProvenGOPS)
	}
	return claim
}

// EffectiveGOPS is the int8 throughput the scheduler and offers use: the
// sum over the provider's devices of DeviceGOPS, each device's declared
// figure capped by what challenges have proven for it. (Validation bounds
// every claim, so the sum cannot overflow.)
func (p *Provider) EffectiveGOPS() uint64 {
	var total uint64
	for d := range p.Devices() {
		total += p.DeviceGOPS(d)
	}
	return total
}

// setDeviceProof records a ruling on device d (pr's LastAt is ignored:
// the device keeps its own).
func (p *Provider) setDeviceProof(d uint64, pr DeviceProof) {
	if d == 0 {
		c := &p.Challenges
		c.Proven, c.ProvenGOPS, c.CPUStrikes, c.CPURecheck = pr.Proven, pr.ProvenGOPS, pr.Strikes, pr.Recheck
		return
	}
	pr.LastAt = p.gpuRecords()[d-1].LastAt
	p.Challenges.GPUs[d-1] = pr
}

// gpuRecords returns Challenges.GPUs, one entry per declared GPU.
func (p *Provider) gpuRecords() []DeviceProof {
	if n := len(p.Inventory.GPUs); len(p.Challenges.GPUs) != n {
		g := make([]DeviceProof, n)
		copy(g, p.Challenges.GPUs)
		p.Challenges.GPUs = g
	}
	return p.Challenges.GPUs
}

// deviceLastAt is when device d was last challenged (0: never).
func (p *Provider) deviceLastAt(d uint64) int64 {
	switch {
	case d == 0:
		return p.Challenges.CPULastAt
	case d <= uint64(len(p.Challenges.GPUs)):
		return p.Challenges.GPUs[d-1].LastAt
	}
	return 0
}

// slotFor is the time a challenge of device d issued at now counts at for
// the gap: now, or, for a recheck (which comes early, after
// hw_recheck_permille of the gap), the end of the gap it borrows from, so
// that the next challenge waits a whole gap after that. A device checked
// again and again (late every time) is still challenged once per gap in
// the long run, and spends at most 60 s an hour on challenges like any
// other.
func (p *Provider) slotFor(d uint64, now int64, plan challenge.Plan) int64 {
	last := p.deviceLastAt(d)
	if !p.DeviceRuling(d).Recheck || last == 0 {
		return now
	}
	return max(now, last+int64(plan.MinGapMillis))
}

// challenged records that device d was challenged, counting at slot.
func (p *Provider) challenged(d uint64, slot int64) {
	p.Challenges.LastAt = slot
	if d == 0 {
		p.Challenges.CPULastAt = slot
		return
	}
	p.gpuRecords()[d-1].LastAt = slot
}

// challengeable lists the devices a challenge may be for at now: those
// with a claim whose own last challenge is at least their plan's minimum
// gap ago, so that each device spends at most 60 s an hour on challenges
// (devices are independent: the CPU prover does not load the GPUs, nor one
// GPU's another's). A device whose latest ruling was late or missed waits
// only params.hw_recheck_permille of the gap: a slow proof is measured
// again soon, so a busy moment does not stand for long. Of those, the ones
// no challenge has ruled on yet (a new provider's, a re-declared GPU's)
// come alone, so that a claim does not count unproven for long.
//
// A GPU whose latest ruling was busy waits its whole gap while runsGPUWork
// reports that the provider still runs GPU work, and only the recheck's
// share once the work has ended: it is checked again soon after the work
// ends, and at least once per gap while it lasts. runsGPUWork is called
// only for such a device.
func (p *Provider) challengeable(now int64, params Params, runsGPUWork func() (bool, error)) ([]uint64, error) {
	var ready, unproven []uint64
	for _, d := range p.claimedDevices() {
		plan, err := challenge.NewPlan(p.DeviceClaim(d), params.HWParams())
		if err != nil {
			return nil, fmt.Errorf("challenge plan for %s device %d: %w: %w", p.Address, d, err, ErrInternal)
		}
		r := p.DeviceRuling(d)
		gap := plan.MinGapMillis
		if r.Recheck {
			gap = mulDiv(gap, params.HWRecheckPermille, 1000)
		}
		last := p.deviceLastAt(d)
		if last != 0 && now-last < int64(gap) {
			continue
		}
		if r.Busy > 0 && last != 0 && now-last < int64(plan.MinGapMillis) {
			busy, err := runsGPUWork()
			if err != nil {
				return nil, err
			}
			if busy {
				continue
			}
		}
		ready = append(ready, d)
		if !r.Proven {
			unproven = append(unproven, d)
		}
	}
	if len(unproven) > 0 {
		return unproven, nil
	}
	return ready, nil
}

// sameGPU finds the GPU of old that is g, declared at position j of a new
// declaration: the one with g's UUID, or, when g has none, the GPU at the
// same position if it had none either; the class must match too.
func sameGPU(old []GPUSpec, j int, g GPUSpec) (int, bool) {
	if g.UUID != "" {
		u := foldASCII(g.UUID)
		for i, o := range old {
			if o.UUID != "" && foldASCII(o.UUID) == u {
				return i, o.Class == g.Class
			}
		}
		return 0, false
	}
	if j < len(old) && old[j].UUID == "" && old[j].Class == g.Class {
		return j, true
	}
	return 0, false
}

// redeclare replaces p's declaration with ni (MsgUpdateProvider) and
// carries the rulings over, device by device:
//
//   - a device declared as before (the same GPU by sameGPU, or the CPU)
//     with the same claim keeps its ruling, or its lack of one;
//   - otherwise, for a provider that has never failed a hardware challenge
//     and has none open, the device has no ruling: it counts at its claim
//     until a challenge rules, as at registration;
//   - a provider that has failed one, been late, missed or busy on one,
//     or has one open, gets no new faith: a
//     changed device is capped at what it counted before (a failed figure
//     stays until a challenge on the device passes) and a new device, or
//     one whose identity changed, starts at 0 until a challenge proves it.
//     So re-declaring (or dropping a GPU and adding it back under a new
//     UUID) cannot lift a failed or pending ruling.
func (p *Provider) redeclare(ni ProviderInfo) {
	c := &p.Challenges
	strict := c.Failed > 0 || c.Late > 0 || c.Missed > 0 || c.Busy > 0 || p.HWChallenge != nil
	carry := func(oldD uint64, matched bool, claim uint64) DeviceProof {
		switch {
		case matched && claim == p.DeviceClaim(oldD):
			return p.DeviceRuling(oldD)
		case !strict:
			return DeviceProof{}
		case !matched:
			return DeviceProof{Proven: true}
		case !p.DeviceRuling(oldD).Proven && claim <= p.DeviceClaim(oldD):
			return DeviceProof{} // counts less than before: nothing to cap
		}
		// Strikes stay with the device: re-declaring does not wipe them.
		return DeviceProof{Proven: true, ProvenGOPS: p.DeviceGOPS(oldD), Strikes: p.DeviceRuling(oldD).Strikes}
	}
	cpu := carry(0, true, ni.Measured.Int8GOPS)
	var gpus []DeviceProof
	for j, g := range ni.Inventory.GPUs {
		i, ok := sameGPU(p.Inventory.GPUs, j, g)
		if pr := carry(uint64(i)+1, ok, g.Int8GOPS); pr.Proven {
			if gpus == nil {
				gpus = make([]DeviceProof, len(ni.Inventory.GPUs))
			}
			gpus[j] = pr
		}
	}
	p.ProviderInfo = ni
	c.Proven, c.ProvenGOPS, c.CPUStrikes, c.CPURecheck = cpu.Proven, cpu.ProvenGOPS, cpu.Strikes, cpu.Recheck
	c.GPUs = gpus
}

// claimedDevices lists p's devices with a non-zero claim, in order.
func (p *Provider) claimedDevices() []uint64 {
	var out []uint64
	for d := range p.Devices() {
		if p.DeviceClaim(d) > 0 {
			out = append(out, d)
		}
	}
	return out
}

// challengedDevice finds the device c is about in p's declaration now,
// which a re-declaration may have changed since c was issued; ok is false
// if the GPU is no longer declared.
func (p *Provider) challengedDevice(c *HardwareChallenge) (d uint64, ok bool) {
	switch {
	case c.Device == 0:
		return 0, true
	case c.DeviceUUID != "":
		u := foldASCII(c.DeviceUUID)
		for i, g := range p.Inventory.GPUs {
			if foldASCII(g.UUID) == u {
				return uint64(i) + 1, true
			}
		}
		return 0, false
	case c.Device <= uint64(len(p.Inventory.GPUs)) && p.Inventory.GPUs[c.Device-1].UUID == "":
		return c.Device, true
	}
	return 0, false
}

// deviceAttrs are the event attributes that say which device c is for.
func (c *HardwareChallenge) deviceAttrs() []Attr {
	a := []Attr{{"device", strconv.FormatUint(c.Device, 10)}}
	if c.DeviceUUID != "" {
		a = append(a, Attr{"device_uuid", c.DeviceUUID})
	}
	return a
}

// ChallengePassRatePPM is the share of ruled challenges passed in time,
// in ppm (1,000,000 before the first): late and missed ones count against
// it as failed ones do, though only failed ones were slashed.
func (p *Provider) ChallengePassRatePPM() uint64 {
	c := &p.Challenges
	n := c.Passed + c.Late + c.Missed + c.Failed
	if n == 0 {
		return ppm
	}
	return c.Passed * ppm / n
}

// HWParams are the challenge protocol's parameters in p.
func (p Params) HWParams() challenge.Params {
	return challenge.Params{
		TargetMillis:    p.HWTargetMillis,
		SlackPermille:   p.HWSlackPermille,
		AllowanceMillis: p.HWAllowanceMillis,
		Openings:        int(p.HWOpenings),
	}
}

func hwOpenKey(a address.Address) []byte { return append(slices.Clone(prefixHWOpen), a[:]...) }

// MsgChallengeCommit commits a provider to the product of its challenge.
type MsgChallengeCommit struct {
	Root Hash `json:"root"`
}

// MsgChallengeOpen opens the entries the chain chose (a challenge.Opening
// in its binary encoding).
type MsgChallengeOpen struct {
	Opening []byte `json:"opening"`
}

// Type implements Msg.
func (*MsgChallengeCommit) Type() MsgType { return MsgTypeChallengeCommit }

// Type implements Msg.
func (*MsgChallengeOpen) Type() MsgType { return MsgTypeChallengeOpen }

// ValidateBasic implements Msg.
func (m *MsgChallengeCommit) ValidateBasic() error { return nil }

// ValidateBasic implements Msg.
func (m *MsgChallengeOpen) ValidateBasic() error {
	if len(m.Opening) == 0 || len(m.Opening) > challenge.MaxOpeningBytes {
		return invalid("opening: want 1 to %d bytes, got %d", challenge.MaxOpeningBytes, len(m.Opening))
	}
	if _, err := challenge.DecodeOpening(m.Opening); err != nil {
		return invalid("opening: %v", err)
	}
	return nil
}

// issueHardwareChallenges draws providers to challenge at the end of a
// block, like liveness challenges: params.hw_rate_ppm of the online
// providers, at most params.hw_max_per_block, skipping those with an open
// challenge, with no claimed throughput, or challenged within the drawn
// device's plan's minimum gap. The device is drawn from the block seed
// among the provider's devices with a claim.
func issueHardwareChallenges(o *Overlay, info BlockInfo, p Params) ([]Event, error) {
	n := OnlineCount(o)
	if n == 0 || p.HWRatePPM == 0 {
		return nil, nil
	}
	want := (n*p.HWRatePPM + ppm - 1) / ppm
	want = max(1, min(want, p.HWMaxPerBlock, n))
	now := info.Time.UnixMilli()
	var events []Event
	issued := uint64(0)
	for d := uint64(0); d < 4*want && issued < want; d++ {
		idx := draw(info.Seed, "hw-challenge", d) % n
		a, err := address.FromBytes(o.Get(onlineKey(idx)))
		if err != nil {
			return nil, fmt.Errorf("online index %d: %w: %w", idx, err, ErrInternal)
		}
		pr, err := mustProvider(o, a)
		if err != nil {
			return nil, err
		}
		if pr.HWChallenge != nil {
			continue
		}
		devices, err := pr.challengeable(now, p, func() (bool, error) {
			w, err := runningGPUWork(o, a) // only for a GPU ruled busy within its gap: rare
			return w.any(), err
		})
		if err != nil {
			return nil, err
		}
		if len(devices) == 0 {
			continue
		}
		dev := devices[draw(info.Seed, "hw-device", d)%uint64(len(devices))]
		claim := pr.DeviceClaim(dev)
		plan, err := challenge.NewPlan(claim, p.HWParams())
		if err != nil {
			return nil, fmt.Errorf("challenge plan for %s device %d: %w: %w", a, dev, err, ErrInternal)
		}
		h := sha256.New()
		h.Write([]byte("gpunet/hw-seed/v1\x00"))
		h.Write(info.Seed[:])
		h.Write(a[:])
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(info.Height)))
		c := &HardwareChallenge{
			Height: uint64(info.Height), IssuedAt: now, Device: dev, ClaimedGOPS: claim, Openings: p.HWOpenings,
			N: uint64(plan.Size.N), K: uint64(plan.Size.K), M: uint64(plan.Size.M),
			Deadline: now + int64(plan.DeadlineMillis),
			LateBy:   now + int64(plan.DeadlineMillis*p.HWLateFactor),
		}
		if dev > 0 {
			c.DeviceUUID = pr.Inventory.GPUs[dev-1].UUID
		}
		h.Sum(c.Seed[:0])
		pr.HWChallenge = c
		pr.challenged(dev, pr.slotFor(dev, now, plan))
		setProvider(o, pr)
		o.Set(hwOpenKey(a), []byte{1})
		issued++
		attrs := append([]Attr{{"provider", a.String()}}, c.deviceAttrs()...)
		events = append(events, Event{Type: "hw_challenge", Attrs: append(attrs,
			Attr{"size", plan.Size.String()}, Attr{"claimed_gops", strconv.FormatUint(claim, 10)},
			Attr{"deadline_ms", strconv.FormatUint(plan.DeadlineMillis, 10)},
			Attr{"late_by_ms", strconv.FormatInt(c.LateBy-now, 10)},
		)})
	}
	return events, nil
}

// commitBy is the last block time a commit of c is taken at.
func (c *HardwareChallenge) commitBy() int64 {
	if c.LateBy == 0 {
		return c.Deadline
	}
	return c.LateBy
}

// advanceHardwareChallenges runs at the end of each block over the open
// challenges: it gives the randomness of this block to those committed in
// an earlier one, and rules missed those with no commit in the late window
// or no opening in time.
func advanceHardwareChallenges(o *Overlay, info BlockInfo, p Params) ([]Event, error) {
	var open []address.Address
	o.Iterate(prefixHWOpen, prefixEnd(prefixHWOpen), func(k, _ []byte) bool {
		var a address.Address
		copy(a[:], k[len(prefixHWOpen):])
		open = append(open, a)
		return true
	})
	h := uint64(info.Height)
	now := info.Time.UnixMilli()
	var events []Event
	for _, a := range open {
		pr, err := mustProvider(o, a)
		if err != nil {
			return nil, err
		}
		c := pr.HWChallenge
		switch {
		case c == nil:
			o.Delete(hwOpenKey(a))
		case c.Root == nil && now > c.commitBy():
			evs, err := missChallenge(o, pr, ChallengeCauseNoCommit, p, info)
			if err != nil {
				return nil, err
			}
			events = append(events, evs...)
		case c.Root != nil && c.Randomness == nil && c.CommitHeight < h:
			// The entries to open come from a block after the commit's.
			r := info.Seed
			c.Randomness = &r
			c.OpenBy = now + int64(p.HWOpenMillis)
			setProvider(o, pr)
			attrs := append([]Attr{{"provider", a.String()}}, c.deviceAttrs()...)
			events = append(events, Event{Type: "hw_challenge_open", Attrs: append(attrs, Attr{"open_by_ms", strconv.FormatInt(c.OpenBy, 10)})})
		case c.Randomness != nil && now > c.OpenBy:
			evs, err := missChallenge(o, pr, ChallengeCauseNoOpening, p, info)
			if err != nil {
				return nil, err
			}
			events = append(events, evs...)
		}
	}
	return events, nil
}

func execChallengeCommit(o *Overlay, from address.Address, m *MsgChallengeCommit, info BlockInfo) ([]Event, error) {
	pr, err := mustProvider(o, from)
	if err != nil {
		return nil, err
	}
	c := pr.HWChallenge
	if c == nil || c.Root != nil {
		return nil, fmt.Errorf("%s has no hardware challenge waiting for a commit: %w", from, ErrNoChallenge)
	}
	if t := info.Time.UnixMilli(); t > c.commitBy() {
		return nil, fmt.Errorf("%s's hardware challenge took commits until %d ms after it was issued, this block is %d ms after: %w", from, c.commitBy()-c.IssuedAt, t-c.IssuedAt, ErrNoChallenge)
	}
	root := m.Root
	c.Root = &root
	c.CommittedAt = info.Time.UnixMilli()
	c.CommitHeight = uint64(info.Height)
	setProvider(o, pr)
	late := ""
	if c.CommittedAt > c.Deadline {
		late = " (late)"
	}
	attrs := append([]Attr{{"provider", from.String()}}, c.deviceAttrs()...)
	return []Event{{Type: "hw_challenge_commit", Attrs: append(attrs, Attr{"elapsed_ms", strconv.FormatInt(c.CommittedAt-c.IssuedAt, 10) + late})}}, nil
}

func execChallengeOpen(o *Overlay, from address.Address, m *MsgChallengeOpen, p Params, info BlockInfo) ([]Event, error) {
	pr, err := mustProvider(o, from)
	if err != nil {
		return nil, err
	}
	c := pr.HWChallenge
	if c == nil || c.Randomness == nil {
		return nil, fmt.Errorf("%s has no hardware challenge waiting for an opening: %w", from, ErrNoChallenge)
	}
	op, err := challenge.DecodeOpening(m.Opening)
	if err != nil {
		return nil, fmt.Errorf("opening: %v: %w", err, ErrInvalidMsg)
	}
	if err := c.Challenge().Verify(*c.Root, *c.Randomness, op); err != nil {
		if errors.Is(err, challenge.ErrEncoding) || errors.Is(err, challenge.ErrCount) {
			// Malformed, not wrong: refuse it, the provider may send a
			// proper one within the window.
			return nil, fmt.Errorf("opening: %v: %w", err, ErrInvalidMsg)
		}
		if d, ok := pr.challengedDevice(c); ok {
			pr.setDeviceProof(d, DeviceProof{Proven: true})
		}
		return failChallenge(o, pr, ChallengeFailure{Code: ChallengeWrongOpening, Cause: openingCause(err)}, p, info)
	}
	elapsed := uint64(max(c.CommittedAt-c.IssuedAt, 1))
	if c.CommittedAt > c.Deadline {
		return lateChallenge(o, pr, challenge.MeasuredGOPS(c.size(), elapsed), elapsed, p, info)
	}
	pr.Challenges.Passed++
	pr.Challenges.MissesInARow = 0
	if d, ok := pr.challengedDevice(c); ok {
		pr.setDeviceProof(d, DeviceProof{Proven: true, ProvenGOPS: c.ClaimedGOPS})
	}
	pr.raiseReputation()
	endChallenge(o, pr)
	attrs := append([]Attr{{"provider", from.String()}}, c.deviceAttrs()...)
	return []Event{{Type: "hw_challenge_passed", Attrs: append(attrs, Attr{"elapsed_ms", strconv.FormatUint(elapsed, 10)})}}, nil
}

// endChallenge closes pr's open challenge and stores pr.
func endChallenge(o *Overlay, pr *Provider) {
	pr.HWChallenge = nil
	setProvider(o, pr)
	o.Delete(hwOpenKey(pr.Address))
}

// lateChallenge rules on a correct proof committed after the deadline,
// elapsedMillis after the challenge: it measured the device at shownGOPS,
// which replaces the claim; reputation falls by a twentieth. It is a
// strike when the claim is more than params.hw_overclaim_factor times what
// it showed; the second strike in a row is slashed.
func lateChallenge(o *Overlay, pr *Provider, shownGOPS, elapsedMillis uint64, p Params, info BlockInfo) ([]Event, error) {
	c := pr.HWChallenge
	pr.Challenges.Late++
	pr.Challenges.MissesInARow = 0
	ruling := DeviceProof{Proven: true, ProvenGOPS: shownGOPS, Recheck: true}
	d, ok := pr.challengedDevice(c)
	far := shownGOPS < c.ClaimedGOPS/p.HWOverclaimFactor
	if far && ok {
		ruling.Strikes = pr.DeviceRuling(d).Strikes + 1
	}
	if ruling.Strikes >= 2 {
		ruling.Strikes = 0
		if ok {
			pr.setDeviceProof(d, ruling)
		}
		return failChallenge(o, pr, ChallengeFailure{Code: ChallengeOverclaim, ElapsedMillis: elapsedMillis, DeadlineMillis: uint64(c.Deadline - c.IssuedAt),
			ShownGOPS: shownGOPS, ClaimedGOPS: c.ClaimedGOPS, Factor: p.HWOverclaimFactor}, p, info)
	}
	if ok {
		pr.setDeviceProof(d, ruling)
	}
	pr.Reputation -= pr.Reputation / reputationSlowDiv
	endChallenge(o, pr)
	attrs := append([]Attr{{"provider", pr.Address.String()}}, c.deviceAttrs()...)
	return []Event{{Type: "hw_challenge_late", Attrs: append(attrs,
		Attr{"elapsed_ms", strconv.FormatUint(elapsedMillis, 10)}, Attr{"deadline_ms", strconv.FormatInt(c.Deadline-c.IssuedAt, 10)},
		Attr{"shown_gops", strconv.FormatUint(shownGOPS, 10)}, Attr{"claimed_gops", strconv.FormatUint(c.ClaimedGOPS, 10)},
		Attr{"strikes", strconv.FormatUint(ruling.Strikes, 10)},
	)}}, nil
}

// missChallenge rules on a challenge with no commit in the late window or
// no opening in time: a liveness failure, not evidence of a lie. The
// device counts 0 until a challenge proves some and is checked again
// soon; reputation falls by a fifth, as for a missed liveness challenge.
// The params.hw_miss_limit-th miss in a row is slashed.
func missChallenge(o *Overlay, pr *Provider, cause string, p Params, info BlockInfo) ([]Event, error) {
	c := pr.HWChallenge
	if c.Device > 0 && cause == ChallengeCauseNoCommit {
		w, err := runningGPUWork(o, pr.Address)
		if err != nil {
			return nil, err
		}
		if w.any() {
			return busyChallenge(o, pr, w, p, info.Time.UnixMilli()), nil
		}
	}
	pr.Challenges.Missed++
	pr.Challenges.MissesInARow++
	if d, ok := pr.challengedDevice(c); ok {
		pr.setDeviceProof(d, DeviceProof{Proven: true, Recheck: true, Strikes: pr.DeviceRuling(d).Strikes})
	}
	if n := pr.Challenges.MissesInARow; n >= p.HWMissLimit {
		pr.Challenges.MissesInARow = 0
		return failChallenge(o, pr, ChallengeFailure{Code: ChallengeMissLimit, Cause: cause, Misses: n,
			DeadlineMillis: uint64(c.Deadline - c.IssuedAt), CommitByMillis: uint64(c.commitBy() - c.IssuedAt), ClaimedGOPS: c.ClaimedGOPS}, p, info)
	}
	pr.Reputation -= pr.Reputation / reputationLossDiv
	endChallenge(o, pr)
	attrs := append([]Attr{{"provider", pr.Address.String()}}, c.deviceAttrs()...)
	return []Event{{Type: "hw_challenge_missed", Attrs: append(attrs,
		Attr{"cause", cause},
		Attr{"misses_in_a_row", strconv.FormatUint(pr.Challenges.MissesInARow, 10)},
	)}}, nil
}

// gpuWork is the work a provider runs on its GPUs, as the ledger knows
// it (runningGPUWork).
type gpuWork struct {
	Jobs, Replicas uint64
}

func (w gpuWork) any() bool { return w.Jobs+w.Replicas > 0 }

// runningGPUWork counts what provider a runs on its GPUs now: the job
// assignments it started that asked for GPUs and have not committed (they
// hold a slot: holdsSlot), and its replicas of services that asked for
// GPUs. The ledger does not know which of its GPUs each uses.
func runningGPUWork(kv KV, a address.Address) (gpuWork, error) {
	var w gpuWork
	for _, id := range ActiveJobsOf(kv, a) {
		j, err := mustJob(kv, id)
		if err != nil {
			return w, err
		}
		if as := j.assignment(a); j.Spec.GPUCount > 0 && as != nil && as.StartedAt != 0 && as.holdsSlot() {
			w.Jobs++
		}
	}
	for _, id := range ServicesOfProvider(kv, a) {
		s, err := mustService(kv, id)
		if err != nil {
			return w, err
		}
		if s.Spec.GPUCount > 0 && s.replica(a) >= 0 {
			w.Replicas++
		}
	}
	return w, nil
}

// busyChallenge rules on a GPU challenge with no commit in the late window
// while its provider ran GPU work (w): a job's framework may hold nearly
// all of the GPU's memory, which leaves the prover too little for B and a
// block of rows, for longer than the window (a proof that fits beside the
// job is late instead, and measures the device). Not a miss: reputation,
// the run of misses and the pass rate are as they were, and nothing is
// slashed. The device keeps what a challenge proved, but a claim no
// challenge has proven counts 0 (being busy cannot keep a claim standing),
// and so does the device at the params.hw_miss_limit-th busy ruling in a
// row (being busy cannot keep an old proof standing for ever). Its gap
// counts from now, the ruling, not from the challenge (whose proof never
// ran): it is checked again after the recheck's share of its gap once
// the work has ended, and after its whole gap while the work lasts
// (challengeable).
//
// Being busy takes GPU work placed by the scheduler, which its owner pays
// for (a provider that submits its own job pays at least the protocol fee
// on it, and the job may well go to another provider), and it gains
// nothing that a proof did not show.
func busyChallenge(o *Overlay, pr *Provider, w gpuWork, p Params, now int64) []Event {
	c := pr.HWChallenge
	pr.Challenges.Busy++
	busy := uint64(0)
	if d, ok := pr.challengedDevice(c); ok && d > 0 {
		r := pr.DeviceRuling(d)
		r.Busy++
		r.Recheck = true
		if !r.Proven || r.Busy >= p.HWMissLimit {
			r.Proven, r.ProvenGOPS = true, 0
		}
		pr.setDeviceProof(d, r)
		pr.gpuRecords()[d-1].LastAt = now
		busy = r.Busy
	}
	endChallenge(o, pr)
	attrs := append([]Attr{{"provider", pr.Address.String()}}, c.deviceAttrs()...)
	return []Event{{Type: "hw_challenge_busy", Attrs: append(attrs,
		Attr{"cause", ChallengeCauseNoCommit},
		Attr{"gpu_jobs", strconv.FormatUint(w.Jobs, 10)},
		Attr{"gpu_replicas", strconv.FormatUint(w.Replicas, 10)},
		Attr{"busy_in_a_row", strconv.FormatUint(busy, 10)},
	)}}
}

// failChallenge slashes a provider for a failed hardware challenge (a
// wrong opening, or a late or missed ruling that repeats past its limit)
// and halves its reputation. The challenged device's ruling is what the
// caller recorded; a wrong opening (no earlier ruling set by a caller)
// proves nothing, so the device counts 0.
func failChallenge(o *Overlay, pr *Provider, f ChallengeFailure, p Params, info BlockInfo) ([]Event, error) {
	a := pr.Address
	c := pr.HWChallenge
	f.Device, f.DeviceUUID = c.Device, c.DeviceUUID
	pr.Challenges.Failed++
	pr.Challenges.LastFailure, pr.Challenges.LastFail = "", &f
	pr.Reputation -= pr.Reputation / reputationInvalidDiv
	endChallenge(o, pr)
	amt, err := slashFor(o, a, address.Address{}, p, info, SlashEvent{Code: SlashHardware})
	if err != nil {
		return nil, err
	}
	attrs := append([]Attr{{"provider", a.String()}}, c.deviceAttrs()...)
	return []Event{{Type: "hw_challenge_failed", Attrs: append(attrs,
		Attr{"code", f.Code}, Attr{"cause", f.Cause}, Attr{"slashed", strconv.FormatUint(amt, 10)},
	)}}, nil
}
