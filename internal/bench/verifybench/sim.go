package verifybench

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/bench/market"
	"github.com/gpunet/gpunet/internal/bench/measure"
	"github.com/gpunet/gpunet/internal/bench/statestore"
	"github.com/gpunet/gpunet/internal/ledger"
)

// provider is a scripted provider and what the simulation saw of it.
type provider struct {
	key       market.Key
	seq       uint64
	cheater   bool
	jobs      int // jobs it committed a result for, in commit order
	caughtAt  int // position of the first job it was outvoted in (0: never)
	wrongPre  int // wrong results delivered before caughtAt
	committed map[uint64]bool
}

// sim is the simulated chain, its scripted parties and the jobs in flight.
type sim struct {
	o      Options
	res    *Result
	params ledger.Params
	kv     statestore.Store
	l      ledger.Ledger
	height int64

	provs    []*provider
	byAddr   map[address.Address]*provider
	owner    market.Key
	ownerSeq uint64
	spec     ledger.JobSpec

	inflight  []uint64
	nextID    uint64
	submitted int
	// Replicas of the jobs whose first replica is an honest provider past
	// its first 100 results.
	steadyExtra, steadyRegular uint64
}

// blobRef is the output every result names.
var blobRef = "sha256:" + fmt.Sprintf("%064x", 7)

// newSim writes the genesis: the providers, the owner and a treasury that
// pays for audits.
func newSim(o Options, res *Result) (*sim, error) {
	kv, err := statestore.Open(statestore.BTree)
	if err != nil {
		return nil, err
	}
	s := &sim{o: o, res: res, kv: kv, l: ledger.Ledger{Verify: func(ed25519.PublicKey, []byte, []byte) bool { return true }}}
	s.params = ledger.DefaultParams()
	s.params.LivenessRatePPM = 0
	s.params.HWRatePPM = 0 // measured apart, below
	s.params.MaxPlacementsPerBlock = uint64(max(o.BlockJobs*4, 1000))
	res.SpotFloorPPM = s.params.SpotFloorPPM

	keys := market.Keys("verify-provider", o.Providers)
	s.provs = make([]*provider, o.Providers)
	s.byAddr = map[address.Address]*provider{}
	g := ledger.Genesis{Params: s.params, Treasury: 1 << 50}
	for i, k := range keys {
		s.provs[i] = &provider{key: k, cheater: i < o.Cheaters, committed: map[uint64]bool{}}
		s.byAddr[k.Addr] = s.provs[i]
		g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: k.Addr, Balance: 1 << 40})
	}
	s.owner = market.Keys("verify-owner", 1)[0]
	g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: s.owner.Addr, Balance: 1 << 55})
	changes, _, err := s.l.InitGenesis(ledger.NewMemKV(), chainID, g)
	if err == nil {
		err = kv.Apply(changes)
	}
	if err != nil {
		kv.Close()
		return nil, err
	}
	s.spec = ledger.JobSpec{Name: "sim", Executor: "wasm", Module: "sha256:" + fmt.Sprintf("%064x", 42), Outputs: []string{"/out"},
		CPUMilli: 1000, Memory: 256 << 20, Disk: 1 << 30, MaxPricePerHour: 100_000, TimeoutSeconds: 600, Verification: "spot", Deterministic: true}
	return s, nil
}

// apply signs txs and applies them as the next block.
func (s *sim) apply(txs []market.Tx) error {
	raw, err := market.SignAll(chainID, txs)
	if err != nil {
		return err
	}
	s.height++
	seed := sha256.Sum256(binary.BigEndian.AppendUint64([]byte("gpunet-bench/verify/"), uint64(s.height)))
	b := s.l.BeginBlock(s.kv, ledger.BlockInfo{Height: s.height, Time: time.Unix(1_700_000_000+s.height*blockSeconds, 0).UTC(), Seed: seed})
	for i, tx := range raw {
		r := b.DeliverTx(tx)
		_, grant := txs[i].Msg.(*ledger.MsgGrantKey)
		switch {
		case r.Err == nil:
		case grant && errors.Is(r.Err, ledger.ErrJobState):
			// An earlier grant in the block took the slot this job's
			// placement held only tentatively, and bumped it back to
			// its queue: it is placed again, and granted then.
			s.res.GrantsBumped++
		default:
			s.res.TxsFailed++
		}
	}
	s.res.Txs += len(raw)
	ch, _, err := b.End()
	if err != nil {
		return fmt.Errorf("block %d: %w", s.height, err)
	}
	s.res.Blocks++
	return s.kv.Apply(ch)
}

