package ledger

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/challenge"
)

// Key layout of the state. The app hash covers every key but these:
//   - those under metaPrefix: bookkeeping (the lattice hash itself);
//   - the scheduler's provider index and class summaries (pidx/, pcls/),
//     functions of the provider records;
//   - the job indexes: by owner (jobown/), by provider (jobprov/), by
//     deadline (jobdue/) and the queues (jobq/, jobvq/), functions of the
//     job records.
//
// CheckInvariants rebuilds the derived keys from the records, or checks them
// against the records, on every block in tests and on nodes that ask for
// it. A node whose index went wrong would act on it differently (place,
// expire, list other jobs), and the records, which are hashed, would then
// differ. Leaving them out halves the entries a placed job hashes: each of
// these keys is new in the block that writes it, so hashing it also cost a
// store read for its (absent) old value.
const metaPrefix = "\x00"

var unhashedPrefixes = [][]byte{[]byte(metaPrefix), prefixProviderIndex, prefixClassCount,
	prefixJobOwner, prefixJobProv, prefixJobDue, prefixJobQueue, prefixVerifyQ}

// Hashed reports whether the app hash covers key.
func Hashed(key []byte) bool {
	for _, p := range unhashedPrefixes {
		if bytes.HasPrefix(key, p) {
			return false
		}
	}
	return true
}

var (
	keyLtHash   = []byte(metaPrefix + "lthash")
	keyHeight   = []byte("chain/height")
	keyChainID  = []byte("chain/id")
	keyParams   = []byte("chain/params")
	keySupply   = []byte("chain/supply")
	keyTreasury = []byte("chain/treasury")

	prefixAccount = []byte("acct/")
)

func accountKey(a address.Address) []byte {
	return append(append(make([]byte, 0, len(prefixAccount)+address.Len), prefixAccount...), a[:]...)
}

// Account is the state of one address.
type Account struct {
	Address  address.Address `json:"address"`
	Balance  uint64          `json:"balance"`  // usync
	Sequence uint64          `json:"sequence"` // the sequence its next tx must carry
	PubKey   []byte          `json:"pub_key,omitempty"`
}

func (a *Account) encode() []byte {
	e := encoder{buf: make([]byte, 0, 48)}
	e.uvarint(a.Balance)
	e.uvarint(a.Sequence)
	e.bytes(a.PubKey)
	return e.buf
}

func decodeAccount(addr address.Address, b []byte) (Account, error) {
	d := decoder{buf: b}
	a := Account{Address: addr}
	a.Balance = d.uvarint("balance")
	a.Sequence = d.uvarint("sequence")
	if pk := d.bytes("pub_key", 32); len(pk) > 0 {
		a.PubKey = append([]byte(nil), pk...)
	}
	if err := d.done(); err != nil {
		return a, fmt.Errorf("account %s: corrupt record: %w: %w", addr, err, ErrInternal)
	}
	return a, nil
}

// GetAccount reads an account; an address never seen has a zero account.
func GetAccount(kv KV, addr address.Address) (Account, error) {
	b := kv.Get(accountKey(addr))
	if b == nil {
		return Account{Address: addr}, nil
	}
	return decodeAccount(addr, b)
}

func setAccount(o *Overlay, a *Account) { o.Set(accountKey(a.Address), a.encode()) }

