package ledger

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/gpunet/gpunet/internal/address"
)

// Read-only queries for the API and the node's statistics: pages of the
// provider registry and of jobs, walked by key so that a page costs the
// same whatever the size of the state. Nothing here writes.

// LastJobID returns the id of the newest job (0 before the first).
func LastJobID(kv KV) uint64 { return getUint(kv, keyNextJob) }

// ProvidersAfter calls fn for each registered provider whose address sorts
// after after (all of them when after is nil), in address order, until fn
// returns false.
func ProvidersAfter(kv KV, after *address.Address, fn func(p *Provider) bool) error {
	start := prefixProvider
	if after != nil {
		start = append(providerKey(*after), 0) // the next key after it
	}
	var err error
	kv.Iterate(start, prefixEnd(prefixProvider), func(k, v []byte) bool {
		p := &Provider{}
		if e := decodeRecord(v, p); e != nil {
			err = fmt.Errorf("provider record %x: %w: %w", k, e, ErrInternal)
			return false
		}
		return fn(p)
	})
	return err
}

// JobsFrom calls fn for each job with an id of at least from, in id order,
// until fn returns false.
func JobsFrom(kv KV, from uint64, fn func(j *Job) bool) error {
	var err error
	kv.Iterate(jobKey(from), prefixEnd(prefixJob), func(k, v []byte) bool {
		j := &Job{}
		if e := decodeRecord(v, j); e != nil {
			err = fmt.Errorf("job record %x: %w: %w", k, e, ErrInternal)
			return false
		}
		return fn(j)
	})
	return err
}

// JobIDsOfBefore returns up to limit ids of owner's jobs below before
// (every one when before is 0), newest first, and whether older ones
// remain. It reads owner's index entries up to before, not the job
// records.
func JobIDsOfBefore(kv KV, owner address.Address, before uint64, limit int) (ids []uint64, more bool) {
	p := append(slices.Clone(prefixJobOwner), owner[:]...)
	end := prefixEnd(p)
	if before > 0 {
		end = u64(slices.Clone(p), before)
	}
	var all []uint64
	kv.Iterate(p, end, func(k, _ []byte) bool {
		all = append(all, binary.BigEndian.Uint64(k[len(p):]))
		return true
	})
	slices.Reverse(all)
	if len(all) > limit {
		return all[:limit], true
	}
	return all, false
}

// QueuedJobIDs calls fn with the ids of queued jobs, oldest first, from
// from on, until fn returns false.
func QueuedJobIDs(kv KV, from uint64, fn func(id uint64) bool) {
	kv.Iterate(jobQueueKey(from), prefixEnd(prefixJobQueue), func(k, _ []byte) bool {
		return fn(binary.BigEndian.Uint64(k[len(prefixJobQueue):]))
	})
}
