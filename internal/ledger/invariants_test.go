package ledger

import (
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
)

// Each invariant of invariants.go on a state where it must hold, then on
// that state with one thing broken: CheckInvariants must refuse it with an
// internal error that names what is wrong. The state is built by real
// blocks (a running job, providers with stake and an unbonding entry, a
// GPU bound to its provider, two validators), so that every invariant has
// something to check.

// invKey is a deterministic account key.
type invKey struct {
	priv ed25519.PrivateKey
	addr address.Address
}

func newInvKey(name string) invKey {
	seed := sha256.Sum256([]byte("ledger/invariants/" + name))
	priv := ed25519.NewKeyFromSeed(seed[:])
	return invKey{priv, address.FromPubKey(priv.Public().(ed25519.PublicKey))}
}

// invChain applies blocks of signed txs to a state in memory.
type invChain struct {
	kv     *MemKV
	height int64
}

func (c *invChain) do(t *testing.T, k invKey, msg Msg) {
	t.Helper()
	acct, err := GetAccount(c.kv, k.addr)
	if err != nil {
		t.Fatal(err)
	}
	tx := &Tx{ChainID: "c", Sequence: acct.Sequence, Msg: msg}
	if err := tx.Sign(k.priv); err != nil {
		t.Fatal(err)
	}
	raw, err := tx.Encode()
	if err != nil {
		t.Fatal(err)
	}
	c.height++
	b := (&Ledger{}).BeginBlock(c.kv, BlockInfo{Height: c.height, Time: time.Unix(1_700_000_000+c.height, 0)})
	if r := b.DeliverTx(raw); r.Err != nil {
		t.Fatalf("block %d, %T: %v", c.height, msg, r.Err)
	}
	changes, _, err := b.End()
	if err != nil {
		t.Fatalf("block %d: %v", c.height, err)
	}
	c.kv.Apply(changes)
	mustHold(t, fmt.Sprintf("after block %d", c.height), c.kv)
}

func invProviderInfo(gpuUUID string, price uint64) ProviderInfo {
	pi := ProviderInfo{
		Inventory:  Inventory{CPUCores: 16, CPUModel: "Test CPU", RAM: 64 << 30, Disk: 500 << 30, OS: "linux", Arch: "amd64"},
		Measured:   Measured{Int8GOPS: 1000, BandwidthMBs: 20000, Device: "cpu"},
		Region:     "eu",
		Executors:  []string{"wasm"},
		WasmEngine: "wasmtime-39.0.1/linux-amd64/cranelift-speed/wasi-gpunet-1",
		MaxJobs:    4,
		Asks:       []Ask{{Class: CPUClass, PricePerHour: Amount(price)}},
	}
	if gpuUUID != "" {
		pi.Inventory.GPUs = []GPUSpec{{Class: "RTX_4090", VRAM: 24 << 30, ComputeCap: "8.9", UUID: gpuUUID}}
		pi.Asks = append(pi.Asks, Ask{Class: "RTX_4090", PricePerHour: Amount(price * 10)})
	}
	key := sha256.Sum256([]byte("enc/" + gpuUUID))
	pi.EncryptionKey, _ = address.EncodeBech32("age", key[:])
	return pi
}