// Params are the chain's tunable rules, set at genesis.
type Params struct {
	// MaxTxBytes is the largest tx, in bytes, the ledger accepts.
	MaxTxBytes uint64 `json:"max_tx_bytes"`
	// MinFee is the smallest fee, in usync, a tx must carry.
	MinFee uint64 `json:"min_fee"`
	// MinStakePerGPU is the stake, in usync per GPU, below which a GPU
	// provider is not schedulable.
	MinStakePerGPU uint64 `json:"min_stake_per_gpu"`
	// MinStakeCPU is the stake, in usync, below which a CPU-only provider
	// is not schedulable.
	MinStakeCPU uint64 `json:"min_stake_cpu"`
	// UnbondingBlocks is how long unstaked tokens stay slashable before
	// they return to the balance.
	UnbondingBlocks uint64 `json:"unbonding_blocks"`
	// LivenessWindow is K: a liveness challenge issued in block H must be
	// answered in a block no later than H+K.
	LivenessWindow uint64 `json:"liveness_window"`
	// LivenessMaxMissed misses in a row mark a provider offline.
	LivenessMaxMissed uint64 `json:"liveness_max_missed"`
	// LivenessRatePPM is the share of online providers challenged each
	// block, in parts per million (at least one, at most
	// LivenessMaxPerBlock).
	LivenessRatePPM     uint64 `json:"liveness_rate_ppm"`
	LivenessMaxPerBlock uint64 `json:"liveness_max_per_block"`
	// ProtocolFeeBps is the fee on what a job pays its providers, in basis
	// points, paid by the job's owner to the treasury.
	ProtocolFeeBps uint64 `json:"protocol_fee_bps"`
	// JobGrantTimeout is how long, in seconds of block time, the owner of
	// a placed job has to grant its key.
	JobGrantTimeout uint64 `json:"job_grant_timeout"`
	// JobStartTimeout is how long an assigned provider has, after the
	// grant, to start the job before it is reassigned.
	JobStartTimeout uint64 `json:"job_start_timeout"`
	// JobResultGrace is how long past the job's timeout a provider has to
	// report its result before the job is reassigned.
	JobResultGrace uint64 `json:"job_result_grace"`
	// JobMaxAttempts is how many placements a job gets before it fails.
	JobMaxAttempts uint64 `json:"job_max_attempts"`
	// MaxPlacementsPerBlock bounds the scheduler's work per block.
	MaxPlacementsPerBlock uint64 `json:"max_placements_per_block"`

	// Proof of Sync (verify.go, DESIGN.md section 5).
	//
	// SpotWarmup is how many consecutive validated results in a class a
	// provider needs before its spot jobs are audited at random rather
	// than always; SpotFloorPPM the least audit probability after that.
	SpotWarmup   uint64 `json:"spot_warmup"`
	SpotFloorPPM uint64 `json:"spot_floor_ppm"`
	// MaxReplicas caps escalation: replicas that disagree get company up
	// to this many.
	MaxReplicas uint64 `json:"max_replicas"`
	// RevealTimeout is how long, in seconds of block time, committed
	// replicas have to open their commitments.
	RevealTimeout uint64 `json:"reveal_timeout"`
	// SlashBps is the share of its stake (bonded and unbonding) a provider
	// loses when outvoted or when it fails a hardware challenge;
	// SlashCompensationBps the share of that paid to the harmed job's
	// owner (the rest goes to the treasury).
	SlashBps             uint64 `json:"slash_bps"`
	SlashCompensationBps uint64 `json:"slash_compensation_bps"`
	// Hardware challenges (hwchallenge.go). HWRatePPM of the online
	// providers are drawn each block (at least one, at most
	// HWMaxPerBlock; 0 turns challenges off); each gets a GEMM that takes
	// HWTargetMillis at its claimed throughput, a deadline of that ×
	// HWSlackPermille/1000 + HWAllowanceMillis for its commit, and
	// HWOpenMillis of block time after the randomness to open HWOpenings
	// entries (time, not blocks: an honest agent's opening takes the same
	// whatever the block time).
	HWRatePPM         uint64 `json:"hw_rate_ppm"`
	HWMaxPerBlock     uint64 `json:"hw_max_per_block"`
	HWTargetMillis    uint64 `json:"hw_target_millis"`
	HWSlackPermille   uint64 `json:"hw_slack_permille"`
	HWAllowanceMillis uint64 `json:"hw_allowance_millis"`
	HWOpenings        uint64 `json:"hw_openings"`
	HWOpenMillis      uint64 `json:"hw_open_millis"`
}

// DefaultParams returns the parameters a new chain starts with.
func DefaultParams() Params {
	return Params{
		MaxTxBytes:          256 << 10,
		MinFee:              1_000,       // 0.001 SYNC a tx: see docs/ledger.md, Parameters
		MinStakePerGPU:      100_000_000, // 100 SYNC
		MinStakeCPU:         10_000_000,  // 10 SYNC
		UnbondingBlocks:     100_800,     // a week of 6 s blocks
		LivenessWindow:      10,
		LivenessMaxMissed:   3,
		LivenessRatePPM:     100_000, // 10% of online providers per block
		LivenessMaxPerBlock: 100,

		ProtocolFeeBps:        100, // 1%
		JobGrantTimeout:       120,
		JobStartTimeout:       120,
		JobResultGrace:        120,
		JobMaxAttempts:        3,
		MaxPlacementsPerBlock: 1000,

		SpotWarmup:           10,
		SpotFloorPPM:         70_000, // 7%
		MaxReplicas:          5,
		RevealTimeout:        120,
		SlashBps:             1_000, // 10%
		SlashCompensationBps: 5_000, // half of it

		HWRatePPM:         10_000, // 1% of online providers per block, each at most once per its plan's gap
		HWMaxPerBlock:     10,
		HWTargetMillis:    challenge.DefaultTargetMillis,
		HWSlackPermille:   challenge.DefaultSlackPermille,
		HWAllowanceMillis: challenge.DefaultAllowanceMillis,
		HWOpenings:        challenge.DefaultOpenings,
		HWOpenMillis:      30_000,
	}
}

