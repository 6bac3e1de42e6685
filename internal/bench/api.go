package bench

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"sync"
	"time"

	cmtcfg "github.com/cometbft/cometbft/config"
	sm "github.com/cometbft/cometbft/state"
	cmttypes "github.com/cometbft/cometbft/types"

	"github.com/gpunet/gpunet/internal/abciapp"
	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/daemon"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/validator"
)

// The API benchmark (`gpunet bench api`) measures a node's HTTP API reads
// with a large state while its validator produces blocks.
//
// Setup (not timed): a state of --providers providers (the scheduler
// benchmark's market, registered and staked) and --jobs jobs is built
// through the ledger itself, block by block, into the Pebble store of a
// fresh validator home: jobs run their whole life in txs (submitted, placed
// by the scheduler, key granted, started, result committed: succeeded or
// failed), some stay running, some stay queued (priced below every ask),
// and the rest are cancelled while queued. Signatures are not verified
// while building (Ledger.Verify accepts all), as in the scheduler
// benchmark. The home's genesis then starts the chain at the next height
// with that app hash (CometBFT's initial_height), so the real node
// (daemon.Start: CometBFT, the API, netstats, the dashboard) resumes on the
// built state and produces blocks; a background load of signed transfers
// keeps them non-empty.
//
// Load: an open-loop generator sends --rate single-object reads a second
// (a job, a provider, an account, a balance, a job's timeline) and
// --list-rate paginated list reads a second (newest jobs, jobs by owner and
// by state, providers by address, an offers query, blocks, txs, events),
// for --duration. A request's latency runs from the moment it was due, so
// a backlog counts against the API. Every answer must be 200.

// Defaults of APIOptions.
const (
	DefaultAPIProviders = 100_000
	DefaultAPIJobs      = 1_000_000
	DefaultAPIRate      = 1000
	DefaultAPIListRate  = 100
	DefaultAPIDuration  = 30 * time.Second
	DefaultAPIBlockTime = time.Second
	DefaultAPITxRate    = 50
	DefaultAPIConsumers = 1000

	apiChainID = "gpunet-bench-api"
)

// APITarget is the API's acceptance target (the figures).
var APITarget = APITargetFigures{Providers: 100_000, Jobs: 1_000_000, Rate: 1000, SingleP99Ms: 20, ListP99Ms: 50}

// APITargetFigures are the target's state size, rate and p99s.
type APITargetFigures struct {
	Providers   int     `json:"providers"`
	Jobs        int     `json:"jobs"`
	Rate        int     `json:"rate"`
	SingleP99Ms float64 `json:"single_p99_ms"`
	ListP99Ms   float64 `json:"list_p99_ms"`
}

// APIOptions tune an API run. Zero fields take the defaults.
type APIOptions struct {
	Providers int
	Jobs      int
	Consumers int
	// Rate is single-object reads per second; ListRate paginated list
	// reads per second, sent at the same time.
	Rate     int
	ListRate int
	Duration time.Duration
	// BlockTime is the validator's pause after each block; TxRate the
	// signed transfers a second sent to it meanwhile.
	BlockTime time.Duration
	TxRate    int
	Seed      uint64
	// Home, if set, keeps the node's home under it; else a temp dir,
	// removed after.
	Home string
	// StateDir, if set, keeps each built state there (by size and seed)
	// and later runs of the same size start from a copy of it instead of
	// building it again.
	StateDir string
	Progress io.Writer
	// CPUProfile, if set, receives a CPU profile (pprof) of the process
	// during the load: the node, its block production and the load
	// generator together.
	CPUProfile io.Writer
	// Trace, if set, receives an execution trace (runtime/trace) of the
	// process during the load.
	Trace io.Writer
	// AllocsBase and Allocs, if set, receive the process's allocation
	// profile (pprof) at the start and the end of the load: their
	// difference is the load's.
	AllocsBase, Allocs io.Writer
}

