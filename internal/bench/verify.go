package bench

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/challenge"
	"github.com/gpunet/gpunet/internal/challenge/prove"
	"github.com/gpunet/gpunet/internal/hwinfo"
	"github.com/gpunet/gpunet/internal/ledger"
)

// The verification simulation (`gpunet bench verify`) runs Proof of Sync's
// result side through the real ledger code: a chain of Providers CPU
// providers and consumers, Jobs deterministic spot jobs submitted
// BlockJobs a block, and every party scripted to do what an agent does
// (owners grant keys, providers start, commit and reveal). A share of the
// providers (Cheaters) falsify each result with probability CheatRate,
// decided per job by a hash, so commit–reveal and audits face the same
// cheating on every run. Cheaters undercut the honest providers' prices
// (the rational strategy for whoever wants to be paid for work it does not
// do) and take more jobs at once, so each does enough jobs to measure how
// soon it is caught.
//
// Blocks are 10 s of block time apart and every replica meters 10 s, so
// compute is counted in replicas. Measured:
//
//   - extra compute: replicas paid by the treasury (audits, escalations)
//     over the replicas the owners asked for; target ≤ 10 %.
//   - for each cheater, the position among its jobs of the first job in
//     which it was outvoted (caught), and the wrong results delivered to
//     owners before that; target: a provider cheating on 5 % of its jobs
//     is caught within 1,313 of them with probability ≥ 99 %, compared
//     with the analytic bound 1 − (1 − rate × floor)^1313.
//   - honest providers slashed (must be 0) and wrong results delivered.
//   - a hardware challenge proved with the CPU prover and verified as a
//     validator does: verification time over proof time; target ≤ 1/1000.

// VerifyOptions tune the simulation. Zero fields take the defaults.
type VerifyOptions struct {
	Providers int
	Jobs      int
	BlockJobs int
	// Cheaters is the number of cheating providers; CheatRate the share
	// of their results they falsify.
	Cheaters  int
	CheatRate float64
	// CheaterSlots is how many jobs a cheater runs at once (honest
	// providers: 4).
	CheaterSlots uint64
	Seed         uint64
	// ChallengeGOPS is the claim the measured hardware challenge is sized
	// for (0: what this machine measures), at ChallengeMillis of compute.
	ChallengeGOPS   uint64
	ChallengeMillis uint64
	Progress        io.Writer
}

// Defaults of VerifyOptions.
const (
	DefaultVerifyProviders = 1_000
	DefaultVerifyJobs      = 100_000
	DefaultVerifyBlockJobs = 200
	DefaultVerifyCheaters  = 50
	DefaultVerifyCheatRate = 0.05
	DefaultCheaterSlots    = 4
	verifyCatchWindow      = 1_313 // DESIGN.md section 5
	verifyChainID          = "gpunet-bench-verify"
	verifyBlockSeconds     = 10
)

