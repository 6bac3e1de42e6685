package apibench

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpunet/gpunet/internal/abciapp"
	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/bench/market"
	"github.com/gpunet/gpunet/internal/bench/statestore"
	"github.com/gpunet/gpunet/internal/ledger"
)

// builder applies blocks of unsigned txs (Verify accepts all) to the
// node's Pebble store, and keeps what the state's jobs need to be taken
// through their life: their owners, and the next owner round-robin.
type builder struct {
	l      ledger.Ledger
	kv     *statestore.PebbleStore
	height int64
	base   time.Time
	txs    int
	seq    map[address.Address]uint64

	st      *apiState
	provIdx map[address.Address]int
	consIdx map[string]int
	ownerOf map[uint64]*market.Key
	// owner is the count of owners handed out (nextOwner); submitted the
	// jobs submitted so far.
	owner, submitted int
}

// buildState builds the state in dir, its blocks 10 ms apart from base.
func buildState(ctx context.Context, dir string, o Options, params ledger.Params, senders []market.Key, base time.Time, progress func(string, ...any)) (*apiState, error) {
	db, err := abciapp.OpenPebble(dir, nil, 512<<20)
	if err != nil {
		return nil, err
	}
	kv, err := statestore.NewPebble(db)
	if err != nil {
		return nil, err
	}
	b := &builder{kv: kv, l: ledger.Ledger{Verify: func(ed25519.PublicKey, []byte, []byte) bool { return true }},
		seq: map[address.Address]uint64{}, base: base, ownerOf: map[uint64]*market.Key{}}
	closed := false
	defer func() {
		if !closed {
			b.kv.Close()
		}
	}()
	b.st = &apiState{providers: market.Keys("provider", o.Providers), consumers: market.Keys("consumer", o.Consumers), states: map[string]int{}}
	if err := b.genesis(params, senders); err != nil {
		return nil, err
	}
	if err := b.registerProviders(ctx, o, params); err != nil {
		return nil, err
	}
	progress("  %d providers registered and staked (%d blocks)", o.Providers, b.height)

	// Jobs through their life: a tenth finish (one in ten of those fail),
	// one in fifty stay running; three in a hundred stay queued; the rest
	// are cancelled while queued. (Placing a job costs the scheduler
	// about 2 ms at 100k providers, so the placed share sets the build
	// time.)
	finish, running, queued := o.Jobs/10, o.Jobs/50, o.Jobs*3/100
	specs := market.Jobs(o.Seed, 3, finish+running)
	for i := range specs {
		// Results are committed in the clear below: unchecked jobs. (The
		// verification protocol is gpunet bench verify's subject.)
		specs[i].Verification = "none"
	}
	if err := b.runLives(ctx, specs, finish, progress); err != nil {
		return nil, err
	}
	progress("  %d jobs through their life (%d blocks)", b.submitted, b.height)
	if err := b.cancelled(ctx, specs, o.Jobs-b.submitted-queued, progress); err != nil {
		return nil, err
	}
	if err := b.queued(specs, queued); err != nil {
		return nil, err
	}

	st := b.st
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

// genesis funds the providers, the consumers and the transfers' senders.
func (b *builder) genesis(params ledger.Params, senders []market.Key) error {
	st := b.st
	g := ledger.Genesis{Params: params}
	for _, k := range st.providers {
		g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: k.Addr, Balance: 10_000_000_000})
	}
	for _, k := range st.consumers {
		g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: k.Addr, Balance: 1 << 50})
	}
	for _, k := range senders {
		g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: k.Addr, Balance: 1 << 40})
	}
	changes, _, err := b.l.InitGenesis(ledger.NewMemKV(), chainID, g)
	if err != nil {
		return err
	}
	if err := b.kv.Apply(changes); err != nil {
		return err
	}
	b.provIdx = make(map[address.Address]int, len(st.providers))
	for i, k := range st.providers {
		b.provIdx[k.Addr] = i
	}
	b.consIdx = make(map[string]int, len(st.consumers))
	for i, k := range st.consumers {
		b.consIdx[k.Addr.String()] = i
	}
	return nil
}

