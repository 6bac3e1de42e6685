package challengebench

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/gpunet/gpunet/internal/bench/market"
	"github.com/gpunet/gpunet/internal/bench/statestore"
	"github.com/gpunet/gpunet/internal/challenge"
	"github.com/gpunet/gpunet/internal/challenge/prove"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Part 2's scale: time runs a thousand times faster than on a real chain
// with the default parameters, and every duration the ledger sees is
// scaled alike, so each ruling is the one the real durations would get.
const (
	scale       = 1000
	simClaim    = 100 // GOPS every simulated device claims: 10⁹ operations a proof at the scaled target
	blockMillis = 6   // a 6-s block
	seeMillis   = 1   // a second from a challenge's block to the agent starting on it
	chainID     = "gpunet-bench-challenge"
	epoch       = 1_700_000_000_000 // unix ms of the first block
)

// simProvider is one simulated provider.
type simProvider struct {
	key   market.Key
	seq   uint64
	group int
	// slowdown draws how many times its claim's compute time one proof
	// takes.
	slowdown func() float64
	real     uint64 // its real rate in GOPS (overclaimers: claim / k)

	// The challenge in flight: its seed, the commitment, when the commit
	// is due (unix ms; 0: none, -1: never, it is past the late window).
	seed     ledger.Hash
	cm       prove.Commitment
	commitAt int64
	opened   bool

	rulings  uint64  // rulings so far
	caughtAt uint64  // ruling at which it was first counted at most its real rate
	busyMs   float64 // proving time at the real scale
}

type sim struct {
	o      Options
	params ledger.Params
	plan   challenge.Plan
	kv     statestore.Store
	l      ledger.Ledger
	height int64
	now    int64
	rng    *rand.Rand
	provs  []*simProvider
}

// simulate is part 2.
func simulate(ctx context.Context, o Options, slow [][]float64, res *Result) error {
	s := &sim{o: o, rng: rand.New(rand.NewPCG(o.Seed, 0x6368616c)), l: ledger.Ledger{Verify: func(ed25519.PublicKey, []byte, []byte) bool { return true }}}
	p := ledger.DefaultParams()
	realPlan, err := challenge.NewPlan(simClaim, p.HWParams())
	if err != nil {
		return err
	}
	res.RealBusyMs = realPlan.BusyMillis
	p.HWTargetMillis /= scale
	p.HWAllowanceMillis /= scale
	// hw_open_millis stays (its least is a second): the simulated agents
	// open in the block after the randomness, as real ones do.
	p.LivenessRatePPM = 0 // providers stay online; liveness is not what is measured
	p.MinFee = 0
	s.params = p
	if s.plan, err = challenge.NewPlan(simClaim, p.HWParams()); err != nil {
		return err
	}
	if s.kv, err = statestore.Open(statestore.BTree); err != nil {
		return err
	}
	defer s.kv.Close()

	draw := func(xs []float64) func() float64 {
		return func() float64 { return xs[s.rng.IntN(len(xs))] * (0.9 + 0.2*s.rng.Float64()) }
	}
	add := func(g Group, slowdown func() float64, real uint64) {
		res.Groups = append(res.Groups, g)
		keys := market.Keys("challenge/"+g.Name, g.Providers)
		for i := range keys {
			s.provs = append(s.provs, &simProvider{key: keys[i], group: len(res.Groups) - 1, slowdown: slowdown, real: real})
		}
	}
	for i, perCore := range append([]int{0}, o.Loads...) {
		name := "honest, idle"
		if perCore > 0 {
			name = fmt.Sprintf("honest, load %dx the cores", perCore)
		}
		add(Group{Name: name, Honest: true, PerCore: perCore, Providers: o.PerGroup}, draw(slow[i]), simClaim)
	}
	for _, k := range o.Overclaims {
		idle := draw(slow[0])
		add(Group{Name: fmt.Sprintf("overclaims %dx, idle", k), Factor: k, Providers: o.PerGroup},
			func() float64 { return float64(k) * idle() }, simClaim/uint64(k))
	}
	if err := s.genesis(); err != nil {
		return err
	}
	blocks := o.Hours * 3_600_000 / scale / blockMillis
	progressf(o, "simulating %d hours (%d blocks) of %d providers through the ledger", o.Hours, blocks, len(s.provs))
	for range blocks {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.step(); err != nil {
			return err
		}
	}
	res.Blocks = blocks
	return s.tally(res)
}

// genesis registers and stakes every provider (CPU-only, claiming
// simClaim) in the first block.
func (s *sim) genesis() error {
	g := ledger.Genesis{Params: s.params}
	for _, p := range s.provs {
		g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: p.key.Addr, Balance: 1 << 40})
	}
	changes, _, err := s.l.InitGenesis(ledger.NewMemKV(), chainID, g)
	if err == nil {
		err = s.kv.Apply(changes)
	}
	if err != nil {
		return err
	}
	var txs []market.Tx
	for i, p := range s.provs {
		info := ledger.ProviderInfo{
			Inventory: ledger.Inventory{CPUCores: 8, CPUModel: "Sim CPU", RAM: 32 << 30, Disk: 500 << 30, OS: "linux", Arch: "amd64"},
			Measured:  ledger.Measured{Int8GOPS: simClaim, BandwidthMBs: 20_000, Device: "cpu"},
			Region:    market.Regions[i%len(market.Regions)], Executors: []string{"wasm"}, WasmEngine: market.WasmEngine, MaxJobs: 4,
			Asks:          []ledger.Ask{{Class: ledger.CPUClass, PricePerHour: 30_000}},
			EncryptionKey: market.AgeRecipient("challenge/" + strconv.Itoa(i)),
		}
		txs = append(txs, market.Tx{Key: &p.key, Seq: 0, Msg: &ledger.MsgRegisterProvider{ProviderInfo: info}},
			market.Tx{Key: &p.key, Seq: 1, Msg: &ledger.MsgStake{Amount: ledger.Amount(s.params.MinStakeCPU * 10)}})
		p.seq = 2
	}
	return s.apply(txs)
}