// invariantFixture returns a state with a running job on prov1, prov2
// online with a bound GPU and some of its stake unbonding, and validators
// a and b in the set.
func invariantFixture(t *testing.T) (*MemKV, invKey, invKey) {
	t.Helper()
	owner, prov1, prov2 := newInvKey("owner"), newInvKey("prov1"), newInvKey("prov2")
	g := Genesis{Params: DefaultParams(), Treasury: 1_000_000}
	g.Params.MinFee, g.Params.HWRatePPM, g.Params.LivenessRatePPM = 0, 0, 0
	for _, k := range []invKey{owner, prov1, prov2} {
		g.Accounts = append(g.Accounts, GenesisAccount{Address: k.addr, Balance: 1_000_000_000_000})
	}
	g.Validators = []GenesisValidator{
		genesisValidator("a", address.Address{0x10}, 30*g.Params.PowerUnit),
		genesisValidator("b", address.Address{0x11}, 20*g.Params.PowerUnit),
	}
	c := &invChain{kv: genesisState(t, g)}
	c.do(t, prov1, &MsgRegisterProvider{ProviderInfo: invProviderInfo("", 36_000)})
	c.do(t, prov1, &MsgStake{Amount: 10_000_000})
	c.do(t, prov2, &MsgRegisterProvider{ProviderInfo: invProviderInfo("GPU-0000-test", 72_000)})
	c.do(t, prov2, &MsgStake{Amount: 200_000_000})
	c.do(t, prov2, &MsgUnstake{Amount: 50_000_000})
	key := sha256.Sum256([]byte("age/owner"))
	ageKey, _ := address.EncodeBech32("age", key[:])
	c.do(t, owner, &MsgSubmitJob{ConsumerKey: ageKey, Spec: JobSpec{
		Name: "j", Executor: "wasm", Module: fmt.Sprintf("sha256:%064x", 1), Outputs: []string{"/out"},
		CPUMilli: 1000, Memory: 256 << 20, Disk: 1 << 30, MaxPricePerHour: 100_000, TimeoutSeconds: 600,
		Verification: "none", Deterministic: true,
	}})
	j, _, _ := GetJob(c.kv, 1)
	if j.State != JobAssigned || j.Assignments[0].Provider != prov1.addr {
		t.Fatalf("fixture: job %s on %+v, want assigned to prov1", j.State, j.Assignments)
	}
	c.do(t, owner, &MsgGrantKey{JobID: 1, Grants: []Grant{{Provider: prov1.addr, WrappedKey: []byte("k")}}})
	c.do(t, prov1, &MsgStartJob{JobID: 1})
	if len(GetUnbondings(c.kv, address.Address{})) != 1 || len(activeSet(c.kv)) != 2 || OnlineCount(c.kv) != 2 {
		t.Fatalf("fixture: %d unbondings, set of %d, %d online", len(GetUnbondings(c.kv, address.Address{})), len(activeSet(c.kv)), OnlineCount(c.kv))
	}
	return c.kv, prov1, prov2
}