// registerProviders registers and stakes the market's providers.
func (b *builder) registerProviders(ctx context.Context, o Options, params ledger.Params) error {
	provs := market.Providers(o.Seed, o.Providers, params)
	for from := 0; from < o.Providers; from += market.ProvidersPerBlock {
		if err := ctx.Err(); err != nil {
			return err
		}
		var txs [][]byte
		for i := from; i < min(from+market.ProvidersPerBlock, o.Providers); i++ {
			txs = append(txs, b.tx(&b.st.providers[i], &ledger.MsgRegisterProvider{ProviderInfo: provs[i].Info}),
				b.tx(&b.st.providers[i], &ledger.MsgStake{Amount: ledger.Amount(provs[i].Stake)}))
		}
		if _, err := b.apply(txs); err != nil {
			return err
		}
	}
	return nil
}

// nextOwner hands out the consumers round-robin.
func (b *builder) nextOwner() *market.Key {
	k := &b.st.consumers[b.owner%len(b.st.consumers)]
	b.owner++
	return k
}

// tx encodes msg from k with k's next sequence, unsigned.
func (b *builder) tx(k *market.Key, msg ledger.Msg) []byte {
	seq := b.seq[k.Addr]
	b.seq[k.Addr] = seq + 1
	t := &ledger.Tx{ChainID: chainID, Sequence: seq, Fee: market.TxFee, PubKey: k.Priv.Public().(ed25519.PublicKey), Msg: msg, Signature: make([]byte, ed25519.SignatureSize)}
	raw, err := t.Encode()
	if err != nil {
		panic(err) // unreachable: the tx is well formed
	}
	return raw
}

// apply runs txs as the next block and returns the events of its txs and
// of the block.
func (b *builder) apply(txs [][]byte) ([]ledger.Event, error) {
	evs, _, err := b.applyTolerating(txs, nil)
	return evs, err
}

// applyTolerating is apply where a tx for which mayFail reports true may
// fail: its index is returned among the failed.
func (b *builder) applyTolerating(txs [][]byte, mayFail func(i int) bool) ([]ledger.Event, map[int]bool, error) {
	b.height++
	seed := sha256.Sum256(binary.BigEndian.AppendUint64([]byte("gpunet-bench/api/"), uint64(b.height)))
	// Blocks 10 ms apart, ending before the live chain's genesis time.
	blk := b.l.BeginBlock(b.kv, ledger.BlockInfo{Height: b.height, Time: b.base.Add(time.Duration(b.height) * 10 * time.Millisecond), Seed: seed})
	var evs []ledger.Event
	failed := map[int]bool{}
	for i, tx := range txs {
		r := blk.DeliverTx(tx)
		if r.Err != nil {
			if mayFail == nil || !mayFail(i) {
				return nil, nil, fmt.Errorf("block %d tx %d: %w", b.height, i, r.Err)
			}
			failed[i] = true
		}
		evs = append(evs, r.Events...)
	}
	changes, _, err := blk.End()
	if err != nil {
		return nil, nil, fmt.Errorf("block %d: %w", b.height, err)
	}
	b.txs += len(txs)
	return append(evs, blk.Events()...), failed, b.kv.Apply(changes)
}

func attr(e ledger.Event, key string) string {
	for _, a := range e.Attrs {
		if a.Key == key {
			return a.Value
		}
	}
	return ""
}

// placedJob is a job the scheduler placed, on its way through its life.
type placedJob struct {
	id    uint64
	owner *market.Key
	provs []*market.Key
	fail  bool
}

// lives is the jobs taken through their life, by the step each is at.
type lives struct {
	specs  []ledger.JobSpec
	next   int // the next spec to submit
	finish int // jobs to take to a result; the rest stay running
	// Placed jobs whose key is granted next, then started, then whose
	// result is committed.
	grants, starts, commits []placedJob
	finished, running       int
	// grantTx is the job of each grant tx of the block being built, by
	// the tx's index.
	grantTx map[int]uint64
}