// register registers and stakes every provider in one block: honest
// providers ask 20–60k usync per core-hour, cheaters undercut at 10k and
// take more jobs at once.
func (s *sim) register() error {
	r := rand.New(rand.NewPCG(s.o.Seed, 0x76657269))
	var reg []market.Tx
	for i, p := range s.provs {
		price, slots := market.Between(r, 20_000, 60_000), uint64(4)
		if p.cheater {
			price, slots = 10_000, s.o.CheaterSlots
		}
		info := ledger.ProviderInfo{
			Inventory: ledger.Inventory{CPUCores: 8, CPUModel: "Sim CPU", RAM: 32 << 30, Disk: 500 << 30, OS: "linux", Arch: "amd64"},
			Measured:  ledger.Measured{Int8GOPS: 500, BandwidthMBs: 20_000, Device: "cpu"},
			Region:    market.Regions[i%len(market.Regions)], Executors: []string{"wasm"}, WasmEngine: market.WasmEngine, MaxJobs: slots,
			Asks:          []ledger.Ask{{Class: ledger.CPUClass, PricePerHour: ledger.Amount(price)}},
			EncryptionKey: market.AgeRecipient("verify/" + strconv.Itoa(i)),
		}
		reg = append(reg, market.Tx{Key: &p.key, Seq: 0, Msg: &ledger.MsgRegisterProvider{ProviderInfo: info}},
			market.Tx{Key: &p.key, Seq: 1, Msg: &ledger.MsgStake{Amount: ledger.Amount(s.params.MinStakeCPU * 10)}})
		p.seq = 2
	}
	return s.apply(reg)
}

// honest is the manifest hash of job id's right result.
func honest(id uint64) ledger.Hash {
	return sha256.Sum256(binary.BigEndian.AppendUint64([]byte("honest"), id))
}

// cheats says whether p falsifies its result of job id.
func (s *sim) cheats(id uint64, p *provider) bool {
	if !p.cheater {
		return false
	}
	h := sha256.Sum256(append(binary.BigEndian.AppendUint64([]byte("cheat"), id), p.key.Addr[:]...))
	return float64(binary.BigEndian.Uint64(h[:8])>>11)/float64(1<<53) < s.o.CheatRate
}

// manifest is the manifest hash p reports for job id.
func (s *sim) manifest(id uint64, p *provider) ledger.Hash {
	if s.cheats(id, p) {
		return sha256.Sum256(append(binary.BigEndian.AppendUint64([]byte("wrong"), id), p.key.Addr[:]...))
	}
	return honest(id)
}

func salt(id uint64, p *provider) ledger.Hash {
	return sha256.Sum256(append(binary.BigEndian.AppendUint64([]byte("salt"), id), p.key.Addr[:]...))
}

// step makes one block: BlockJobs new submissions, and for every job in
// flight what its parties do next; jobs that ended are tallied.
func (s *sim) step() error {
	var txs []market.Tx
	for n := 0; n < s.o.BlockJobs && s.submitted < s.o.Jobs; n++ {
		txs = append(txs, market.Tx{Key: &s.owner, Seq: s.ownerSeq, Msg: &ledger.MsgSubmitJob{Spec: s.spec, ConsumerKey: market.AgeRecipient("owner")}})
		s.ownerSeq++
		s.submitted++
		s.nextID++
		s.inflight = append(s.inflight, s.nextID)
	}
	keep := s.inflight[:0]
	for _, id := range s.inflight {
		j, ok, err := ledger.GetJob(s.kv, id)
		if err != nil {
			return err
		}
		if !ok { // submitted in this block
			keep = append(keep, id)
			continue
		}
		if j.Done() {
			s.tallyJob(id, j)
			continue
		}
		keep = append(keep, id)
		txs = append(txs, s.act(id, j)...)
	}
	s.inflight = keep
	return s.apply(txs)
}