// Validate fills in defaults and checks the rest.
func (o *APIOptions) Validate() error {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.Providers, DefaultAPIProviders)
	def(&o.Jobs, DefaultAPIJobs)
	def(&o.Consumers, DefaultAPIConsumers)
	def(&o.Rate, DefaultAPIRate)
	def(&o.ListRate, DefaultAPIListRate)
	def(&o.TxRate, DefaultAPITxRate)
	if o.Duration == 0 {
		o.Duration = DefaultAPIDuration
	}
	if o.BlockTime == 0 {
		o.BlockTime = DefaultAPIBlockTime
	}
	if o.Seed == 0 {
		o.Seed = DefaultSchedSeed
	}
	switch {
	case o.Providers < 10 || o.Providers > 1_000_000:
		return fmt.Errorf("providers %d out of range [10, 1000000]", o.Providers)
	case o.Jobs < 100 || o.Jobs > 10_000_000:
		return fmt.Errorf("jobs %d out of range [100, 10000000]", o.Jobs)
	case o.Consumers < 1 || o.Consumers > 100_000:
		return fmt.Errorf("consumers %d out of range [1, 100000]", o.Consumers)
	case o.Rate < 1 || o.Rate > 100_000 || o.ListRate < 0 || o.ListRate > 10_000:
		return fmt.Errorf("rate %d or list rate %d out of range", o.Rate, o.ListRate)
	case o.TxRate < 0 || o.TxRate > 10_000:
		return fmt.Errorf("tx rate %d out of range [0, 10000]", o.TxRate)
	case o.Duration < time.Second || o.Duration > time.Hour:
		return fmt.Errorf("duration %s out of range [1s, 1h]", o.Duration)
	case o.BlockTime < 10*time.Millisecond || o.BlockTime > time.Minute:
		return fmt.Errorf("block time %s out of range [10ms, 1m]", o.BlockTime)
	}
	return nil
}

// APIResult is the outcome of an API run.
type APIResult struct {
	Date       time.Time      `json:"date"`
	GOMAXPROCS int            `json:"gomaxprocs"`
	Providers  int            `json:"providers"`
	Jobs       int            `json:"jobs"`
	JobStates  map[string]int `json:"job_states"`
	// SetupSeconds is building the state; StateBlocks its blocks and
	// StateTxs their txs.
	SetupSeconds float64 `json:"setup_s"`
	StateBlocks  int     `json:"state_blocks"`
	StateTxs     int     `json:"state_txs"`
	// NodeStartSeconds is the node's start on the built state, and
	// StatsLoadSeconds netstats reading it (before the load starts).
	NodeStartSeconds float64 `json:"node_start_s"`
	StatsLoadSeconds float64 `json:"stats_load_s"`
	Rate             int     `json:"rate"`
	ListRate         int     `json:"list_rate"`
	DurationSeconds  float64 `json:"duration_s"`
	TxRate           int     `json:"tx_rate"`
	// Blocks the validator produced during the load, and the txs they
	// held.
	Blocks    int           `json:"blocks"`
	BlockTxs  int           `json:"block_txs"`
	Single    APIClass      `json:"single"`
	List      APIClass      `json:"list"`
	Endpoints []APIEndpoint `json:"endpoints"`
	// ErrorSamples are the first failed requests, if any.
	ErrorSamples []string `json:"error_samples,omitempty"`
	Target       APITargetFigures
	MeetsSingle  *bool `json:"meets_single_p99,omitempty"`
	MeetsList    *bool `json:"meets_list_p99,omitempty"`
}

// APIClass is the latency of one class of requests.
type APIClass struct {
	Requests int     `json:"requests"`
	Errors   int     `json:"errors"`
	RatePerS float64 `json:"achieved_per_s"`
	P50Ms    float64 `json:"p50_ms"`
	P90Ms    float64 `json:"p90_ms"`
	P99Ms    float64 `json:"p99_ms"`
	MaxMs    float64 `json:"max_ms"`
}

