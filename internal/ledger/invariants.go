package ledger

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/gpunet/gpunet/internal/address"
)

// Invariants: what must hold after every block.

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