// Validate checks that p can run a chain.
func (p Params) Validate() error {
	if p.MaxTxBytes < 512 || p.MaxTxBytes > maxBodyLen {
		return fmt.Errorf("params.max_tx_bytes %d out of range [512, %d]", p.MaxTxBytes, maxBodyLen)
	}
	switch {
	case p.MinStakePerGPU == 0 || p.MinStakeCPU == 0:
		return fmt.Errorf("params.min_stake_per_gpu and min_stake_cpu must be positive")
	case p.UnbondingBlocks == 0:
		return fmt.Errorf("params.unbonding_blocks must be positive")
	case p.LivenessWindow == 0 || p.LivenessWindow > 10_000:
		return fmt.Errorf("params.liveness_window %d out of range [1, 10000]", p.LivenessWindow)
	case p.LivenessMaxMissed == 0:
		return fmt.Errorf("params.liveness_max_missed must be positive")
	case p.LivenessRatePPM > ppm:
		return fmt.Errorf("params.liveness_rate_ppm %d above 1000000", p.LivenessRatePPM)
	case p.LivenessMaxPerBlock == 0 || p.LivenessMaxPerBlock > 10_000:
		return fmt.Errorf("params.liveness_max_per_block %d out of range [1, 10000]", p.LivenessMaxPerBlock)
	case p.ProtocolFeeBps > 5_000:
		return fmt.Errorf("params.protocol_fee_bps %d above 5000 (50%%)", p.ProtocolFeeBps)
	case p.JobGrantTimeout == 0 || p.JobStartTimeout == 0 || p.JobResultGrace == 0:
		return fmt.Errorf("params.job_grant_timeout, job_start_timeout and job_result_grace must be positive")
	case p.JobMaxAttempts == 0 || p.MaxPlacementsPerBlock == 0:
		return fmt.Errorf("params.job_max_attempts and max_placements_per_block must be positive")
	case p.SpotFloorPPM == 0 || p.SpotFloorPPM > ppm:
		return fmt.Errorf("params.spot_floor_ppm %d out of range [1, 1000000]", p.SpotFloorPPM)
	case p.SpotWarmup > 1_000_000:
		return fmt.Errorf("params.spot_warmup %d above 1000000", p.SpotWarmup)
	case p.MaxReplicas < 3 || p.MaxReplicas > 16:
		return fmt.Errorf("params.max_replicas %d out of range [3, 16]: disagreeing replicas need a tie-breaker", p.MaxReplicas)
	case p.RevealTimeout == 0:
		return fmt.Errorf("params.reveal_timeout must be positive")
	case p.SlashBps > 10_000 || p.SlashCompensationBps > 10_000:
		return fmt.Errorf("params.slash_bps and slash_compensation_bps are at most 10000 (100%%)")
	case p.HWRatePPM > ppm || p.HWMaxPerBlock == 0 || p.HWMaxPerBlock > 10_000:
		return fmt.Errorf("params.hw_rate_ppm %d (at most 1000000) or hw_max_per_block %d (1 to 10000) out of range", p.HWRatePPM, p.HWMaxPerBlock)
	case p.HWOpenMillis < 1_000 || p.HWOpenMillis > 3_600_000:
		return fmt.Errorf("params.hw_open_millis %d out of range [1000, 3600000]", p.HWOpenMillis)
	}
	if err := p.challengeParams().Validate(); err != nil {
		return fmt.Errorf("params.hw_*: %w", err)
	}
	return nil
}

// GetParams reads the chain parameters.
func GetParams(kv KV) (Params, error) {
	var p Params
	b := kv.Get(keyParams)
	if b == nil {
		return p, fmt.Errorf("no params in state (was the chain initialised?): %w", ErrInternal)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("corrupt params: %w: %w", err, ErrInternal)
	}
	return p, nil
}