// runLives submits specs, round after round, and takes each placed job
// one step further per block: key granted, started, result committed (the
// first finish of them; one in ten of those, of one provider, fail) or
// left running. Jobs nothing fits at submission are cancelled.
func (b *builder) runLives(ctx context.Context, specs []ledger.JobSpec, finish int, progress func(string, ...any)) error {
	lv := &lives{specs: specs, finish: finish}
	for lv.next < len(specs) || len(lv.grants)+len(lv.starts)+len(lv.commits) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		// A grant can find its job bumped back to the queue by an
		// earlier grant in the block (an ungranted placement holds its
		// slot only tentatively): that job is placed again later, and
		// is not started now.
		txs := b.stepTxs(lv)
		evs, failed, err := b.applyTolerating(txs, func(i int) bool { _, ok := lv.grantTx[i]; return ok })
		if err != nil {
			return err
		}
		if len(failed) > 0 {
			bumped := map[uint64]bool{}
			for i := range failed {
				bumped[lv.grantTx[i]] = true
			}
			lv.starts = slices.DeleteFunc(lv.starts, func(p placedJob) bool { return bumped[p.id] })
		}
		unplaced, err := b.placements(lv, evs)
		if err != nil {
			return err
		}
		// Jobs nothing fits now are cancelled (they count as cancelled).
		var cancels [][]byte
		for _, id := range unplaced {
			cancels = append(cancels, b.tx(b.ownerOf[id], &ledger.MsgCancelJob{JobID: id}))
		}
		if len(cancels) > 0 {
			if _, err := b.apply(cancels); err != nil {
				return err
			}
		}
		if b.height%50 == 0 {
			progress("  block %d: %d jobs submitted, %d finished, %d running", b.height, b.submitted, lv.finished, lv.running)
		}
	}
	return nil
}

// stepTxs returns a block's txs: the results of the jobs started in the
// last block, the starts of those granted, the grants of those placed, and
// a round of new submissions.
func (b *builder) stepTxs(lv *lives) [][]byte {
	const round = 250
	var txs [][]byte
	for _, p := range lv.commits {
		for _, pk := range p.provs {
			res := ledger.JobResult{ManifestHash: ledger.Hash(sha256.Sum256([]byte(strconv.FormatUint(p.id, 10)))),
				OutputBlob: "sha256:" + strings.Repeat("ab", 32), MeteredSeconds: 1 + p.id%600}
			if p.fail {
				res.Failed, res.ExitCode, res.Reason = true, 1, "exited 1"
			}
			txs = append(txs, b.tx(pk, &ledger.MsgCommitResult{JobID: p.id, MeteredSeconds: res.MeteredSeconds, Result: &res}))
		}
	}
	lv.commits = lv.commits[:0]
	for _, p := range lv.starts {
		for _, pk := range p.provs {
			txs = append(txs, b.tx(pk, &ledger.MsgStartJob{JobID: p.id}))
		}
		if lv.finished < lv.finish {
			p.fail = len(p.provs) == 1 && lv.finished%10 == 9
			lv.finished++
			lv.commits = append(lv.commits, p)
		} else {
			lv.running++
		}
	}
	lv.starts = lv.starts[:0]
	lv.grantTx = map[int]uint64{}
	for _, p := range lv.grants {
		lv.grantTx[len(txs)] = p.id
		var gs []ledger.Grant
		for _, pk := range p.provs {
			gs = append(gs, ledger.Grant{Provider: pk.Addr, WrappedKey: []byte("wrapped job key")})
		}
		txs = append(txs, b.tx(p.owner, &ledger.MsgGrantKey{JobID: p.id, Grants: gs}))
		lv.starts = append(lv.starts, p)
	}
	lv.grants = lv.grants[:0]
	for n := 0; n < round && lv.next < len(lv.specs); n, lv.next = n+1, lv.next+1 {
		s := lv.specs[lv.next]
		s.TimeoutSeconds = 6 * 3600 // those left running still run when the load runs
		txs = append(txs, b.tx(b.nextOwner(), &ledger.MsgSubmitJob{Spec: s, ConsumerKey: market.AgeRecipient("consumer")}))
	}
	return txs
}

