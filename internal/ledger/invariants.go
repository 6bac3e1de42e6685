package ledger

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger/sched"
)

// Invariants: what must hold after every block. Each is a small function
// registered in invariants, the way a Cosmos SDK module registers its
// invariants; CheckInvariants runs them in order. An area that adds state
// adds the invariants that tie it to the rest here.

// invariants are the registered invariants, in the order CheckInvariants
// runs them. Each returns nil or an error wrapping ErrInternal that says
// what is broken.
var invariants = []func(s *invariantState) error{
	gpuBindingsMatchProviders,
	gpuRulingsMatchGPUs,
	schedulerIndexMatchesProviders,
	classSummariesMatchProviders,
	onlineIndexMatchesProviders,
	stakeAddsUp,
	queueLengthMatchesQueues,
	jobAssignmentsAreDistinct,
	replicasShareEngine,
	escrowCoversCharges,
	slotsMatchAssignments,
	jobIndexesMatchJobs,
	escrowAddsUp,
	unbondingAddsUp,
	validatorIndexesMatchRecords,
	validatorBondsAddUp,
	validatorSetWithinMax,
	noTombstonedPower,
	validatorSetMatchesBonds,
	paramsWithinBounds,
	proposalsMatchIndexes,
	govDepositsAddUp,
	minDepositWithinBounds,
	votingWeightsMatchRecords,
	runningTalliesMatchVotes,
	delegatedVotesMatchDelegations,
	delegationsAddUp,
	delegationEntriesAddUp,
	supplyAddsUp,
	marketCountsMatchRecords,
	teeExpiryIndexMatchesProviders,
	rewardsAddUp,
	serviceIndexesMatchRecords,
	serviceAccountsAddUp,
}

// invariantState is what the invariants read: the state, with its
// parameters and its provider and job records decoded once for all of them.
type invariantState struct {
	kv        KV
	params    Params
	providers []*Provider  // in address order
	jobs      []*Job       // in id order
	vals      []*Validator // in consensus address order
	services  []*Service   // in id order
}

// CheckInvariants verifies what must hold after every block: the supply
// equals every balance plus the treasury, the stake and the unbonding
// stake; the recorded totals match their parts; the online index matches
// the online providers; the GPU bindings are exactly the online providers'
// GPUs, none held twice; no sum overflows.
func CheckInvariants(kv KV) error {
	s, err := readInvariantState(kv)
	if err != nil {
		return err
	}
	for _, check := range invariants {
		if err := check(s); err != nil {
			return err
		}
	}
	return nil
}

func readInvariantState(kv KV) (*invariantState, error) {
	params, err := GetParams(kv)
	if err != nil {
		return nil, err
	}
	s := &invariantState{kv: kv, params: params}
	if err := IterateProviders(kv, func(p *Provider) bool {
		s.providers = append(s.providers, p)
		return true
	}); err != nil {
		return nil, err
	}
	kv.Iterate(prefixValidator, prefixEnd(prefixValidator), func(k, b []byte) bool {
		v, e := decodeValidator(b)
		if e != nil || !bytes.Equal(k[len(prefixValidator):], func() []byte { c := v.ConsAddress(); return c[:] }()) {
			err = fmt.Errorf("invariant: validator record %x unreadable or not its key's (%v): %w", k, e, ErrInternal)
			return false
		}
		s.vals = append(s.vals, v)
		return true
	})
	if err != nil {
		return nil, err
	}
	kv.Iterate(prefixJob, prefixEnd(prefixJob), func(k, v []byte) bool {
		j := &Job{}
		if e := decodeRecord(v, j); e != nil || len(k) != len(prefixJob)+8 || j.ID != binary.BigEndian.Uint64(k[len(prefixJob):]) {
			err = fmt.Errorf("invariant: job record %x unreadable or not job %d's: %w", k, j.ID, ErrInternal)
			return false
		}
		s.jobs = append(s.jobs, j)
		return true
	})
	if err != nil {
		return nil, err
	}
	s.services, err = readServices(kv)
	return s, err
}

// gpuBindingsMatchProviders: the GPU bindings are exactly the online
// providers' GPUs, none held twice (gpubind.go).
func gpuBindingsMatchProviders(s *invariantState) error {
	var bindings gpuBindingCheck
	for _, p := range s.providers {
		if err := bindings.add(p); err != nil {
			return err
		}
	}
	return bindings.check(s.kv)
}