// apply signs txs and applies them as the next block; a refused tx is an
// error (every tx here is one an honest agent would send).
func (s *sim) apply(txs []market.Tx) error {
	raw, err := market.SignAll(chainID, txs)
	if err != nil {
		return err
	}
	s.height++
	s.now = epoch + s.height*blockMillis
	seed := sha256.Sum256(binary.BigEndian.AppendUint64([]byte("gpunet-bench/challenge/"), uint64(s.height)))
	b := s.l.BeginBlock(s.kv, ledger.BlockInfo{Height: s.height, Time: time.UnixMilli(s.now).UTC(), Seed: seed})
	for i, tx := range raw {
		if r := b.DeliverTx(tx); r.Err != nil {
			return fmt.Errorf("block %d: %T refused: %w", s.height, txs[i].Msg, r.Err)
		}
	}
	ch, _, err := b.End()
	if err != nil {
		return fmt.Errorf("block %d: %w", s.height, err)
	}
	return s.kv.Apply(ch)
}

// step makes one block: each provider does what its agent would about its
// challenge by the next block's time.
func (s *sim) step() error {
	next := s.now + blockMillis
	var txs []market.Tx
	for _, p := range s.provs {
		r, _, err := ledger.GetProvider(s.kv, p.key.Addr)
		if err != nil {
			return err
		}
		s.observe(p, r)
		c := r.HWChallenge
		if c == nil {
			continue
		}
		if c.Seed != p.seed {
			if err := s.start(p, c); err != nil {
				return err
			}
		}
		switch {
		case c.Root == nil && p.commitAt > 0 && p.commitAt <= next:
			txs = append(txs, market.Tx{Key: &p.key, Seq: p.seq, Msg: &ledger.MsgChallengeCommit{Root: p.cm.Root()}})
			p.seq++
			p.commitAt = 0
		case c.Randomness != nil && !p.opened:
			op, err := p.cm.Open(context.Background(), *c.Randomness)
			if err != nil {
				return err
			}
			b, err := op.MarshalBinary()
			if err != nil {
				return err
			}
			txs = append(txs, market.Tx{Key: &p.key, Seq: p.seq, Msg: &ledger.MsgChallengeOpen{Opening: b}})
			p.seq++
			p.opened = true
		}
	}
	return s.apply(txs)
}

// start proves p's new challenge (for real: the ledger checks the
// opening) and sets when its commit is due: a second to see it, then the
// plan's compute time times the slowdown drawn for it.
func (s *sim) start(p *simProvider, c *ledger.HardwareChallenge) error {
	if p.cm != nil {
		p.cm.Close()
	}
	cm, err := (&prove.CPU{}).Commit(context.Background(), c.Challenge())
	if err != nil {
		return err
	}
	plan, err := challenge.NewPlan(c.ClaimedGOPS, s.params.HWParams())
	if err != nil {
		return err
	}
	f := p.slowdown()
	took := int64(f*float64(plan.ComputeMillis)) + 1
	p.seed, p.cm, p.opened = c.Seed, cm, false
	p.commitAt = c.IssuedAt + seeMillis + took
	if p.commitAt > c.LateBy {
		p.commitAt = -1 // still proving when the window closes: a miss
	}
	p.busyMs += f * float64(plan.ComputeMillis) * scale
	return nil
}

// observe counts p's rulings as its record shows them, and notes the
// first one after which it counts at no more than its real rate.
func (s *sim) observe(p *simProvider, r *ledger.Provider) {
	ch := r.Challenges
	n := ch.Passed + ch.Late + ch.Missed + ch.Failed
	if n == p.rulings {
		return
	}
	p.rulings = n
	if p.caughtAt == 0 && r.EffectiveGOPS() <= p.real && r.EffectiveGOPS() < simClaim {
		p.caughtAt = n
	}
}

// tally fills res.Groups from the final records.
func (s *sim) tally(res *Result) error {
	hours := float64(s.o.Hours)
	for _, p := range s.provs {
		r, _, err := ledger.GetProvider(s.kv, p.key.Addr)
		if err != nil {
			return err
		}
		s.observe(p, r)
		g := &res.Groups[p.group]
		ch := r.Challenges
		g.Rulings.Passed += ch.Passed
		g.Rulings.Late += ch.Late
		g.Rulings.Missed += ch.Missed
		g.Rulings.Failed += ch.Failed
		if r.Slashed > 0 {
			g.Slashed++
		}
		g.SlashesPerHour += float64(ch.Failed) / hours / float64(g.Providers)
		g.ChallengesPerHour += float64(p.rulings) / hours / float64(g.Providers)
		g.ProvingSPerHour += p.busyMs / 1000 / hours / float64(g.Providers)
		if !g.Honest {
			switch {
			case p.caughtAt == 0:
				g.Uncaught++
			case p.caughtAt == 1:
				g.CaughtFirst++
			}
			g.CaughtBy = max(g.CaughtBy, int(p.caughtAt))
		}
	}
	return nil
}