func TestInvariantsCatchEachCorruption(t *testing.T) {
	kv, prov1, prov2 := invariantFixture(t)
	mustHold(t, "the fixture", kv)

	// Record-only writes: the record changes, its indexes do not.
	editJob := func(o *Overlay, edit func(j *Job)) {
		j, _, err := GetJob(o, 1)
		if err != nil {
			t.Fatal(err)
		}
		edit(j)
		o.Set(jobKey(1), encodeRecord(j))
	}
	editProvider := func(o *Overlay, a address.Address, edit func(p *Provider)) {
		p, _, err := GetProvider(o, a)
		if err != nil {
			t.Fatal(err)
		}
		edit(p)
		o.Set(providerKey(a), encodeRecord(p))
	}
	// reindexProvider changes a provider's record and what derives from it
	// (the scheduler's index), as setProvider does.
	reindexProvider := func(o *Overlay, a address.Address, edit func(p *Provider)) {
		p, _, err := GetProvider(o, a)
		if err != nil {
			t.Fatal(err)
		}
		edit(p)
		setProvider(o, p)
	}
	editParams := func(o *Overlay, edit func(p *Params)) {
		p, err := GetParams(o)
		if err != nil {
			t.Fatal(err)
		}
		edit(&p)
		b, _ := encodeParams(p)
		o.Set(keyParams, b)
	}
	add := func(o *Overlay, key []byte, d uint64) { setUint(o, key, getUint(o, key)+d) }
	ca, cb := consOf("a"), consOf("b")

	for _, tc := range []struct {
		name    string
		corrupt func(o *Overlay)
		want    string
	}{
		// Providers, the scheduler's index, GPUs.
		{"gpu binding missing", func(o *Overlay) { o.Delete(append([]byte("gpu/u/"), "gpu-0000-test"...)) }, `gpu bindings stored, the online providers declare 1`},
		{"gpu binding to another provider", func(o *Overlay) { o.Set(append([]byte("gpu/u/"), "gpu-0000-test"...), prov1.addr[:]) }, `gpu binding "gpu/u/gpu-0000-test" is`},
		{"gpu rulings for other GPUs", func(o *Overlay) {
			editProvider(o, prov2.addr, func(p *Provider) { p.Challenges.GPUs = make([]DeviceProof, 2) })
		}, "has 2 GPU rulings for 1 GPUs"},
		{"online count off", func(o *Overlay) { add(o, keyOnlineCount, 1) }, "online count 3 != online providers 2"},
		{"online index points elsewhere", func(o *Overlay) {
			p, _, _ := GetProvider(o, prov1.addr)
			o.Set(onlineKey(p.OnlineIndex), prov2.addr[:])
		}, "does not point at " + prov1.addr.String()},
		{"stake total off", func(o *Overlay) { add(o, keyStaked, 1) }, "recorded stake 160000001 != sum of provider stakes 160000000"},
		{"slot count off", func(o *Overlay) { reindexProvider(o, prov1.addr, func(p *Provider) { p.Jobs++ }) }, "counts 2 granted jobs and 0 ungranted placements, its assignments and service replicas hold 1 and 0"},
		{"slot not counted", func(o *Overlay) { reindexProvider(o, prov1.addr, func(p *Provider) { p.Jobs = 0 }) }, "counts 0 granted jobs"},
		{"ungranted placement not counted", func(o *Overlay) {
			editJob(o, func(j *Job) { j.Assignments[0].KeyGrant = nil })
		}, "counts 1 granted jobs and 0 ungranted placements, its assignments and service replicas hold 0 and 1"},
		{"ungranted placement where no slot is free", func(o *Overlay) {
			editJob(o, func(j *Job) { j.Assignments[0].KeyGrant = nil })
			reindexProvider(o, prov1.addr, func(p *Provider) { p.Jobs, p.Tentative, p.MaxJobs = 0, 1, 0 })
		}, "carries 1 ungranted placements on 0 free of 0 slots, at most 0"},
		{"ungranted placement not indexed", func(o *Overlay) {
			editJob(o, func(j *Job) { j.Assignments[0].KeyGrant = nil })
			reindexProvider(o, prov1.addr, func(p *Provider) { p.Jobs, p.Tentative = 0, 1 })
		}, "the ungranted placement index has 0 entries, the unfinished jobs 1 ungranted assignments"},
		{"stray ungranted placement entry", func(o *Overlay) { o.Set(tentativeKey(prov1.addr, 5, 1), []byte{1}) }, "names no ungranted assignment of job 1"},

		// Jobs.
		{"queue length off", func(o *Overlay) { add(o, keyQueueLen, 1) }, "queue length 1 != 0 queued jobs"},
		{"assigned twice", func(o *Overlay) {
			editJob(o, func(j *Job) { j.Assignments = append(j.Assignments, j.Assignments[0]); j.Replicas = 2 })
		}, "job 1 assigned twice to " + prov1.addr.String()},
		{"replicas above max_replicas", func(o *Overlay) { editJob(o, func(j *Job) { j.Replicas = 6 }) }, "job 1 has 1 assignments, wants 6 replicas (at most 5)"},
		{"wait code on a running job", func(o *Overlay) { editJob(o, func(j *Job) { j.WaitCode = QuoteNoOffer }) }, "waits for no replica but has wait code"},
		{"escrow below its charges", func(o *Overlay) {
			editJob(o, func(j *Job) { j.Escrow = 5_999 })
		}, "job 1 escrow 5999 < "},
		{"finished job holds escrow", func(o *Overlay) { editJob(o, func(j *Job) { j.State = JobSucceeded }) }, "finished job 1 still holds escrow"},
		{"provider index entry of no job", func(o *Overlay) { o.Set(u64(append([]byte("jobprov/"), prov1.addr[:]...), 9), []byte{1}) }, "names no job"},
		{"escrow total off", func(o *Overlay) { add(o, keyEscrow, 1) }, "recorded escrow"},
		{"job record under another id", func(o *Overlay) { o.Set(jobKey(5), o.Get(jobKey(1))) }, fmt.Sprintf("job record %x unreadable", jobKey(5))},

		// Stake.
		{"unbonding total off", func(o *Overlay) { add(o, keyUnbonding, 1) }, "recorded unbonding 50000001 != sum of entries 50000000"},

		// Validators.
		{"validator record under another key", func(o *Overlay) { o.Set(validatorKey(ConsAddress{1}), o.Get(validatorKey(ca))) }, "validator record"},
		{"operator entry missing", func(o *Overlay) { o.Delete(valOperatorKey(address.Address{0x10})) }, "operator " + address.Address{0x10}.String() + " of validator " + ca.String()},
		{"operator entry of a stranger", func(o *Overlay) { o.Set(valOperatorKey(address.Address{0x12}), ca[:]) }, "not its validator"},
		{"power index entry missing", func(o *Overlay) { o.Delete(valPowerKey(30*DefaultParams().PowerUnit, ca)) }, "validator " + ca.String() + " (bond 30000000) is missing from the power index"},
		{"missed slot not counted", func(o *Overlay) { o.Set(valMissedKey(cb, 3), []byte{1}) }, "validator " + cb.String() + " counts 0 missed blocks, has 1 slots"},
		{"bonded total off", func(o *Overlay) { add(o, keyValBonded, 1) }, "recorded validator bond 50000001 and unbonding 0, the records sum to 50000000 and 0"},
		{"set above max_validators", func(o *Overlay) { editParams(o, func(p *Params) { p.MaxValidators = 1 }) }, "2 validators in the set, params.max_validators is 1"},
		{"power 0 in the set", func(o *Overlay) { setUint(o, valSetKey(cb), 0) }, "validator " + cb.String() + " is in the set with power 0"},
		{"set member without a record", func(o *Overlay) { setUint(o, valSetKey(ConsAddress{1}), 5) }, "in the set has no record"},
		{"tombstoned with power", func(o *Overlay) {
			v, _, _ := GetValidator(o, cb)
			old := *v
			v.Tombstoned, v.Jailed = true, true
			setValidator(o, &old, v)
		}, "tombstoned validator " + cb.String() + " has power 20"},
		{"set not what the bonds call for", func(o *Overlay) { setUint(o, valSetKey(ca), 31) }, "the bonds call for"},

		// Params and the supply.
		{"params out of bounds", func(o *Overlay) { editParams(o, func(p *Params) { p.MaxReplicas = 17 }) }, "params.max_replicas 17 out of range [3, 16]"},
		{"a balance out of thin air", func(o *Overlay) {
			a, _ := GetAccount(o, prov2.addr)
			a.Balance++
			setAccount(o, &a)
		}, "supply"},
		{"treasury overflows the sum", func(o *Overlay) { setUint(o, keyTreasury, math.MaxUint64) }, "overflow adding treasury"},
		{"minted without supply", func(o *Overlay) { add(o, keyMinted, 1) }, "+ minted 1 - burned 0"},
	} {
		o := NewOverlay(kv)
		tc.corrupt(o)
		err := CheckInvariants(o)
		if !errors.Is(err, ErrInternal) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an internal error saying %q", tc.name, err, tc.want)
		}
	}
	mustHold(t, "the fixture after the cases", kv)
}