// placements reads a block's events: submissions (their owners recorded)
// and placements (queued for their key grant). It returns the jobs
// submitted in the block and not placed.
func (b *builder) placements(lv *lives, evs []ledger.Event) ([]uint64, error) {
	var submitted []uint64
	assigned := map[uint64]bool{}
	for _, e := range evs {
		id, _ := strconv.ParseUint(attr(e, "job"), 10, 64)
		switch e.Type {
		case "job_submitted":
			b.submitted++
			b.ownerOf[id] = &b.st.consumers[b.consIdx[attr(e, "owner")]]
			submitted = append(submitted, id)
		case "job_assigned":
			assigned[id] = true
			p := placedJob{id: id, owner: b.ownerOf[id]}
			for _, a := range strings.Split(attr(e, "providers"), ",") {
				pa, err := address.Parse(a)
				if err != nil {
					return nil, fmt.Errorf("job %d assigned to %q: %w", id, a, err)
				}
				p.provs = append(p.provs, &b.st.providers[b.provIdx[pa]])
			}
			lv.grants = append(lv.grants, p)
		}
	}
	var unplaced []uint64
	for _, id := range submitted {
		if !assigned[id] {
			unplaced = append(unplaced, id)
		}
	}
	return unplaced, nil
}

// cheap is the i-th job priced below every ask: a spot wasm job on specs'
// pattern at 1 usync an hour.
func cheap(specs []ledger.JobSpec, i int) ledger.JobSpec {
	s := specs[i%len(specs)]
	s.Executor, s.Module, s.Image, s.GPUCount, s.GPUModels, s.MinVRAM, s.MinComputeCap = "wasm", "sha256:"+fmt.Sprintf("%064x", i), "", 0, nil, 0, ""
	s.MaxPricePerHour, s.Verification = 1, "spot"
	return s
}

const batch = 2000 // txs per block of the queued and cancelled jobs

// cancelled submits total cheap jobs, batch a block, and cancels each in
// the block after its submission.
func (b *builder) cancelled(ctx context.Context, specs []ledger.JobSpec, total int, progress func(string, ...any)) error {
	var pending []uint64
	for i := 0; i < total || len(pending) > 0; {
		if err := ctx.Err(); err != nil {
			return err
		}
		var txs [][]byte
		for _, id := range pending {
			txs = append(txs, b.tx(b.ownerOf[id], &ledger.MsgCancelJob{JobID: id}))
		}
		pending = pending[:0]
		for n := 0; n < batch && i < total; n, i = n+1, i+1 {
			txs = append(txs, b.tx(b.nextOwner(), &ledger.MsgSubmitJob{Spec: cheap(specs, i), ConsumerKey: market.AgeRecipient("consumer")}))
		}
		evs, err := b.apply(txs)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if e.Type == "job_submitted" {
				id, _ := strconv.ParseUint(attr(e, "job"), 10, 64)
				b.ownerOf[id] = &b.st.consumers[b.consIdx[attr(e, "owner")]]
				pending = append(pending, id)
				b.submitted++
			}
		}
		if b.height%20 == 0 {
			progress("  block %d: %d jobs submitted", b.height, b.submitted)
		}
	}
	return nil
}

// queued submits n cheap jobs that stay queued.
func (b *builder) queued(specs []ledger.JobSpec, n int) error {
	for i := 0; i < n; i += batch {
		var txs [][]byte
		for k := i; k < min(i+batch, n); k++ {
			txs = append(txs, b.tx(b.nextOwner(), &ledger.MsgSubmitJob{Spec: cheap(specs, k), ConsumerKey: market.AgeRecipient("consumer")}))
		}
		if _, err := b.apply(txs); err != nil {
			return err
		}
	}
	return nil
}