// gpuRulingsMatchGPUs: a provider has a hardware-challenge ruling for each
// of its GPUs, or none yet.
func gpuRulingsMatchGPUs(s *invariantState) error {
	for _, p := range s.providers {
		if n := len(p.Challenges.GPUs); n != 0 && n != len(p.Inventory.GPUs) {
			return fmt.Errorf("invariant: provider %s has %d GPU rulings for %d GPUs: %w", p.Address, n, len(p.Inventory.GPUs), ErrInternal)
		}
	}
	return nil
}

// schedulerIndexMatchesProviders: the scheduler's index holds exactly the
// entries the provider records call for.
func schedulerIndexMatchesProviders(s *invariantState) error {
	var indexed uint64
	for _, p := range s.providers {
		for _, e := range indexEntries(p) {
			indexed++
			if v := s.kv.Get(e.Key); !bytes.Equal(v, e.Value) {
				return fmt.Errorf("invariant: scheduler index entry %x of %s is %x, want %x: %w", e.Key, p.Address, v, e.Value, ErrInternal)
			}
		}
	}
	var entries uint64
	s.kv.Iterate(prefixProviderIndex, prefixEnd(prefixProviderIndex), func(_, _ []byte) bool { entries++; return true })
	if entries != indexed {
		return fmt.Errorf("invariant: scheduler index has %d entries, the provider records want %d: %w", entries, indexed, ErrInternal)
	}
	return nil
}

// classSummariesMatchProviders: each class summary counts the index
// entries of its class (classes.go), and there is one for each class that
// has entries.
func classSummariesMatchProviders(s *invariantState) error {
	classes := map[string]*classSummary{}
	for _, p := range s.providers {
		for _, e := range indexEntries(p) {
			class := string(classOfIndexKey(e.Key))
			if classes[class] == nil {
				classes[class] = &classSummary{}
			}
			classes[class].add(e.caps, +1)
		}
	}
	var err error
	stored := 0
	s.kv.Iterate(prefixClassCount, prefixEnd(prefixClassCount), func(k, v []byte) bool {
		stored++
		class := string(k[len(prefixClassCount):])
		want := classes[class]
		if want == nil {
			want = &classSummary{}
		}
		if w := want.encode(); !bytes.Equal(v, w) {
			err = fmt.Errorf("invariant: class %s summary is %x, the provider records want %x (%d entries): %w", class, v, w, want.entries, ErrInternal)
			return false
		}
		return true
	})
	if err != nil {
		return err
	}
	if stored != len(classes) {
		return fmt.Errorf("invariant: %d class counts stored, the provider records want %d: %w", stored, len(classes), ErrInternal)
	}
	return nil
}

// onlineIndexMatchesProviders: the online index lists exactly the online
// providers, each at its recorded position.
func onlineIndexMatchesProviders(s *invariantState) error {
	var online uint64
	for _, p := range s.providers {
		if !p.Online {
			continue
		}
		online++
		if a := s.kv.Get(onlineKey(p.OnlineIndex)); string(a) != string(p.Address[:]) {
			return fmt.Errorf("invariant: online index %d does not point at %s: %w", p.OnlineIndex, p.Address, ErrInternal)
		}
	}
	if n := OnlineCount(s.kv); n != online {
		return fmt.Errorf("invariant: online count %d != online providers %d: %w", n, online, ErrInternal)
	}
	return nil
}

// stakeAddsUp: the recorded stake is the sum of the providers' stakes.
func stakeAddsUp(s *invariantState) error {
	var staked uint64
	for _, p := range s.providers {
		staked += p.Stake
	}
	if n := Staked(s.kv); n != staked {
		return fmt.Errorf("invariant: recorded stake %d != sum of provider stakes %d: %w", n, staked, ErrInternal)
	}
	return nil
}

// queueLengthMatchesQueues: the recorded queue length counts the queues.
func queueLengthMatchesQueues(s *invariantState) error {
	var queued uint64
	for _, pre := range [][]byte{prefixJobQueue, prefixVerifyQ, prefixPriorityQ} {
		s.kv.Iterate(pre, prefixEnd(pre), func(_, _ []byte) bool { queued++; return true })
	}
	if n := QueueLen(s.kv); n != queued {
		return fmt.Errorf("invariant: queue length %d != %d queued jobs: %w", n, queued, ErrInternal)
	}
	return nil
}