// act returns the txs job id's parties send next: the owner's key grants,
// each provider's start, commitment or reveal.
func (s *sim) act(id uint64, j *ledger.Job) []market.Tx {
	var txs []market.Tx
	var grants []ledger.Grant
	for _, a := range j.Assignments {
		p := s.byAddr[a.Provider]
		switch {
		case a.KeyGrant == nil:
			grants = append(grants, ledger.Grant{Provider: a.Provider, WrappedKey: []byte("k")})
		case a.StartedAt == 0:
			txs = append(txs, market.Tx{Key: &p.key, Seq: p.seq, Msg: &ledger.MsgStartJob{JobID: id}})
			p.seq++
		case a.Commitment == nil && !p.committed[id]:
			m := s.manifest(id, p)
			if m != honest(id) {
				s.res.CheatedResults++
			}
			c := ledger.ResultCommitment(m, a.Provider, salt(id, p))
			txs = append(txs, market.Tx{Key: &p.key, Seq: p.seq, Msg: &ledger.MsgCommitResult{JobID: id, Commitment: &c, MeteredSeconds: blockSeconds}})
			p.seq++
			p.committed[id] = true
			p.jobs++
		case j.Revealing && a.Result == nil && a.Commitment != nil:
			txs = append(txs, market.Tx{Key: &p.key, Seq: p.seq, Msg: &ledger.MsgRevealResult{JobID: id, Salt: salt(id, p),
				Result: ledger.JobResult{ManifestHash: s.manifest(id, p), OutputBlob: blobRef}}})
			p.seq++
		}
	}
	if len(grants) > 0 {
		txs = append(txs, market.Tx{Key: &s.owner, Seq: s.ownerSeq, Msg: &ledger.MsgGrantKey{JobID: id, Grants: grants}})
		s.ownerSeq++
	}
	return txs
}

// tallyJob counts what an ended job cost and what its owner got.
func (s *sim) tallyJob(id uint64, j *ledger.Job) {
	res := s.res
	res.Finished++
	audited := false
	// Extra replicas count against the job's first replica: the steady
	// figure is for jobs whose first replica is honest and past its first
	// 100 results.
	first := s.byAddr[j.Assignments[0].Provider]
	steady := !first.cheater && first.jobs > 100
	for _, a := range j.Assignments {
		p := s.byAddr[a.Provider]
		if a.Extra {
			res.ExtraReplicas++
			audited = true
		} else {
			res.RegularReplicas++
		}
		if steady {
			if a.Extra {
				s.steadyExtra++
			} else {
				s.steadyRegular++
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
		if p := s.byAddr[*j.Delivered]; p.caughtAt == 0 {
			p.wrongPre++
		}
	}
}

// tallyCheaters reads every provider's record at the end: honest ones
// slashed, and how soon each cheater was caught.
func (s *sim) tallyCheaters() error {
	res := s.res
	var jobsPer, firstCatch []float64
	caughtCheats := 0
	for _, p := range s.provs {
		rec, _, err := ledger.GetProvider(s.kv, p.key.Addr)
		if err != nil {
			return err
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
		if p.caughtAt > 0 || p.jobs >= catchWindow {
			res.CheatersObservable++
			if p.caughtAt > 0 && p.caughtAt <= catchWindow {
				res.CaughtWithin++
			}
		}
	}
	if s.o.Cheaters > 0 {
		res.WrongBeforeCatch /= float64(max(res.CaughtCheaters, 1))
		res.CheaterJobsMedian = measure.Median(jobsPer)
		res.FirstCatchP50 = measure.Median(firstCatch)
		res.CaughtWithinRate = float64(res.CaughtWithin) / float64(max(res.CheatersObservable, 1))
		res.CatchPerCheat = float64(caughtCheats) / float64(max(res.CheatedResults, 1))
		res.DerivedCatchRate = 1 - math.Pow(1-s.o.CheatRate*res.CatchPerCheat, catchWindow)
	}
	return nil
}
