// Package marketsim simulates the market through the real ledger (issue
// 14): providers of one GPU class, consumers whose jobs arrive at a rate
// and carry a ceiling drawn at random, and the ledger's price index moving
// epoch by epoch. It measures how the index settles after a demand step,
// what rewards pay per unit of verified work over a simulated month, and
// what an epoch's end costs at a large provider count.
package marketsim

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// Class is the simulated GPU class.
const Class = "SIM_GPU"

// Config is one simulation.
type Config struct {
	Seed      uint64
	Providers int    // one GPU each, one job at a time
	Ask       uint64 // usync per GPU-hour, every provider's
	// BlockSeconds apart; EpochBlocks per epoch; jobs run JobSeconds.
	BlockSeconds int64
	EpochBlocks  uint64
	JobSeconds   int64
	// Demand is arrivals per block as a fraction of what the providers
	// can run (Providers × BlockSeconds / JobSeconds); a job's ceiling is
	// Ask × U[1, MaxPriceSpread]. StepAt, if positive, is the epoch from
	// which demand is Demand × StepFactor.
	Demand         float64
	MaxPriceSpread float64
	StepAt         int
	StepFactor     float64
	Epochs         int
	// Tune adjusts the default parameters.
	Tune func(*ledger.Params)
}

// Epoch is one closed epoch as the simulation saw it.
type Epoch struct {
	Number         uint64
	IndexMicro     uint64
	UtilisationPPM uint64
	Submitted      int // jobs that arrived in it
}

// Result is a simulation's outcome.
type Result struct {
	Epochs []Epoch
	// Work is the verified GPU-seconds run, Paid what consumers paid
	// providers, Minted the rewards minted, all over the run.
	Work, Paid, Fees, Minted  uint64
	Jobs, Cancelled, TxErrors int
}

type sim struct {
	cfg       Config
	l         ledger.Ledger
	kv        *ledger.MemKV
	h         int64
	now       time.Time
	seq       map[address.Address]uint64
	providers []lt.Key
	consumers []lt.Key
	keys      map[address.Address]lt.Key
	active    []uint64
	r         *rand.Rand
	res       Result
}

const chainID = "gpunet-marketsim"

// Run runs a simulation.
func Run(cfg Config) (*Result, error) {
	s := &sim{cfg: cfg, kv: ledger.NewMemKV(), seq: map[address.Address]uint64{}, keys: map[address.Address]lt.Key{}, r: rand.New(rand.NewPCG(cfg.Seed, 14))}
	p := ledger.DefaultParams()
	p.LivenessRatePPM, p.HWRatePPM, p.MinFee = 0, 0, 0
	p.EpochBlocks = cfg.EpochBlocks
	p.JobGrantTimeout, p.JobStartTimeout = uint64(10*cfg.BlockSeconds), uint64(10*cfg.BlockSeconds)
	if cfg.Tune != nil {
		cfg.Tune(&p)
	}
	g := ledger.Genesis{Params: p}
	for i := range cfg.Providers {
		k := lt.NewKey("sim-provider-" + strconv.Itoa(i))
		s.providers = append(s.providers, k)
		g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: k.Addr, Balance: 1_000_000_000})
	}
	for i := range 8 {
		k := lt.NewKey("sim-consumer-" + strconv.Itoa(i))
		s.consumers = append(s.consumers, k)
		g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: k.Addr, Balance: 1 << 50})
	}
	for _, k := range append(s.providers, s.consumers...) {
		s.keys[k.Addr] = k
	}
	changes, _, err := s.l.InitGenesis(s.kv, chainID, g)
	if err != nil {
		return nil, err
	}
	s.kv.Apply(changes)
	s.now = time.Unix(1_700_000_000, 0).UTC()
	var txs [][]byte
	for _, k := range s.providers {
		info := lt.ProviderInfo(Class, 1, cfg.Ask)
		info.Asks, info.MaxJobs = info.Asks[:1], 1
		txs = append(txs, s.tx(k, &ledger.MsgRegisterProvider{ProviderInfo: info}), s.tx(k, &ledger.MsgStake{Amount: ledger.Amount(p.MinStakePerGPU)}))
	}
	if err := s.block(txs); err != nil {
		return nil, err
	}
	capacity := float64(cfg.Providers) * float64(cfg.BlockSeconds) / float64(cfg.JobSeconds)
	var carry float64
	epoch := ledger.GetEpoch(s.kv).Number
	submitted := 0
	for len(s.res.Epochs) < cfg.Epochs {
		demand := cfg.Demand
		if cfg.StepAt > 0 && len(s.res.Epochs) >= cfg.StepAt {
			demand *= cfg.StepFactor
		}
		txs, err := s.advance()
		if err != nil {
			return nil, err
		}
		carry += demand * capacity * (0.5 + s.r.Float64()) // arrivals jitter ±50% around the rate
		for ; carry >= 1; carry-- {
			c := s.consumers[s.r.IntN(len(s.consumers))]
			spec := lt.WasmJob("sim", uint64(float64(cfg.Ask)*(1+s.r.Float64()*(cfg.MaxPriceSpread-1))), uint64(2*cfg.JobSeconds))
			spec.GPUCount, spec.GPUModels = 1, []string{Class}
			txs = append(txs, s.tx(c, &ledger.MsgSubmitJob{Spec: spec, ConsumerKey: lt.AgeKey("sim")}))
			submitted++
		}
		if err := s.block(txs); err != nil {
			return nil, err
		}
		if e := ledger.GetEpoch(s.kv).Number; e != epoch {
			m, ok, err := ledger.GetMarketClass(s.kv, Class)
			if err != nil || !ok {
				return nil, fmt.Errorf("no market record of %s: %v", Class, err)
			}
			s.res.Epochs = append(s.res.Epochs, Epoch{Number: epoch, IndexMicro: m.IndexMicro, UtilisationPPM: m.LastPPM, Submitted: submitted})
			epoch, submitted = e, 0
		}
	}
	s.res.Minted = ledger.Minted(s.kv)
	return &s.res, nil
}