// jobAssignmentsAreDistinct: no provider is assigned twice to a job, and a
// job has no more assignments than replicas, nor more replicas than
// max_replicas (or its planned replicas, if more).
func jobAssignmentsAreDistinct(s *invariantState) error {
	for _, j := range s.jobs {
		seen := map[address.Address]bool{}
		for _, a := range j.Assignments {
			if seen[a.Provider] {
				return fmt.Errorf("invariant: job %d assigned twice to %s: %w", j.ID, a.Provider, ErrInternal)
			}
			seen[a.Provider] = true
		}
		// A replicated gang's replicas are whole gangs of Nodes members
		// (gang_verify.go).
		limit := max(s.params.MaxReplicas, j.Spec.PlannedReplicas())
		if replicated(j) {
			limit = max(s.params.MaxReplicas*j.Spec.Nodes, j.Spec.PlannedReplicas())
		}
		if uint64(len(j.Assignments)) > j.Replicas || j.Replicas > limit {
			return fmt.Errorf("invariant: job %d has %d assignments, wants %d replicas (at most %d): %w", j.ID, len(j.Assignments), j.Replicas, s.params.MaxReplicas, ErrInternal)
		}
		if err := replicaGangsWhole(j); err != nil {
			return err
		}
	}
	return nil
}

// replicaGangsWhole: a replicated gang wants whole gangs (its replicas a
// multiple of its nodes), and each of its replica gangs has each rank
// 0 … nodes-1 at most once; no other job has a gang index.
func replicaGangsWhole(j *Job) error {
	if !replicated(j) {
		for _, a := range j.Assignments {
			if a.Gang != 0 || a.Placement != 0 {
				return fmt.Errorf("invariant: job %d is not a gang at full, but %s has replica gang %d, placement %d: %w", j.ID, a.Provider, a.Gang, a.Placement, ErrInternal)
			}
		}
		return nil
	}
	if j.Replicas%j.Spec.Nodes != 0 {
		return fmt.Errorf("invariant: gang %d of %d members wants %d members, not whole gangs: %w", j.ID, j.Spec.Nodes, j.Replicas, ErrInternal)
	}
	for i, a := range j.Assignments {
		if a.Rank >= j.Spec.Nodes {
			return fmt.Errorf("invariant: gang %d's member %s has rank %d of %d: %w", j.ID, a.Provider, a.Rank, j.Spec.Nodes, ErrInternal)
		}
		for _, b := range j.Assignments[:i] {
			if a.Gang == b.Gang && a.Rank == b.Rank {
				return fmt.Errorf("invariant: gang %d's replica gang %d has rank %d twice: %w", j.ID, a.Gang, a.Rank, ErrInternal)
			}
		}
	}
	return nil
}

// replicasShareEngine: the replicas of a wasm job whose results are
// compared all ran on one engine (engine.go), as their assignments record
// it; a job that waits for none has no WaitCode.
func replicasShareEngine(s *invariantState) error {
	for _, j := range s.jobs {
		if j.WaitCode != "" && (j.Done() || !j.queuedForReplica()) {
			return fmt.Errorf("invariant: job %d (%s) waits for no replica but has wait code %q: %w", j.ID, j.State, j.WaitCode, ErrInternal)
		}
		if !j.Spec.SharesEngine() {
			continue
		}
		pinned := engineID(j.PinnedEngine())
		for _, a := range j.Assignments {
			if a.WasmEngine != "" && engineID(a.WasmEngine) != pinned {
				return fmt.Errorf("invariant: job %d's replicas ran on engines %q and %q: %w", j.ID, j.PinnedEngine(), a.WasmEngine, ErrInternal)
			}
		}
	}
	return nil
}

// escrowCoversCharges: an unfinished job's escrow covers what it may still
// be charged: the planned replicas at their agreed price (at the job's
// ceiling for those not placed yet) for their chargeable seconds (the
// timeout, or the slot held to the grant deadline), fee included. A
// finished job holds none.
func escrowCoversCharges(s *invariantState) error {
	for _, j := range s.jobs {
		if j.Done() {
			if j.Escrow != 0 {
				return fmt.Errorf("invariant: finished job %d still holds escrow %d: %w", j.ID, j.Escrow, ErrInternal)
			}
			continue
		}
		if most := escrowNeeded(j, s.params); j.Escrow < most {
			return fmt.Errorf("invariant: job %d escrow %d < %d it may still be charged: %w", j.ID, j.Escrow, most, ErrInternal)
		}
	}
	return nil
}