// APIEndpoint is the latency of one kind of request.
type APIEndpoint struct {
	Name  string  `json:"name"`
	List  bool    `json:"list"`
	N     int     `json:"requests"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

// RunAPI builds the state, starts the node on it and measures the API.
func RunAPI(ctx context.Context, o APIOptions) (*APIResult, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	progress := func(format string, args ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, format+"\n", args...)
		}
	}
	root := o.Home
	if root == "" {
		dir, err := os.MkdirTemp("", "gpunet-bench-api-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		root = dir
	}
	home := filepath.Join(root, fmt.Sprintf("bench-api-%d", time.Now().UnixNano()))
	res := &APIResult{Date: time.Now().UTC().Truncate(time.Second), GOMAXPROCS: runtime.GOMAXPROCS(0), Providers: o.Providers, Jobs: o.Jobs,
		Rate: o.Rate, ListRate: o.ListRate, DurationSeconds: o.Duration.Seconds(), TxRate: o.TxRate, Target: APITarget}

	senders := benchKeys("api-sender", 64)
	params := ledger.DefaultParams()
	params.LivenessRatePPM = 0 // no agents run to answer challenges
	params.HWRatePPM = 0
	t0 := time.Now()
	var st *apiState
	cached := ""
	if o.StateDir != "" {
		fp, err := stateFingerprint(ctx, o.Seed, params, senders)
		if err != nil {
			return nil, fmt.Errorf("fingerprint of the state's encoding: %w", err)
		}
		cached = filepath.Join(o.StateDir, fmt.Sprintf("api-state-%dp-%dj-%dc-seed%d-%s", o.Providers, o.Jobs, o.Consumers, o.Seed, fp))
	}
	if meta, err := os.ReadFile(filepath.Join(cached, "built.json")); cached != "" && err == nil {
		progress("copying the state built earlier in %s…", cached)
		st = &apiState{}
		if err := json.Unmarshal(meta, st); err != nil {
			return nil, fmt.Errorf("%s: %w", cached, err)
		}
		if err := copyDir(filepath.Join(cached, "home"), home); err != nil {
			return nil, err
		}
		st.providers, st.consumers = benchKeys("provider", o.Providers), benchKeys("consumer", o.Consumers)
	} else {
		if _, err := validator.Init(home, validator.InitOptions{ChainID: apiChainID, Validators: 1, Genesis: ledger.Genesis{Params: params}, BlockTime: o.BlockTime}); err != nil {
			return nil, err
		}
		progress("building the state: %d providers, %d jobs…", o.Providers, o.Jobs)
		if st, err = buildAPIState(ctx, filepath.Join(home, "data", "app"), o, params, senders, time.Now().UTC().Add(-time.Minute), progress); err != nil {
			return nil, fmt.Errorf("build the state: %w", err)
		}
		res.SetupSeconds = time.Since(t0).Seconds()
		if cached != "" {
			progress("keeping a copy of the state in %s", cached)
			if err := copyDir(home, filepath.Join(cached, "home")); err != nil {
				return nil, err
			}
			meta, _ := json.Marshal(st)
			if err := os.WriteFile(filepath.Join(cached, "built.json"), meta, 0o644); err != nil {
				return nil, err
			}
		}
	}
	res.StateBlocks, res.StateTxs, res.JobStates = int(st.height), st.txs, st.states
	progress("state built in %.0fs: %d blocks, %d txs, jobs %v", res.SetupSeconds, st.height, st.txs, st.states)

	// The chain resumes on it: the next height, its app hash, now.
	gen, err := cmttypes.GenesisDocFromFile(filepath.Join(home, "config", "genesis.json"))
	if err != nil {
		return nil, err
	}
	gen.InitialHeight, gen.AppHash = st.height+1, st.appHash
	gen.GenesisTime = time.Now().UTC().Truncate(time.Millisecond)
	if err := gen.ValidateAndComplete(); err != nil {
		return nil, err
	}
	if err := gen.SaveAs(filepath.Join(home, "config", "genesis.json")); err != nil {
		return nil, err
	}
	if err := bootstrapConsensusState(home, gen); err != nil {
		return nil, err
	}
	t0 = time.Now()
	d, err := daemon.Start(ctx, home, daemon.Options{APIAddr: "127.0.0.1:0"})
	if err != nil {
		return nil, fmt.Errorf("start the node on the built state: %w", err)
	}
	defer d.Stop()
	res.NodeStartSeconds = time.Since(t0).Seconds()
	for !d.Stats.Ready() {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	res.StatsLoadSeconds = time.Since(t0).Seconds() - res.NodeStartSeconds
	progress("node started in %.1fs, its stats loaded in %.1fs; measuring for %s…", res.NodeStartSeconds, res.StatsLoadSeconds, o.Duration)

	startHeight := d.Node.Height()
	lctx, stopLoad := context.WithCancel(ctx)
	var txWG sync.WaitGroup
	if o.TxRate > 0 {
		txWG.Go(func() { sendTransfers(lctx, d.APIURL, senders, o.TxRate) })
	}
	if o.CPUProfile != nil {
		if err := pprof.StartCPUProfile(o.CPUProfile); err != nil {
			stopLoad()
			return nil, err
		}
	}
	if o.Trace != nil {
		if err := trace.Start(o.Trace); err != nil {
			stopLoad()
			return nil, err
		}
	}
	if o.AllocsBase != nil {
		pprof.Lookup("allocs").WriteTo(o.AllocsBase, 0)
	}
	err = measureAPI(ctx, d.APIURL, o, st, res)
	if o.Allocs != nil {
		pprof.Lookup("allocs").WriteTo(o.Allocs, 0)
	}
	if o.Trace != nil {
		trace.Stop()
	}
	if o.CPUProfile != nil {
		pprof.StopCPUProfile()
	}
	if err != nil {
		stopLoad()
		return nil, err
	}
	stopLoad()
	txWG.Wait()
	end := d.Node.Height()
	res.Blocks = int(end - startHeight)
	for h := startHeight + 1; h <= end; h++ {
		if b, err := d.Node.Block(ctx, h); err == nil && b != nil {
			res.BlockTxs += len(b.Txs)
		}
	}
	single, list := res.Single.P99Ms <= APITarget.SingleP99Ms, res.List.P99Ms <= APITarget.ListP99Ms
	if o.Providers >= APITarget.Providers && o.Jobs >= APITarget.Jobs && o.Rate >= APITarget.Rate {
		res.MeetsSingle, res.MeetsList = &single, &list
	}
	return res, nil
}

// bootstrapConsensusState saves CometBFT's state at genesis (height 0 of
// a chain whose first block is gen.InitialHeight, over the app hash the
// built state has), as state sync would. Without it, CometBFT's handshake
// finds an app already past genesis, skips InitChain, and never saves a
// state to start from.
func bootstrapConsensusState(home string, gen *cmttypes.GenesisDoc) error {
	db, err := validator.QuietDBProvider(&cmtcfg.DBContext{ID: "state", Config: cmtcfg.DefaultConfig().SetRoot(home)})
	if err != nil {
		return err
	}
	defer db.Close()
	st, err := sm.MakeGenesisState(gen)
	if err != nil {
		return err
	}
	return sm.NewStore(db, sm.StoreOptions{}).Bootstrap(st)
}

// apiState is what the built state holds, for the load to ask about.
type apiState struct {
	height    int64
	appHash   []byte
	txs       int
	states    map[string]int
	providers []benchKey
	consumers []benchKey
	lastJob   uint64
}

// MarshalJSON keeps what a later run needs of a kept state (the keys are
// derived again).
func (s *apiState) MarshalJSON() ([]byte, error) {
	return json.Marshal(apiStateJSON{s.height, s.appHash, s.txs, s.states, s.lastJob})
}

// UnmarshalJSON implements json.Unmarshaler.
func (s *apiState) UnmarshalJSON(b []byte) error {
	var j apiStateJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	s.height, s.appHash, s.txs, s.states, s.lastJob = j.Height, j.AppHash, j.Txs, j.States, j.LastJob
	return nil
}

type apiStateJSON struct {
	Height  int64          `json:"height"`
	AppHash []byte         `json:"app_hash"`
	Txs     int            `json:"txs"`
	States  map[string]int `json:"states"`
	LastJob uint64         `json:"last_job"`
}

// copyDir copies the regular files under src to dst.
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		if !e.Type().IsRegular() {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		fi, err := in.Stat()
		if err != nil {
			return err
		}
		out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fi.Mode().Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

// apiBuilder applies blocks of unsigned txs (Verify accepts all) to the
// node's Pebble store.
type apiBuilder struct {
	l      ledger.Ledger
	kv     *pebbleStore
	height int64
	base   time.Time
	txs    int
	seq    map[address.Address]uint64
}

func (b *apiBuilder) tx(k *benchKey, msg ledger.Msg) []byte {
	seq := b.seq[k.addr]
	b.seq[k.addr] = seq + 1
	t := &ledger.Tx{ChainID: apiChainID, Sequence: seq, Fee: rawTxFee, PubKey: k.priv.Public().(ed25519.PublicKey), Msg: msg, Signature: make([]byte, ed25519.SignatureSize)}
	raw, err := t.Encode()
	if err != nil {
		panic(err) // unreachable: the tx is well formed
	}
	return raw
}

// apply runs txs as the next block and returns the events of its txs and
// of the block.
func (b *apiBuilder) apply(txs [][]byte) ([]ledger.Event, error) {
	b.height++
	seed := sha256.Sum256(binary.BigEndian.AppendUint64([]byte("gpunet-bench/api/"), uint64(b.height)))
	// Blocks 10 ms apart, ending before the live chain's genesis time.
	blk := b.l.BeginBlock(b.kv, ledger.BlockInfo{Height: b.height, Time: b.base.Add(time.Duration(b.height) * 10 * time.Millisecond), Seed: seed})
	var evs []ledger.Event
	for i, tx := range txs {
		r := blk.DeliverTx(tx)
		if r.Err != nil {
			return nil, fmt.Errorf("block %d tx %d: %w", b.height, i, r.Err)
		}
		evs = append(evs, r.Events...)
	}
	changes, _, err := blk.End()
	if err != nil {
		return nil, fmt.Errorf("block %d: %w", b.height, err)
	}
	b.txs += len(txs)
	return append(evs, blk.Events()...), b.kv.Apply(changes)
}

func attr(e ledger.Event, key string) string {
	for _, a := range e.Attrs {
		if a.Key == key {
			return a.Value
		}
	}
	return ""
}

// stateFingerprint names the code that builds a state: the app hash of a
// tiny state built the same way at a fixed time. A change to the ledger's
// encoding, its key layout, its rules or this builder changes it, so a
// state kept by older code is never reused: it would not be what this code
// builds, and might not even decode.
func stateFingerprint(ctx context.Context, seed uint64, params ledger.Params, senders []benchKey) (string, error) {
	dir, err := os.MkdirTemp("", "gpunet-bench-api-fp-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	o := APIOptions{Providers: 20, Jobs: 200, Consumers: 4, Seed: seed}
	st, err := buildAPIState(ctx, dir, o, params, senders, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), func(string, ...any) {})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(st.appHash[:6]), nil
}

// buildAPIState builds the state in dir, its blocks 10 ms apart from base.
func buildAPIState(ctx context.Context, dir string, o APIOptions, params ledger.Params, senders []benchKey, base time.Time, progress func(string, ...any)) (*apiState, error) {
	db, err := abciapp.OpenPebble(dir, nil, 512<<20)
	if err != nil {
		return nil, err
	}
	kv, err := newPebbleStore(db)
	if err != nil {
		return nil, err
	}
	b := &apiBuilder{kv: kv, l: ledger.Ledger{Verify: func(ed25519.PublicKey, []byte, []byte) bool { return true }},
		seq: map[address.Address]uint64{}, base: base}
	closed := false
	defer func() {
		if !closed {
			b.kv.Close()
		}
	}()
	st := &apiState{providers: benchKeys("provider", o.Providers), consumers: benchKeys("consumer", o.Consumers), states: map[string]int{}}
	g := ledger.Genesis{Params: params}
	for _, k := range st.providers {
		g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: k.addr, Balance: 10_000_000_000})
	}
	for _, k := range st.consumers {
		g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: k.addr, Balance: 1 << 50})
	}
	for _, k := range senders {
		g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: k.addr, Balance: 1 << 40})
	}
	changes, _, err := b.l.InitGenesis(ledger.NewMemKV(), apiChainID, g)
	if err != nil {
		return nil, err
	}
	if err := b.kv.Apply(changes); err != nil {
		return nil, err
	}
	provIdx := make(map[address.Address]int, len(st.providers))
	for i, k := range st.providers {
		provIdx[k.addr] = i
	}
	consIdx := make(map[string]int, len(st.consumers))
	for i, k := range st.consumers {
		consIdx[k.addr.String()] = i
	}

	// Providers.
	market := schedProviders(o.Seed, o.Providers, params)
	for from := 0; from < o.Providers; from += setupBlockProvider {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var txs [][]byte
		for i := from; i < min(from+setupBlockProvider, o.Providers); i++ {
			txs = append(txs, b.tx(&st.providers[i], &ledger.MsgRegisterProvider{ProviderInfo: market[i].info}),
				b.tx(&st.providers[i], &ledger.MsgStake{Amount: ledger.Amount(market[i].stake)}))
		}
		if _, err := b.apply(txs); err != nil {
			return nil, err
		}
	}
	progress("  %d providers registered and staked (%d blocks)", o.Providers, b.height)

	// Jobs through their life: a tenth finish (one in ten of those fail),
	// one in fifty stay running; three in a hundred stay queued; the rest
	// are cancelled while queued. (Placing a job costs the scheduler
	// about 2 ms at 100k providers, so the placed share sets the build
	// time.)
	finish, running, queued := o.Jobs/10, o.Jobs/50, o.Jobs*3/100
	specs := schedJobs(o.Seed, 3, finish+running)
	for i := range specs {
		// Results are committed in the clear below: unchecked jobs. (The
		// verification protocol is gpunet bench verify's subject.)
		specs[i].Verification = "none"
	}
	submitted, owner := 0, 0
	nextOwner := func() *benchKey {
		k := &st.consumers[owner%len(st.consumers)]
		owner++
		return k
	}
	type placed struct {
		id    uint64
		owner *benchKey
		provs []*benchKey
		fail  bool
	}
	ownerOf := map[uint64]*benchKey{}
	var grants, starts, commits []placed
	finished, run := 0, 0
	const round = 250
	spec := 0
	for spec < len(specs) || len(grants)+len(starts)+len(commits) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var txs [][]byte
		for _, p := range commits {
			for _, pk := range p.provs {
				res := ledger.JobResult{ManifestHash: ledger.Hash(sha256.Sum256([]byte(strconv.FormatUint(p.id, 10)))),
					OutputBlob: "sha256:" + strings.Repeat("ab", 32), MeteredSeconds: 1 + p.id%600}
				if p.fail {
					res.Failed, res.ExitCode, res.Reason = true, 1, "exited 1"
				}
				txs = append(txs, b.tx(pk, &ledger.MsgCommitResult{JobID: p.id, MeteredSeconds: res.MeteredSeconds, Result: &res}))
			}
		}
		commits = commits[:0]
		for _, p := range starts {
			for _, pk := range p.provs {
				txs = append(txs, b.tx(pk, &ledger.MsgStartJob{JobID: p.id}))
			}
			if finished < finish {
				p.fail = len(p.provs) == 1 && finished%10 == 9
				finished++
				commits = append(commits, p)
			} else {
				run++
			}
		}
		starts = starts[:0]
		for _, p := range grants {
			var gs []ledger.Grant
			for _, pk := range p.provs {
				gs = append(gs, ledger.Grant{Provider: pk.addr, WrappedKey: []byte("wrapped job key")})
			}
			txs = append(txs, b.tx(p.owner, &ledger.MsgGrantKey{JobID: p.id, Grants: gs}))
			starts = append(starts, p)
		}
		grants = grants[:0]
		for n := 0; n < round && spec < len(specs); n, spec = n+1, spec+1 {
			s := specs[spec]
			s.TimeoutSeconds = 6 * 3600 // those left running still run when the load runs
			txs = append(txs, b.tx(nextOwner(), &ledger.MsgSubmitJob{Spec: s, ConsumerKey: ageRecipient("consumer")}))
		}
		evs, err := b.apply(txs)
		if err != nil {
			return nil, err
		}
		var unplaced []uint64
		assigned := map[uint64]bool{}
		for _, e := range evs {
			id, _ := strconv.ParseUint(attr(e, "job"), 10, 64)
			switch e.Type {
			case "job_submitted":
				submitted++
				ownerOf[id] = &st.consumers[consIdx[attr(e, "owner")]]
				unplaced = append(unplaced, id)
			case "job_assigned":
				assigned[id] = true
				p := placed{id: id, owner: ownerOf[id]}
				for _, a := range strings.Split(attr(e, "providers"), ",") {
					pa, err := address.Parse(a)
					if err != nil {
						return nil, fmt.Errorf("job %d assigned to %q: %w", id, a, err)
					}
					p.provs = append(p.provs, &st.providers[provIdx[pa]])
				}
				grants = append(grants, p)
			}
		}
		// Jobs nothing fits now are cancelled (they count as cancelled).
		var cancels [][]byte
		for _, id := range unplaced {
			if !assigned[id] {
				cancels = append(cancels, b.tx(ownerOf[id], &ledger.MsgCancelJob{JobID: id}))
			}
		}
		if len(cancels) > 0 {
			if _, err := b.apply(cancels); err != nil {
				return nil, err
			}
		}
		if b.height%50 == 0 {
			progress("  block %d: %d jobs submitted, %d finished, %d running", b.height, submitted, finished, run)
		}
	}
	progress("  %d jobs through their life (%d blocks)", submitted, b.height)

	// Queued jobs (priced below every ask), then cancelled ones to make up
	// the count.
	cheap := func(i int) ledger.JobSpec {
		s := specs[i%len(specs)]
		s.Executor, s.Module, s.Image, s.GPUCount, s.GPUModels, s.MinVRAM, s.MinComputeCap = "wasm", "sha256:"+fmt.Sprintf("%064x", i), "", 0, nil, 0, ""
		s.MaxPricePerHour, s.Verification = 1, "spot"
		return s
	}
	cancelTotal := o.Jobs - submitted - queued
	const batch = 2000
	var pending []uint64
	for i := 0; i < cancelTotal || len(pending) > 0; {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var txs [][]byte
		for _, id := range pending {
			txs = append(txs, b.tx(ownerOf[id], &ledger.MsgCancelJob{JobID: id}))
		}
		pending = pending[:0]
		for n := 0; n < batch && i < cancelTotal; n, i = n+1, i+1 {
			txs = append(txs, b.tx(nextOwner(), &ledger.MsgSubmitJob{Spec: cheap(i), ConsumerKey: ageRecipient("consumer")}))
		}
		evs, err := b.apply(txs)
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			if e.Type == "job_submitted" {
				id, _ := strconv.ParseUint(attr(e, "job"), 10, 64)
				ownerOf[id] = &st.consumers[consIdx[attr(e, "owner")]]
				pending = append(pending, id)
				submitted++
			}
		}
		if b.height%20 == 0 {
			progress("  block %d: %d jobs submitted", b.height, submitted)
		}
	}
	for i := 0; i < queued; i += batch {
		var txs [][]byte
		for n := i; n < min(i+batch, queued); n++ {
			txs = append(txs, b.tx(nextOwner(), &ledger.MsgSubmitJob{Spec: cheap(n), ConsumerKey: ageRecipient("consumer")}))
		}
		if _, err := b.apply(txs); err != nil {
			return nil, err
		}
	}
	st.lastJob = ledger.LastJobID(b.kv)
	if err := ledger.JobsFrom(b.kv, 1, func(j *ledger.Job) bool { st.states[j.State]++; return true }); err != nil {
		return nil, err
	}
	st.height, st.txs = b.height, b.txs
	if st.appHash, err = ledger.AppHash(b.kv); err != nil {
		return nil, err
	}
	if err := db.Flush(); err != nil {
		return nil, err
	}
	closed = true
	return st, b.kv.Close()
}

// sendTransfers posts signed transfers at rate a second (without waiting
// for their blocks) until ctx ends.
func sendTransfers(ctx context.Context, api string, senders []benchKey, rate int) {
	cl := chainclient.New(api)
	seq := make([]uint64, len(senders))
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		k := i % len(senders)
		t := &ledger.Tx{ChainID: apiChainID, Sequence: seq[k], Fee: rawTxFee, Msg: &ledger.MsgSend{To: senders[(k+1)%len(senders)].addr, Amount: 1}}
		if t.Sign(senders[k].priv) != nil {
			continue
		}
		raw, err := t.Encode()
		if err != nil {
			continue
		}
		if _, err := cl.BroadcastTx(ctx, raw, false); err == nil {
			seq[k]++
		}
	}
}

// apiRequest is one kind of request of the load.
type apiRequest struct {
	name string
	list bool
	path func(r *rand.Rand) string
}

func apiRequests(st *apiState) []apiRequest {
	job := func(r *rand.Rand) uint64 { return 1 + r.Uint64N(st.lastJob) }
	prov := func(r *rand.Rand) string { return st.providers[r.IntN(len(st.providers))].addr.String() }
	cons := func(r *rand.Rand) string { return st.consumers[r.IntN(len(st.consumers))].addr.String() }
	return []apiRequest{
		{"GET /v1/jobs/{id}", false, func(r *rand.Rand) string { return fmt.Sprintf("/v1/jobs/%d", job(r)) }},
		{"GET /v1/providers/{addr}", false, func(r *rand.Rand) string { return "/v1/providers/" + prov(r) }},
		{"GET /v1/accounts/{addr}", false, func(r *rand.Rand) string { return "/v1/accounts/" + cons(r) }},
		{"GET /v1/accounts/{addr}/balance", false, func(r *rand.Rand) string { return "/v1/accounts/" + prov(r) + "/balance" }},
		{"GET /v1/jobs/{id}/timeline", false, func(r *rand.Rand) string { return fmt.Sprintf("/v1/jobs/%d/timeline", job(r)) }},

		{"GET /v1/jobs?limit=100", true, func(r *rand.Rand) string { return "/v1/jobs?limit=100" }},
		{"GET /v1/jobs?limit=100&cursor=ID", true, func(r *rand.Rand) string { return fmt.Sprintf("/v1/jobs?limit=100&cursor=%d", job(r)) }},
		{"GET /v1/jobs?owner=ADDR&limit=100", true, func(r *rand.Rand) string { return "/v1/jobs?limit=100&owner=" + cons(r) }},
		{"GET /v1/jobs?state=S&limit=100", true, func(r *rand.Rand) string {
			return "/v1/jobs?limit=100&state=" + []string{ledger.JobQueued, ledger.JobRunning, ledger.JobSucceeded, ledger.JobFailed, ledger.JobCancelled}[r.IntN(5)]
		}},
		{"GET /v1/providers?limit=100&cursor=ADDR", true, func(r *rand.Rand) string { return "/v1/providers?limit=100&cursor=" + prov(r) }},
		{"GET /v1/offers?q=…&sort=price&limit=100", true, func(r *rand.Rand) string {
			q := []string{"gpu=RTX_4090 region=eu", "cpu>=8 ram>=32", "count>=2 vram>=24", "region=us-east", ""}[r.IntN(5)]
			return "/v1/offers?limit=100&sort=price&q=" + strings.ReplaceAll(q, " ", "+")
		}},
		{"GET /v1/blocks?limit=100", true, func(r *rand.Rand) string { return "/v1/blocks?limit=100" }},
		{"GET /v1/txs?limit=100", true, func(r *rand.Rand) string { return "/v1/txs?limit=100" }},
		{"GET /v1/events?limit=100", true, func(r *rand.Rand) string { return "/v1/events?limit=100" }},
	}
}

// measureAPI runs the open-loop load and fills res's latencies.
func measureAPI(ctx context.Context, api string, o APIOptions, st *apiState, res *APIResult) error {
	reqs := apiRequests(st)
	var singles, lists []int
	for i, r := range reqs {
		if r.list {
			lists = append(lists, i)
		} else {
			singles = append(singles, i)
		}
	}
	type sample struct {
		kind int
		lat  time.Duration
		ok   bool
		err  string
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: time.Minute}, Timeout: 30 * time.Second}
	type job struct {
		kind int
		path string
		due  time.Time
	}
	work := make(chan job, 100_000)
	out := make(chan sample, 100_000)
	var wg sync.WaitGroup
	for range 256 {
		wg.Go(func() {
			for j := range work {
				ok, msg := false, ""
				resp, err := hc.Get(api + j.path)
				if err == nil {
					// Read the body without keeping it: io.ReadAll's
					// growing buffers were a fifth of the process's
					// allocations, and their GC cycles a part of the tail
					// measured.
					ok = resp.StatusCode == 200
					if !ok {
						b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
						msg = fmt.Sprintf("GET %s: %d %s", j.path, resp.StatusCode, b)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				} else {
					msg = err.Error()
				}
				out <- sample{j.kind, time.Since(j.due), ok, msg}
			}
		})
	}
	var samples []sample
	collected := make(chan struct{})
	go func() {
		for s := range out {
			samples = append(samples, s)
		}
		close(collected)
	}()
	// Two open-loop schedules, singles and lists, each sending at fixed
	// intervals from the start.
	start := time.Now()
	end := start.Add(o.Duration)
	// A schedule sends the requests that are due, then sleeps until the
	// next one is: sleeps overshoot, so sending one request per sleep
	// would fall behind the rate.
	schedule := func(rate int, kinds []int, seed uint64) {
		r := rand.New(rand.NewPCG(o.Seed, seed))
		interval := time.Second / time.Duration(rate)
		for i := 0; ; {
			now := time.Now()
			for ; ; i++ {
				due := start.Add(time.Duration(i) * interval)
				if due.After(end) || ctx.Err() != nil {
					return
				}
				if due.After(now) {
					time.Sleep(due.Sub(now))
					break
				}
				k := kinds[r.IntN(len(kinds))]
				work <- job{k, reqs[k].path(r), due}
			}
		}
	}
	var sched sync.WaitGroup
	sched.Go(func() { schedule(o.Rate, singles, 11) })
	if o.ListRate > 0 {
		sched.Go(func() { schedule(o.ListRate, lists, 12) })
	}
	sched.Wait()
	close(work)
	wg.Wait()
	close(out)
	<-collected
	if err := ctx.Err(); err != nil {
		return err
	}
	elapsed := time.Since(start).Seconds()
	var single, list []time.Duration
	byKind := make([][]time.Duration, len(reqs))
	for _, s := range samples {
		byKind[s.kind] = append(byKind[s.kind], s.lat)
		cls := &res.Single
		if reqs[s.kind].list {
			list = append(list, s.lat)
			cls = &res.List
		} else {
			single = append(single, s.lat)
		}
		cls.Requests++
		if !s.ok {
			cls.Errors++
			if len(res.ErrorSamples) < 5 {
				res.ErrorSamples = append(res.ErrorSamples, s.err)
			}
		}
	}
	fill := func(c *APIClass, ds []time.Duration) {
		c.RatePerS = float64(len(ds)) / elapsed
		c.P50Ms, c.P90Ms, c.P99Ms, c.MaxMs = ms(percentile(ds, 50)), ms(percentile(ds, 90)), ms(percentile(ds, 99)), ms(percentile(ds, 100))
	}
	fill(&res.Single, single)
	fill(&res.List, list)
	for i, ds := range byKind {
		if len(ds) == 0 {
			continue
		}
		res.Endpoints = append(res.Endpoints, APIEndpoint{Name: reqs[i].name, List: reqs[i].list, N: len(ds),
			P50Ms: ms(percentile(ds, 50)), P99Ms: ms(percentile(ds, 99)), MaxMs: ms(percentile(ds, 100))})
	}
	return nil
}