// TestInvariantsRegistered: CheckInvariants runs every registered
// invariant, each once (a check left out of the list would never run).
func TestInvariantsRegistered(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range invariants {
		name := fmt.Sprintf("%p", f)
		if seen[name] {
			t.Errorf("invariant %s registered twice", name)
		}
		seen[name] = true
	}
	for name, f := range map[string]func(*invariantState) error{
		"gpuBindingsMatchProviders": gpuBindingsMatchProviders, "gpuRulingsMatchGPUs": gpuRulingsMatchGPUs,
		"schedulerIndexMatchesProviders": schedulerIndexMatchesProviders, "classSummariesMatchProviders": classSummariesMatchProviders,
		"onlineIndexMatchesProviders": onlineIndexMatchesProviders, "stakeAddsUp": stakeAddsUp,
		"queueLengthMatchesQueues": queueLengthMatchesQueues, "jobAssignmentsAreDistinct": jobAssignmentsAreDistinct,
		"replicasShareEngine": replicasShareEngine, "escrowCoversCharges": escrowCoversCharges,
		"slotsMatchAssignments": slotsMatchAssignments, "jobIndexesMatchJobs": jobIndexesMatchJobs,
		"escrowAddsUp": escrowAddsUp, "unbondingAddsUp": unbondingAddsUp,
		"validatorIndexesMatchRecords": validatorIndexesMatchRecords, "validatorBondsAddUp": validatorBondsAddUp,
		"validatorSetWithinMax": validatorSetWithinMax, "noTombstonedPower": noTombstonedPower,
		"validatorSetMatchesBonds": validatorSetMatchesBonds, "supplyAddsUp": supplyAddsUp,
		"rewardsAddUp": rewardsAddUp,
	} {
		if !seen[fmt.Sprintf("%p", f)] {
			t.Errorf("%s is not registered in invariants", name)
		}
	}
}

// TestEscrowCoversTheFee: escrowCoversCharges says an unfinished job's
// escrow covers what it may still be charged, "fee included": an escrow
// that covers the providers' price but not the protocol fee on it must be
// caught (payForTime would otherwise shrink the provider's pay to fit).
func TestEscrowCoversTheFee(t *testing.T) {
	kv, _, _ := invariantFixture(t)
	o := NewOverlay(kv)
	j, _, _ := GetJob(o, 1)
	price := j.Assignments[0].PricePerHour
	cost := price * j.Spec.TimeoutSeconds / 3600 // 6000
	fee := cost * DefaultParams().ProtocolFeeBps / 10_000
	setUint(o, keyEscrow, Escrowed(o)-j.Escrow+cost+fee-1)
	setUint(o, keySupply, Supply(o)-j.Escrow+cost+fee-1)
	setUint(o, keyGenesisSupply, getUint(o, keyGenesisSupply)-j.Escrow+cost+fee-1)
	j.Escrow = cost + fee - 1
	o.Set(jobKey(1), encodeRecord(j))
	if err := CheckInvariants(o); !errors.Is(err, ErrInternal) || !strings.Contains(err.Error(), "may still be charged") {
		t.Errorf("job 1 escrow %d for a charge of %d + fee %d: %v, want the escrow invariant to refuse it", j.Escrow, cost, fee, err)
	}
}