// slotsMatchAssignments: a provider's slots taken for real (Jobs) are
// those its granted assignments in unfinished jobs and its service
// replicas hold; its tentative ones (Tentative) those its assignments
// whose key is not granted yet hold; and these only where a slot is free,
// at most sched.TentativePerSlot on each (sched.Positions): so no grant
// can take a slot the provider does not have (slots.go).
func slotsMatchAssignments(s *invariantState) error {
	granted := map[address.Address]uint64{}
	tentative := map[address.Address]uint64{}
	for _, j := range s.jobs {
		if j.Done() {
			continue
		}
		for i := range j.Assignments {
			switch a := &j.Assignments[i]; a.slot() {
			case grantedSlot:
				granted[a.Provider]++
			case tentativeSlot:
				tentative[a.Provider]++
			}
		}
	}
	for _, sv := range s.services {
		for _, r := range sv.Replicas {
			granted[r.Provider]++ // a replica holds a slot while it is placed
		}
	}
	for _, p := range s.providers {
		if p.Jobs != granted[p.Address] || p.Tentative != tentative[p.Address] {
			return fmt.Errorf("invariant: provider %s counts %d granted jobs and %d ungranted placements, its assignments and service replicas hold %d and %d: %w", p.Address, p.Jobs, p.Tentative, granted[p.Address], tentative[p.Address], ErrInternal)
		}
		if positions := sched.Positions(p.Jobs, p.MaxJobs); p.Tentative > positions {
			return fmt.Errorf("invariant: provider %s carries %d ungranted placements on %d free of %d slots, at most %d: %w", p.Address, p.Tentative, p.MaxJobs-min(p.Jobs, p.MaxJobs), p.MaxJobs, positions, ErrInternal)
		}
	}
	return nil
}

// jobIndexesMatchJobs: see checkJobIndexes.
func jobIndexesMatchJobs(s *invariantState) error {
	jobs := make(map[uint64]*Job, len(s.jobs))
	for _, j := range s.jobs {
		jobs[j.ID] = j
	}
	return checkJobIndexes(s.kv, jobs)
}

// escrowAddsUp: the recorded escrow is the sum of the jobs' and the
// services' escrow.
func escrowAddsUp(s *invariantState) error {
	var escrow uint64
	for _, j := range s.jobs {
		escrow += j.Escrow
	}
	for _, sv := range s.services {
		escrow += sv.Escrow
	}
	if e := Escrowed(s.kv); e != escrow {
		return fmt.Errorf("invariant: recorded escrow %d != sum of jobs' and services' escrow %d: %w", e, escrow, ErrInternal)
	}
	return nil
}

// unbondingAddsUp: the recorded unbonding total is the sum of the entries.
func unbondingAddsUp(s *invariantState) error {
	var unbonding uint64
	for _, u := range GetUnbondings(s.kv, address.Address{}) {
		unbonding += u.Amount
	}
	if u := UnbondingTotal(s.kv); u != unbonding {
		return fmt.Errorf("invariant: recorded unbonding %d != sum of entries %d: %w", u, unbonding, ErrInternal)
	}
	return nil
}