// Validate fills in defaults and checks the rest.
func (o *VerifyOptions) Validate() error {
	if o.Providers == 0 {
		o.Providers = DefaultVerifyProviders
	}
	if o.Jobs == 0 {
		o.Jobs = DefaultVerifyJobs
	}
	if o.BlockJobs == 0 {
		o.BlockJobs = DefaultVerifyBlockJobs
	}
	if o.Cheaters == 0 {
		o.Cheaters = DefaultVerifyCheaters
	}
	if o.CheatRate == 0 {
		o.CheatRate = DefaultVerifyCheatRate
	}
	if o.CheaterSlots == 0 {
		o.CheaterSlots = DefaultCheaterSlots
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.ChallengeMillis == 0 {
		o.ChallengeMillis = 2_000
	}
	switch {
	case o.Providers < 3 || o.Providers > 100_000:
		return fmt.Errorf("providers %d out of range [3, 100000]", o.Providers)
	case o.Jobs < 1 || o.Jobs > 10_000_000:
		return fmt.Errorf("jobs %d out of range [1, 10000000]", o.Jobs)
	case o.BlockJobs < 1 || o.BlockJobs > 100_000:
		return fmt.Errorf("block-jobs %d out of range [1, 100000]", o.BlockJobs)
	case o.Cheaters < 0 || o.Cheaters > o.Providers-3:
		return fmt.Errorf("cheaters %d out of range [0, providers-3]", o.Cheaters)
	case o.CheatRate < 0 || o.CheatRate > 1:
		return fmt.Errorf("cheat-rate %g out of range [0, 1]", o.CheatRate)
	case o.ChallengeMillis > 60_000:
		return fmt.Errorf("challenge-ms %d above 60000", o.ChallengeMillis)
	}
	return nil
}

// VerifyResult is what a simulation measured.
type VerifyResult struct {
	Date         time.Time `json:"date"`
	Providers    int       `json:"providers"`
	Jobs         int       `json:"jobs"`
	Finished     int       `json:"finished"`
	Cheaters     int       `json:"cheaters"`
	CheatRate    float64   `json:"cheat_rate"`
	Blocks       int       `json:"blocks"`
	Txs          int       `json:"txs"`
	TxsFailed    int       `json:"txs_failed"`
	ElapsedS     float64   `json:"elapsed_s"`
	SpotFloorPPM uint64    `json:"spot_floor_ppm"`

	// Compute, in replicas (each meters the same time).
	RegularReplicas uint64  `json:"regular_replicas"`
	ExtraReplicas   uint64  `json:"extra_replicas"`
	ExtraFraction   float64 `json:"extra_fraction"`
	AuditedJobs     int     `json:"audited_jobs"`
	EscalatedJobs   int     `json:"escalated_jobs"`
	NoMajorityJobs  int     `json:"no_majority_jobs"`
	// Extra compute for jobs whose first replica is an honest provider
	// past its first 100 results (warm-up done).
	SteadyExtraFraction float64 `json:"steady_extra_fraction"`

	// Cheating.
	CheatedResults     int     `json:"cheated_results"`   // wrong results committed
	WrongDelivered     int     `json:"wrong_delivered"`   // wrong outputs an owner received
	CheaterJobsMedian  float64 `json:"cheater_jobs_p50"`  // jobs per cheater
	CaughtCheaters     int     `json:"caught_cheaters"`   // outvoted at least once
	CaughtWithin       int     `json:"caught_within"`     // within verifyCatchWindow of their jobs
	CheatersObservable int     `json:"cheaters_observed"` // caught, or did ≥ verifyCatchWindow jobs
	CaughtWithinRate   float64 `json:"caught_within_rate"`
	FirstCatchP50      float64 `json:"first_catch_p50"`         // position of the first catch
	WrongBeforeCatch   float64 `json:"wrong_before_catch_mean"` // wrong results delivered per cheater before its first catch
	// CatchPerCheat is the share of falsified results that were outvoted;
	// DerivedCatchRate = 1 − (1 − CheatRate × CatchPerCheat)^1313 and
	// AnalyticBound = 1 − (1 − CheatRate × floor)^1313.
	CatchPerCheat    float64 `json:"catch_per_cheat"`
	DerivedCatchRate float64 `json:"derived_catch_rate"`
	AnalyticBound    float64 `json:"analytic_bound"`
	HonestSlashed    int     `json:"honest_slashed"`

	// One hardware challenge, proved on this machine's CPU and verified.
	ChallengeClaimGOPS uint64  `json:"challenge_claim_gops"`
	ChallengeSize      string  `json:"challenge_size"`
	ChallengeProveMs   float64 `json:"challenge_prove_ms"`
	ChallengeVerifyMs  float64 `json:"challenge_verify_ms"`
	ChallengeRatio     float64 `json:"challenge_verify_over_prove"`
}

type simProvider struct {
	key       benchKey
	seq       uint64
	cheater   bool
	jobs      int // jobs it committed a result for, in commit order
	caughtAt  int // position of the first job it was outvoted in (0: never)
	wrongPre  int // wrong results delivered before caughtAt
	committed map[uint64]bool
}

// RunVerify runs the simulation.
func RunVerify(ctx context.Context, o VerifyOptions) (*VerifyResult, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	progress := func(format string, args ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, format+"\n", args...)
		}
	}
	start := time.Now()
	res := &VerifyResult{Date: start.UTC(), Providers: o.Providers, Jobs: o.Jobs, Cheaters: o.Cheaters, CheatRate: o.CheatRate}
	kv, err := openSchedKV(StoreBTree)
	if err != nil {
		return nil, err
	}
	defer kv.Close()
	l := ledger.Ledger{Verify: func(ed25519.PublicKey, []byte, []byte) bool { return true }}
	params := ledger.DefaultParams()
	params.LivenessRatePPM = 0
	params.HWRatePPM = 0 // measured apart, below
	params.MaxPlacementsPerBlock = uint64(max(o.BlockJobs*4, 1000))
	res.SpotFloorPPM = params.SpotFloorPPM

	keys := benchKeys("verify-provider", o.Providers)
	provs := make([]*simProvider, o.Providers)
	byAddr := map[address.Address]*simProvider{}
	g := ledger.Genesis{Params: params, Treasury: 1 << 50}
	for i, k := range keys {
		provs[i] = &simProvider{key: k, cheater: i < o.Cheaters, committed: map[uint64]bool{}}
		byAddr[k.addr] = provs[i]
		g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: k.addr, Balance: 1 << 40})
	}
	owner := benchKeys("verify-owner", 1)[0]
	var ownerSeq uint64
	g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: owner.addr, Balance: 1 << 55})
	changes, _, err := l.InitGenesis(ledger.NewMemKV(), verifyChainID, g)
	if err != nil {
		return nil, err
	}
	if err := kv.Apply(changes); err != nil {
		return nil, err
	}
	var height int64
	apply := func(txs []signedTx) error {
		raw, err := signAll(verifyChainID, txs)
		if err != nil {
			return err
		}
		height++
		seed := sha256.Sum256(binary.BigEndian.AppendUint64([]byte("gpunet-bench/verify/"), uint64(height)))
		b := l.BeginBlock(kv, ledger.BlockInfo{Height: height, Time: time.Unix(1_700_000_000+height*verifyBlockSeconds, 0).UTC(), Seed: seed})
		for _, tx := range raw {
			if r := b.DeliverTx(tx); r.Err != nil {
				res.TxsFailed++
			}
		}
		res.Txs += len(raw)
		ch, _, err := b.End()
		if err != nil {
			return fmt.Errorf("block %d: %w", height, err)
		}
		res.Blocks++
		return kv.Apply(ch)
	}
	// Registration: honest providers ask 20–60k usync per core-hour,
	// cheaters undercut at 10k and take more jobs at once.
	r := rand.New(rand.NewPCG(o.Seed, 0x76657269))
	var reg []signedTx
	for i, p := range provs {
		price, slots := between(r, 20_000, 60_000), uint64(4)
		if p.cheater {
			price, slots = 10_000, o.CheaterSlots
		}
		info := ledger.ProviderInfo{
			Inventory: ledger.Inventory{CPUCores: 8, CPUModel: "Sim CPU", RAM: 32 << 30, Disk: 500 << 30, OS: "linux", Arch: "amd64"},
			Measured:  ledger.Measured{Int8GOPS: 500, BandwidthMBs: 20_000, Device: "cpu"},
			Region:    schedRegions[i%len(schedRegions)], Executors: []string{"wasm"}, MaxJobs: slots,
			Asks:          []ledger.Ask{{Class: ledger.CPUClass, PricePerHour: ledger.Amount(price)}},
			EncryptionKey: ageRecipient("verify/" + strconv.Itoa(i)),
		}
		reg = append(reg, signedTx{key: &p.key, seq: 0, msg: &ledger.MsgRegisterProvider{ProviderInfo: info}},
			signedTx{key: &p.key, seq: 1, msg: &ledger.MsgStake{Amount: ledger.Amount(params.MinStakeCPU * 10)}})
		p.seq = 2
	}
	if err := apply(reg); err != nil {
		return nil, err
	}
	progress("%d providers (%d cheating on %.0f%% of their results), %d spot jobs, %d a block…", o.Providers, o.Cheaters, 100*o.CheatRate, o.Jobs, o.BlockJobs)

	module := "sha256:" + fmt.Sprintf("%064x", 42)
	spec := ledger.JobSpec{Name: "sim", Executor: "wasm", Module: module, Outputs: []string{"/out"}, CPUMilli: 1000, Memory: 256 << 20, Disk: 1 << 30,
		MaxPricePerHour: 100_000, TimeoutSeconds: 600, Verification: "spot", Deterministic: true}
	honest := func(id uint64) ledger.Hash { return sha256.Sum256(binary.BigEndian.AppendUint64([]byte("honest"), id)) }
	cheats := func(id uint64, p *simProvider) bool {
		if !p.cheater {
			return false
		}
		h := sha256.Sum256(append(binary.BigEndian.AppendUint64([]byte("cheat"), id), p.key.addr[:]...))
		return float64(binary.BigEndian.Uint64(h[:8])>>11)/float64(1<<53) < o.CheatRate
	}
	manifest := func(id uint64, p *simProvider) ledger.Hash {
		if cheats(id, p) {
			return sha256.Sum256(append(binary.BigEndian.AppendUint64([]byte("wrong"), id), p.key.addr[:]...))
		}
		return honest(id)
	}
	salt := func(id uint64, p *simProvider) ledger.Hash {
		return sha256.Sum256(append(binary.BigEndian.AppendUint64([]byte("salt"), id), p.key.addr[:]...))
	}
	blobRef := "sha256:" + fmt.Sprintf("%064x", 7)
	var inflight []uint64
	var nextID uint64
	submitted := 0
	var honestExtraSteady, honestRegularSteady uint64
	for (submitted < o.Jobs || len(inflight) > 0) && ctx.Err() == nil {
		// Every job finishes within a few hundred blocks; a run that goes
		// far past that is stuck (txs the ledger refuses), not slow.
		if res.Blocks > 1000+o.Jobs*50 {
			return nil, fmt.Errorf("verify bench stuck after %d blocks: %d of %d jobs submitted, %d finished, %d txs refused", res.Blocks, submitted, o.Jobs, res.Finished, res.TxsFailed)
		}
		var txs []signedTx
		for n := 0; n < o.BlockJobs && submitted < o.Jobs; n++ {
			txs = append(txs, signedTx{key: &owner, seq: ownerSeq, msg: &ledger.MsgSubmitJob{Spec: spec, ConsumerKey: ageRecipient("owner")}})
			ownerSeq++
			submitted++
			nextID++
			inflight = append(inflight, nextID)
		}
		keep := inflight[:0]
		for _, id := range inflight {
			j, ok, err := ledger.GetJob(kv, id)
			if err != nil {
				return nil, err
			}
			if !ok { // submitted in this block
				keep = append(keep, id)
				continue
			}
			if j.Done() {
				res.Finished++
				audited := false
				// Extra replicas count against the job's first replica:
				// the steady figure is for jobs whose first replica is
				// honest and past its first 100 results.
				first := byAddr[j.Assignments[0].Provider]
				steady := !first.cheater && first.jobs > 100
				for _, a := range j.Assignments {
					p := byAddr[a.Provider]
					if a.Extra {
						res.ExtraReplicas++
						audited = true
					} else {
						res.RegularReplicas++
					}
					if steady {
						if a.Extra {
							honestExtraSteady++
						} else {
							honestRegularSteady++
						}
					}
					if a.Outcome == ledger.OutcomeMinority && p.caughtAt == 0 {
						p.caughtAt = max(p.jobs, 1)
					}
				}
				if audited {
					res.AuditedJobs++
				}
				if len(j.Assignments) > 2 {
					res.EscalatedJobs++
				}
				if j.Verdict == ledger.VerdictNoMajority {
					res.NoMajorityJobs++
				}
				if r := j.DeliveredResult(); r != nil && r.ManifestHash != honest(id) {
					res.WrongDelivered++
					if p := byAddr[*j.Delivered]; p.caughtAt == 0 {
						p.wrongPre++
					}
				}
				continue
			}
			keep = append(keep, id)
			var grants []ledger.Grant
			for _, a := range j.Assignments {
				p := byAddr[a.Provider]
				switch {
				case a.KeyGrant == nil:
					grants = append(grants, ledger.Grant{Provider: a.Provider, WrappedKey: []byte("k")})
				case a.StartedAt == 0:
					txs = append(txs, signedTx{key: &p.key, seq: p.seq, msg: &ledger.MsgStartJob{JobID: id}})
					p.seq++
				case a.Commitment == nil && !p.committed[id]:
					m := manifest(id, p)
					if m != honest(id) {
						res.CheatedResults++
					}
					c := ledger.ResultCommitment(m, a.Provider, salt(id, p))
					txs = append(txs, signedTx{key: &p.key, seq: p.seq, msg: &ledger.MsgCommitResult{JobID: id, Commitment: &c, MeteredSeconds: verifyBlockSeconds}})
					p.seq++
					p.committed[id] = true
					p.jobs++
				case j.Revealing && a.Result == nil && a.Commitment != nil:
					txs = append(txs, signedTx{key: &p.key, seq: p.seq, msg: &ledger.MsgRevealResult{JobID: id, Salt: salt(id, p),
						Result: ledger.JobResult{ManifestHash: manifest(id, p), OutputBlob: blobRef}}})
					p.seq++
				}
			}
			if len(grants) > 0 {
				txs = append(txs, signedTx{key: &owner, seq: ownerSeq, msg: &ledger.MsgGrantKey{JobID: id, Grants: grants}})
				ownerSeq++
			}
		}
		inflight = keep
		if err := apply(txs); err != nil {
			return nil, err
		}
		if res.Blocks%200 == 0 {
			progress("  block %d: %d submitted, %d finished, %d in flight", res.Blocks, submitted, res.Finished, len(inflight))
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res.ElapsedS = time.Since(start).Seconds()
	res.ExtraFraction = float64(res.ExtraReplicas) / float64(max(res.RegularReplicas, 1))
	res.SteadyExtraFraction = float64(honestExtraSteady) / float64(max(honestRegularSteady, 1))

	var jobsPer, firstCatch []float64
	caughtCheats := 0
	for _, p := range provs {
		rec, _, err := ledger.GetProvider(kv, p.key.addr)
		if err != nil {
			return nil, err
		}
		if !p.cheater {
			if rec.Slashed > 0 {
				res.HonestSlashed++
			}
			continue
		}
		caughtCheats += int(rec.Invalid)
		jobsPer = append(jobsPer, float64(p.jobs))
		if p.caughtAt > 0 {
			res.CaughtCheaters++
			firstCatch = append(firstCatch, float64(p.caughtAt))
			res.WrongBeforeCatch += float64(p.wrongPre)
		}
		if p.caughtAt > 0 || p.jobs >= verifyCatchWindow {
			res.CheatersObservable++
			if p.caughtAt > 0 && p.caughtAt <= verifyCatchWindow {
				res.CaughtWithin++
			}
		}
	}
	if o.Cheaters > 0 {
		res.WrongBeforeCatch /= float64(max(res.CaughtCheaters, 1))
		res.CheaterJobsMedian = median(jobsPer)
		res.FirstCatchP50 = median(firstCatch)
		res.CaughtWithinRate = float64(res.CaughtWithin) / float64(max(res.CheatersObservable, 1))
		res.CatchPerCheat = float64(caughtCheats) / float64(max(res.CheatedResults, 1))
		res.DerivedCatchRate = 1 - math.Pow(1-o.CheatRate*res.CatchPerCheat, verifyCatchWindow)
	}
	res.AnalyticBound = 1 - math.Pow(1-o.CheatRate*float64(params.SpotFloorPPM)/1e6, verifyCatchWindow)
	progress("  %d blocks, %d txs in %.0fs; measuring a hardware challenge…", res.Blocks, res.Txs, res.ElapsedS)
	if err := measureChallenge(ctx, o, res); err != nil {
		return nil, err
	}
	return res, nil
}

// measureChallenge proves one challenge with the CPU prover and verifies
// its opening as a validator does.
func measureChallenge(ctx context.Context, o VerifyOptions, res *VerifyResult) error {
	cp := challenge.DefaultParams()
	cp.TargetMillis = o.ChallengeMillis
	claim := o.ChallengeGOPS
	if claim == 0 {
		// Claim what this machine measures, as an honest agent would:
		// the proof then takes about the plan's compute time.
		fig, err := hwinfo.NewCPUBenchmarker(0).Run(ctx, time.Second)
		if err != nil {
			return err
		}
		claim = max(1, uint64(fig.Int8TOPS*1000))
	}
	res.ChallengeClaimGOPS = claim
	plan, err := challenge.NewPlan(claim, cp)
	if err != nil {
		return err
	}
	ch := challenge.Challenge{Seed: sha256.Sum256([]byte("gpunet-bench/verify/challenge")), Size: plan.Size, Openings: cp.Openings}
	t0 := time.Now()
	cm, err := (&prove.CPU{}).Commit(ctx, ch)
	if err != nil {
		return err
	}
	defer cm.Close()
	res.ChallengeProveMs = float64(time.Since(t0).Microseconds()) / 1e3
	randomness := sha256.Sum256([]byte("gpunet-bench/verify/randomness"))
	op, err := cm.Open(ctx, randomness)
	if err != nil {
		return err
	}
	b, err := op.MarshalBinary()
	if err != nil {
		return err
	}
	var times []float64
	for range 20 {
		t0 := time.Now()
		dec, err := challenge.DecodeOpening(b)
		if err == nil {
			err = ch.Verify(cm.Root(), randomness, dec)
		}
		if err != nil {
			return fmt.Errorf("honest opening rejected: %w", err)
		}
		times = append(times, float64(time.Since(t0).Microseconds())/1e3)
	}
	res.ChallengeSize = plan.Size.String()
	res.ChallengeVerifyMs = median(times)
	res.ChallengeRatio = res.ChallengeVerifyMs / res.ChallengeProveMs
	return nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