func getUint(kv KV, key []byte) uint64 {
	b := kv.Get(key)
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

func setUint(o *Overlay, key []byte, v uint64) {
	o.Set(key, binary.BigEndian.AppendUint64(nil, v))
}

// Supply returns the total supply in usync.
func Supply(kv KV) uint64 { return getUint(kv, keySupply) }

// Treasury returns the treasury's balance in usync.
func Treasury(kv KV) uint64 { return getUint(kv, keyTreasury) }

// Height returns the height of the last block applied to kv (0 after genesis).
func Height(kv KV) uint64 { return getUint(kv, keyHeight) }

// ChainID returns the chain id recorded at genesis.
func ChainID(kv KV) string { return string(kv.Get(keyChainID)) }

// AppHash returns the commitment to the state in kv.
func AppHash(kv KV) ([]byte, error) {
	h, err := ltHashFromBytes(kv.Get(keyLtHash))
	if err != nil {
		return nil, err
	}
	return h.Sum(), nil
}

// CheckInvariants verifies what must hold after every block: the supply
// equals every balance plus the treasury, the stake and the unbonding
// stake; the recorded totals match their parts; the online index matches
// the online providers; the GPU bindings are exactly the online providers'
// GPUs, none held twice; no sum overflows.
func CheckInvariants(kv KV) error {
	params, err := GetParams(kv)
	if err != nil {
		return err
	}
	var total uint64
	add := func(v uint64, what string) bool {
		if total+v < total {
			err = fmt.Errorf("invariant: overflow adding %s: %w", what, ErrInternal)
			return false
		}
		total += v
		return true
	}
	end := append([]byte(nil), prefixAccount...)
	end[len(end)-1]++
	kv.Iterate(prefixAccount, end, func(k, v []byte) bool {
		addr, aerr := address.FromBytes(k[len(prefixAccount):])
		if aerr != nil {
			err = fmt.Errorf("invariant: bad account key %x: %w", k, ErrInternal)
			return false
		}
		a, derr := decodeAccount(addr, v)
		if derr != nil {
			err = derr
			return false
		}
		return add(a.Balance, "account "+addr.String())
	})
	if err != nil {
		return err
	}
	if !add(Treasury(kv), "treasury") {
		return err
	}
	var staked, online, indexed uint64
	classes := map[string]*classSummary{}
	var bindings gpuBindingCheck
	if perr := IterateProviders(kv, func(p *Provider) bool {
		staked += p.Stake
		if err = bindings.add(p); err != nil {
			return false
		}
		if n := len(p.Challenges.GPUs); n != 0 && n != len(p.Inventory.GPUs) {
			err = fmt.Errorf("invariant: provider %s has %d GPU rulings for %d GPUs: %w", p.Address, n, len(p.Inventory.GPUs), ErrInternal)
			return false
		}
		for _, e := range indexEntries(p) {
			indexed++
			class := string(classOfIndexKey(e.Key))
			if classes[class] == nil {
				classes[class] = &classSummary{}
			}
			classes[class].add(e.caps, +1)
			if v := kv.Get(e.Key); !bytes.Equal(v, e.Value) {
				err = fmt.Errorf("invariant: scheduler index entry %x of %s is %x, want %x: %w", e.Key, p.Address, v, e.Value, ErrInternal)
				return false
			}
		}
		if p.Online {
			online++
			if a := kv.Get(onlineKey(p.OnlineIndex)); string(a) != string(p.Address[:]) {
				err = fmt.Errorf("invariant: online index %d does not point at %s: %w", p.OnlineIndex, p.Address, ErrInternal)
				return false
			}
		}
		return add(p.Stake, "stake of "+p.Address.String())
	}); perr != nil {
		return perr
	}
	if err != nil {
		return err
	}
	if err := bindings.check(kv); err != nil {
		return err
	}
	if s := Staked(kv); s != staked {
		return fmt.Errorf("invariant: recorded stake %d != sum of provider stakes %d: %w", s, staked, ErrInternal)
	}
	var queued uint64
	for _, pre := range [][]byte{prefixJobQueue, prefixVerifyQ} {
		kv.Iterate(pre, prefixEnd(pre), func(_, _ []byte) bool { queued++; return true })
	}
	if n := QueueLen(kv); n != queued {
		return fmt.Errorf("invariant: queue length %d != %d queued jobs: %w", n, queued, ErrInternal)
	}
	var entries uint64
	kv.Iterate(prefixProviderIndex, prefixEnd(prefixProviderIndex), func(_, _ []byte) bool { entries++; return true })
	if entries != indexed {
		return fmt.Errorf("invariant: scheduler index has %d entries, the provider records want %d: %w", entries, indexed, ErrInternal)
	}
	var cerr error
	stored := 0
	kv.Iterate(prefixClassCount, prefixEnd(prefixClassCount), func(k, v []byte) bool {
		stored++
		class := string(k[len(prefixClassCount):])
		want := classes[class]
		if want == nil {
			want = &classSummary{}
		}
		if w := want.encode(); !bytes.Equal(v, w) {
			cerr = fmt.Errorf("invariant: class %s summary is %x, the provider records want %x (%d entries): %w", class, v, w, want.entries, ErrInternal)
			return false
		}
		return true
	})
	if cerr != nil {
		return cerr
	}
	if stored != len(classes) {
		return fmt.Errorf("invariant: %d class counts stored, the provider records want %d: %w", stored, len(classes), ErrInternal)
	}
	if n := OnlineCount(kv); n != online {
		return fmt.Errorf("invariant: online count %d != online providers %d: %w", n, online, ErrInternal)
	}
	var unbonding uint64
	for _, u := range GetUnbondings(kv, address.Address{}) {
		unbonding += u.Amount
		if !add(u.Amount, "unbonding of "+u.Address.String()) {
			return err
		}
	}
	var escrow uint64
	var jerr error
	slots := map[address.Address]uint64{} // job slots held, by provider
	jobs := map[uint64]*Job{}             // for the job indexes' check
	kv.Iterate(prefixJob, prefixEnd(prefixJob), func(k, v []byte) bool {
		j := &Job{}
		if e := decodeRecord(v, j); e != nil || len(k) != len(prefixJob)+8 || j.ID != binary.BigEndian.Uint64(k[len(prefixJob):]) {
			jerr = fmt.Errorf("invariant: job record %x unreadable or not job %d's: %w", k, j.ID, ErrInternal)
			return false
		}
		jobs[j.ID] = j
		escrow += j.Escrow
		if !j.Done() {
			for i := range j.Assignments {
				if j.Assignments[i].holdsSlot() {
					slots[j.Assignments[i].Provider]++
				}
			}
		}
		seen := map[address.Address]bool{}
		for _, a := range j.Assignments {
			if seen[a.Provider] {
				jerr = fmt.Errorf("invariant: job %d assigned twice to %s: %w", j.ID, a.Provider, ErrInternal)
				return false
			}
			seen[a.Provider] = true
		}
		if uint64(len(j.Assignments)) > j.Replicas || j.Replicas > max(params.MaxReplicas, j.Spec.PlannedReplicas()) {
			jerr = fmt.Errorf("invariant: job %d has %d assignments, wants %d replicas (at most %d): %w", j.ID, len(j.Assignments), j.Replicas, params.MaxReplicas, ErrInternal)
			return false
		}
		if !j.Done() {
			// The escrow covers what the job may still be charged: the
			// planned replicas at their agreed price (at the job's ceiling
			// for those not placed yet) for their chargeable seconds (the
			// timeout, or the slot held to the grant deadline), fee
			// included.
			secs := chargeableSeconds(&j.Spec, params)
			var most, regular uint64
			for _, a := range j.Assignments {
				if !a.Extra {
					regular++
					most += mulDiv(a.PricePerHour, secs, 3600)
				}
			}
			if planned := j.Spec.PlannedReplicas(); regular < planned {
				most += mulDiv(j.Spec.MaxPricePerHour, secs, 3600) * (planned - regular)
			}
			if j.Escrow < most {
				jerr = fmt.Errorf("invariant: job %d escrow %d < %d it may still be charged: %w", j.ID, j.Escrow, most, ErrInternal)
				return false
			}
		} else if j.Escrow != 0 {
			jerr = fmt.Errorf("invariant: finished job %d still holds escrow %d: %w", j.ID, j.Escrow, ErrInternal)
			return false
		}
		return add(j.Escrow, fmt.Sprintf("escrow of job %d", j.ID))
	})
	if jerr != nil {
		return jerr
	}
	if perr := IterateProviders(kv, func(p *Provider) bool {
		if p.Jobs != slots[p.Address] {
			jerr = fmt.Errorf("invariant: provider %s counts %d running jobs, its assignments hold %d slots: %w", p.Address, p.Jobs, slots[p.Address], ErrInternal)
			return false
		}
		return true
	}); perr != nil {
		return perr
	}
	if jerr != nil {
		return jerr
	}
	if err != nil {
		return err
	}
	if err := checkJobIndexes(kv, jobs); err != nil {
		return err
	}
	if e := Escrowed(kv); e != escrow {
		return fmt.Errorf("invariant: recorded escrow %d != sum of jobs' escrow %d: %w", e, escrow, ErrInternal)
	}
	if u := UnbondingTotal(kv); u != unbonding {
		return fmt.Errorf("invariant: recorded unbonding %d != sum of entries %d: %w", u, unbonding, ErrInternal)
	}
	if s := Supply(kv); s != total {
		return fmt.Errorf("invariant: supply %d != balances + treasury + stake + unbonding + escrow = %d: %w", s, total, ErrInternal)
	}
	return nil
}

// checkJobIndexes checks the job indexes, which the app hash leaves out,
// against the job records:
//   - jobown/: one entry per job, under its owner;
//   - jobq/, jobvq/: an unfinished job waiting for a provider is in exactly
//     one queue (the verification queue once it has committed results), and
//     no other job is;
//   - jobdue/: an unfinished job with a deadline has its entry at that
//     deadline; other entries belong to finished jobs (expireJobs drops them);
//   - jobprov/: an entry names a job with an assignment to that provider, or
//     a finished job (reassignJobsOf drops those).
func checkJobIndexes(kv KV, jobs map[uint64]*Job) error {
	var err error
	bad := func(format string, args ...any) bool {
		err = fmt.Errorf("invariant: "+format+": %w", append(args, ErrInternal)...)
		return false
	}
	idAt := func(k []byte) uint64 { return binary.BigEndian.Uint64(k[len(k)-8:]) }
	owners := 0
	kv.Iterate(prefixJobOwner, prefixEnd(prefixJobOwner), func(k, _ []byte) bool {
		owners++
		j := jobs[idAt(k)]
		if len(k) != len(prefixJobOwner)+address.Len+8 || j == nil || !bytes.Equal(k[len(prefixJobOwner):len(prefixJobOwner)+address.Len], j.Owner[:]) {
			return bad("owner index entry %x names no job of that owner", k)
		}
		return true
	})
	if err == nil && owners != len(jobs) {
		bad("owner index has %d entries for %d jobs", owners, len(jobs))
	}
	inQueue := map[uint64][]byte{}
	for _, pre := range [][]byte{prefixJobQueue, prefixVerifyQ} {
		kv.Iterate(pre, prefixEnd(pre), func(k, _ []byte) bool {
			id := idAt(k)
			if inQueue[id] != nil {
				return bad("job %d is in two queues", id)
			}
			inQueue[id] = pre
			return true
		})
	}
	dues := map[uint64]int{}
	kv.Iterate(prefixJobDue, prefixEnd(prefixJobDue), func(k, _ []byte) bool {
		id := idAt(k)
		j := jobs[id]
		switch {
		case j == nil:
			return bad("deadline index entry %x names no job", k)
		case j.Done():
		case int64(binary.BigEndian.Uint64(k[len(prefixJobDue):])) != j.Deadline:
			return bad("deadline index entry %x of job %d, whose deadline is %d", k, id, j.Deadline)
		}
		dues[id]++
		return true
	})
	kv.Iterate(prefixJobProv, prefixEnd(prefixJobProv), func(k, _ []byte) bool {
		j := jobs[idAt(k)]
		if len(k) != len(prefixJobProv)+address.Len+8 || j == nil {
			return bad("provider index entry %x names no job", k)
		}
		if a, _ := address.FromBytes(k[len(prefixJobProv) : len(prefixJobProv)+address.Len]); !j.Done() && j.assignment(a) == nil {
			return bad("provider index entry %x: job %d has no assignment to %s", k, j.ID, a)
		}
		return true
	})
	if err != nil {
		return err
	}
	for id, j := range jobs {
		want := []byte(nil)
		if !j.Done() && j.queuedForReplica() {
			want = prefixJobQueue
			if j.committed() > 0 {
				want = prefixVerifyQ
			}
		}
		if !bytes.Equal(inQueue[id], want) {
			return fmt.Errorf("invariant: job %d (%s, %d of %d replicas assigned) is in queue %q, want %q: %w", id, j.State, len(j.Assignments), j.Replicas, inQueue[id], want, ErrInternal)
		}
		if !j.Done() && j.Deadline != 0 && dues[id] != 1 {
			return fmt.Errorf("invariant: job %d has deadline %d and %d deadline index entries: %w", id, j.Deadline, dues[id], ErrInternal)
		}
	}
	return nil
}