// supplyAddsUp: the supply is every balance plus the treasury, the stake,
// the unbonding stake and the jobs' and services' escrow, and that sum
// does not overflow.
func supplyAddsUp(s *invariantState) error {
	var total uint64
	var err error
	add := func(v uint64, what string) bool {
		if total+v < total {
			err = fmt.Errorf("invariant: overflow adding %s: %w", what, ErrInternal)
			return false
		}
		total += v
		return true
	}
	s.kv.Iterate(prefixAccount, prefixEnd(prefixAccount), func(k, v []byte) bool {
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
	if err != nil || !add(Treasury(s.kv), "treasury") || !add(RewardPool(s.kv), "reward pool") ||
		!add(DelegatedTotal(s.kv), "delegated stake") || !add(DelegationUnbonding(s.kv), "delegations unbonding") || !add(DelegationRewards(s.kv), "delegation rewards") {
		return err
	}
	for _, p := range s.providers {
		if !add(p.Stake, "stake of "+p.Address.String()) {
			return err
		}
	}
	for _, u := range GetUnbondings(s.kv, address.Address{}) {
		if !add(u.Amount, "unbonding of "+u.Address.String()) {
			return err
		}
	}
	for _, j := range s.jobs {
		if !add(j.Escrow, fmt.Sprintf("escrow of job %d", j.ID)) {
			return err
		}
	}
	for _, sv := range s.services {
		if !add(sv.Escrow, fmt.Sprintf("escrow of service %d", sv.ID)) {
			return err
		}
	}
	for _, v := range s.vals {
		if !add(v.Bond, "bond of validator "+v.ConsAddress().String()) {
			return err
		}
	}
	for _, u := range validatorUnbondings(s.kv) {
		if !add(u.Amount, "unbonding of validator "+u.Address.String()) {
			return err
		}
	}
	if !add(GovDeposits(s.kv), "proposal deposits") {
		return err
	}
	if n := Supply(s.kv); n != total {
		return fmt.Errorf("invariant: supply %d != balances + treasury + reward pool + stake + unbonding + escrow + validator bonds and unbonding = %d: %w", n, total, ErrInternal)
	}
	// Only minting and burning change it.
	if g, n := getUint(s.kv, keyGenesisSupply), Supply(s.kv); g+Minted(s.kv)-Burned(s.kv) != n {
		return fmt.Errorf("invariant: supply %d != genesis %d + minted %d - burned %d: %w", n, g, Minted(s.kv), Burned(s.kv), ErrInternal)
	}
	return nil
}

// checkJobIndexes checks the job indexes, which the app hash leaves out,
// against the job records:
//   - jobown/: one entry per job, under its owner;
//   - jobq/, jobvq/, jobpq/: an unfinished job waiting for a provider is in
//     exactly one queue (queueKey), and
//     no other job is;
//   - jobdue/: an unfinished job with a deadline has its entry at that
//     deadline; other entries belong to finished jobs (expireJobs drops them);
//   - jobprov/: an entry names a job with an assignment to that provider, or
//     a finished job (reassignJobsOf drops those); every assignment of an
//     unfinished job has its entry;
//   - jobtent/: exactly the assignments of unfinished jobs whose key is not
//     granted yet, each under its provider and placement time (slots.go).
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
	for _, pre := range [][]byte{prefixJobQueue, prefixVerifyQ, prefixPriorityQ} {
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
	// And the other way: a provider finds every unfinished job assigned to
	// it in the index (ActiveJobsOf), or it never runs it.
	for _, j := range jobs {
		if j.Done() {
			continue
		}
		for _, a := range j.Assignments {
			if kv.Get(jobProvKey(a.Provider, j.ID)) == nil {
				return fmt.Errorf("invariant: job %d is assigned to %s, but the provider index does not list it: %w", j.ID, a.Provider, ErrInternal)
			}
		}
	}
	entries, tentative := 0, 0
	kv.Iterate(prefixJobTentative, prefixEnd(prefixJobTentative), func(k, v []byte) bool {
		entries++
		if len(k) != len(prefixJobTentative)+address.Len+16 {
			return bad("ungranted placement entry %x is malformed", k)
		}
		a, _ := address.FromBytes(k[len(prefixJobTentative) : len(prefixJobTentative)+address.Len])
		j := jobs[tentativeIDAt(k)]
		var as *Assignment
		if j != nil && !j.Done() {
			as = j.assignment(a)
		}
		if as == nil || as.slot() != tentativeSlot || !bytes.Equal(k, tentativeKey(a, as.AssignedAt, j.ID)) {
			return bad("ungranted placement entry %x names no ungranted assignment of job %d to %s placed then", k, tentativeIDAt(k), a)
		}
		if !bytes.Equal(v, tentativeValue(j)) {
			return bad("ungranted placement entry %x holds %x, not job %d's tier %q", k, v, j.ID, j.Spec.TierName())
		}
		return true
	})
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if j.Done() {
			continue
		}
		for i := range j.Assignments {
			if j.Assignments[i].slot() == tentativeSlot {
				tentative++
			}
		}
	}
	if entries != tentative {
		return fmt.Errorf("invariant: the ungranted placement index has %d entries, the unfinished jobs %d ungranted assignments: %w", entries, tentative, ErrInternal)
	}
	for id, j := range jobs {
		want := []byte(nil)
		if !j.Done() && j.queuedForReplica() {
			k := queueKey(j)
			want = k[:len(k)-8]
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

// validatorIndexesMatchRecords: each validator has its operator entry,
// every operator entry names its validator, the power index holds exactly
// the validators that are neither jailed nor tombstoned, at their bond
// plus delegations,
// and each validator's missed count is its missed-block slots.
func validatorIndexesMatchRecords(s *invariantState) error {
	byAddr := map[ConsAddress]*Validator{}
	eligible := 0
	for _, v := range s.vals {
		c := v.ConsAddress()
		byAddr[c] = v
		if got, ok := ValidatorOf(s.kv, v.Operator); !ok || got != c {
			return fmt.Errorf("invariant: operator %s of validator %s has operator entry %s: %w", v.Operator, c, got, ErrInternal)
		}
		if v.eligible() {
			eligible++
			switch got := s.kv.Get(valPowerKey(v.Total(), c)); {
			case got == nil:
				return fmt.Errorf("invariant: validator %s (bond %d) is missing from the power index (delegated %d): %w", c, v.Bond, v.Delegated, ErrInternal)
			case !bytes.Equal(got, valPowerValue(v)):
				return fmt.Errorf("invariant: validator %s (bond %d, delegated %d) has power index value %x: %w", c, v.Bond, v.Delegated, got, ErrInternal)
			}
		}
		p := append(slices.Clone(prefixValMissed), c[:]...)
		var missed uint64
		s.kv.Iterate(p, prefixEnd(p), func(_, _ []byte) bool { missed++; return true })
		if missed != v.Missed || (missed > 0 && !v.eligible()) {
			return fmt.Errorf("invariant: validator %s counts %d missed blocks, has %d slots (jailed %v): %w", c, v.Missed, missed, v.Jailed, ErrInternal)
		}
	}
	var ops, idx int
	var err error
	s.kv.Iterate(prefixValOperator, prefixEnd(prefixValOperator), func(k, b []byte) bool {
		ops++
		var c ConsAddress
		copy(c[:], b)
		if v := byAddr[c]; v == nil || !bytes.Equal(v.Operator[:], k[len(prefixValOperator):]) {
			err = fmt.Errorf("invariant: operator entry %x names %s, not its validator: %w", k, c, ErrInternal)
			return false
		}
		return true
	})
	s.kv.Iterate(prefixValPower, prefixEnd(prefixValPower), func(_, _ []byte) bool { idx++; return true })
	if err == nil && (ops != len(s.vals) || idx != eligible) {
		err = fmt.Errorf("invariant: %d operator entries and %d power index entries for %d validators (%d eligible): %w", ops, idx, len(s.vals), eligible, ErrInternal)
	}
	return err
}

// validatorBondsAddUp: the recorded bonded and unbonding validator totals
// are the sums of the records and of the unbonding entries.
func validatorBondsAddUp(s *invariantState) error {
	var bonded, unbonding uint64
	for _, v := range s.vals {
		bonded += v.Bond
	}
	for _, u := range validatorUnbondings(s.kv) {
		unbonding += u.Amount
	}
	if b, u := ValidatorBonded(s.kv), ValidatorUnbonding(s.kv); b != bonded || u != unbonding {
		return fmt.Errorf("invariant: recorded validator bond %d and unbonding %d, the records sum to %d and %d: %w", b, u, bonded, unbonding, ErrInternal)
	}
	return nil
}

// validatorSetWithinMax: the set has at most params.max_validators
// members, each with a power.
func validatorSetWithinMax(s *invariantState) error {
	set := activeSet(s.kv)
	if uint64(len(set)) > s.params.MaxValidators && ManagesValidators(s.kv) {
		return fmt.Errorf("invariant: %d validators in the set, params.max_validators is %d: %w", len(set), s.params.MaxValidators, ErrInternal)
	}
	for _, vp := range set {
		if vp.Power == 0 {
			return fmt.Errorf("invariant: validator %s is in the set with power 0: %w", vp.Address, ErrInternal)
		}
	}
	return nil
}

// noTombstonedPower: no tombstoned validator is in the set, unless the set
// was left as it was because no validator qualified (updateValidatorSet).
func noTombstonedPower(s *invariantState) error {
	if len(desiredSet(s.kv, s.params)) == 0 {
		return nil
	}
	for _, vp := range activeSet(s.kv) {
		v, ok, err := GetValidator(s.kv, vp.Address)
		if err != nil || !ok {
			return fmt.Errorf("invariant: validator %s in the set has no record (%v): %w", vp.Address, err, ErrInternal)
		}
		if v.Tombstoned {
			return fmt.Errorf("invariant: tombstoned validator %s has power %d: %w", vp.Address, vp.Power, ErrInternal)
		}
	}
	return nil
}

// validatorSetMatchesBonds: after a block, the set is the one the bonds
// call for (or, when none qualifies, the last one).
func validatorSetMatchesBonds(s *invariantState) error {
	want := desiredSet(s.kv, s.params)
	if len(want) == 0 {
		return nil
	}
	if have := activeSet(s.kv); !slices.Equal(have, want) {
		return fmt.Errorf("invariant: the validator set is %v, the bonds call for %v: %w", have, want, ErrInternal)
	}
	return nil
}