func (s *sim) tx(k lt.Key, msg ledger.Msg) []byte {
	raw := k.Tx(chainID, s.seq[k.Addr], 0, msg)
	s.seq[k.Addr]++
	return raw
}

// block applies txs as the next block, BlockSeconds after the last, and
// tracks the jobs they submit.
func (s *sim) block(txs [][]byte) error {
	s.h++
	s.now = s.now.Add(time.Duration(s.cfg.BlockSeconds) * time.Second)
	b := s.l.BeginBlock(s.kv, ledger.BlockInfo{Height: s.h, Time: s.now, Seed: lt.BlockSeed(s.h)})
	for _, raw := range txs {
		r := b.DeliverTx(raw)
		if r.Err != nil {
			// A step that raced a deadline (a grant after the job was
			// reassigned): the job goes on without it.
			s.res.TxErrors++
			continue
		}
		for _, ev := range r.Events {
			if ev.Type == "job_submitted" {
				id, _ := strconv.ParseUint(ev.Attrs[0].Value, 10, 64)
				s.active = append(s.active, id)
				s.res.Jobs++
			}
		}
	}
	changes, _, err := b.End()
	if err != nil {
		return err
	}
	s.kv.Apply(changes)
	return nil
}

// advance returns the txs that move each active job along: grant, start,
// commit when it has run JobSeconds, cancel when it waited an epoch.
func (s *sim) advance() ([][]byte, error) {
	var txs [][]byte
	now := s.now.Unix() + s.cfg.BlockSeconds // the next block's time
	keep := s.active[:0]
	for _, id := range s.active {
		j, ok, err := ledger.GetJob(s.kv, id)
		if err != nil || !ok {
			return nil, fmt.Errorf("job %d: %v", id, err)
		}
		if j.Done() {
			if j.State == ledger.JobSucceeded {
				s.res.Work += j.Assignments[0].Result.MeteredSeconds
			}
			s.res.Paid += j.Cost
			s.res.Fees += j.Fee
			continue
		}
		keep = append(keep, id)
		owner := s.keys[j.Owner]
		switch {
		case j.State == ledger.JobQueued:
			if now-j.SubmittedAt >= int64(s.cfg.EpochBlocks)*s.cfg.BlockSeconds {
				txs = append(txs, s.tx(owner, &ledger.MsgCancelJob{JobID: id}))
				s.res.Cancelled++
			}
		case len(j.Assignments) == 1 && j.Assignments[0].KeyGrant == nil:
			txs = append(txs, s.tx(owner, &ledger.MsgGrantKey{JobID: id, Grants: []ledger.Grant{{Provider: j.Assignments[0].Provider, WrappedKey: []byte("k")}}}))
		case len(j.Assignments) == 1 && j.Assignments[0].StartedAt == 0:
			txs = append(txs, s.tx(s.keys[j.Assignments[0].Provider], &ledger.MsgStartJob{JobID: id}))
		case len(j.Assignments) == 1 && j.Assignments[0].Result == nil && now-j.Assignments[0].StartedAt >= s.cfg.JobSeconds:
			secs := uint64(s.cfg.JobSeconds)
			txs = append(txs, s.tx(s.keys[j.Assignments[0].Provider], &ledger.MsgCommitResult{JobID: id, MeteredSeconds: secs, Result: &ledger.JobResult{
				ManifestHash: ledger.Hash{1}, OutputBlob: "sha256:" + fmt.Sprintf("%064x", id), MeteredSeconds: secs}}))
		}
	}
	s.active = keep
	return txs, nil
}
