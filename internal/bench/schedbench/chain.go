package schedbench

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpunet/gpunet/internal/bench/statestore"
	"github.com/gpunet/gpunet/internal/ledger"
)

// chain is a chain applied block by block to a store.
type chain struct {
	l      ledger.Ledger
	kv     *countingKV
	height int64
}

// countingKV counts the provider records read through it.
type countingKV struct {
	statestore.Store
	providerReads int
}

func (c *countingKV) Get(key []byte) []byte {
	if bytes.HasPrefix(key, providerPrefix) {
		c.providerReads++
	}
	return c.Store.Get(key)
}

// providerPrefix is where the ledger keeps provider records ("prov/").
var providerPrefix = []byte("prov/")

// block is what applying one block gave.
type block struct {
	results []ledger.TxResult
	events  []ledger.Event // block-level events (the scheduler's among them)
	end     time.Duration  // time in End()
	hash    time.Duration  // re-hashing End()'s change set (when asked)
	changes int
	// providerReads is the provider records End() read.
	providerReads int
}

// apply applies txs as the next block, timing its End(), and with rehash
// also the lattice hash's share of it.
func (c *chain) apply(txs [][]byte, rehash bool) (*block, error) {
	c.height++
	seed := sha256.Sum256(binary.BigEndian.AppendUint64([]byte("gpunet-bench/seed/"), uint64(c.height)))
	b := c.l.BeginBlock(c.kv, ledger.BlockInfo{Height: c.height, Time: time.Unix(1_700_000_000+c.height, 0).UTC(), Seed: seed})
	out := &block{results: make([]ledger.TxResult, len(txs))}
	for i, tx := range txs {
		out.results[i] = b.DeliverTx(tx)
		if err := out.results[i].Err; err != nil {
			return nil, fmt.Errorf("block %d tx %d: %w", c.height, i, err)
		}
	}
	t0 := time.Now()
	reads := c.kv.providerReads
	changes, _, err := b.End()
	out.end = time.Since(t0)
	out.providerReads = c.kv.providerReads - reads
	if err != nil {
		return nil, fmt.Errorf("block %d: %w", c.height, err)
	}
	out.events, out.changes = b.Events(), len(changes)
	if rehash {
		out.hash = rehashCost(c.kv, changes)
	}
	return out, c.kv.Apply(changes)
}

// rehashCost times folding changes into a lattice hash as End() does (one
// removal of the old entry and one addition of the new per changed key).
// The old values are read before the clock starts: End() mostly has them
// already (the block's overlay remembers what it read).
func rehashCost(base ledger.KV, changes []ledger.Change) time.Duration {
	olds := make([][]byte, len(changes))
	for i, c := range changes {
		if ledger.Hashed(c.Key) {
			olds[i] = base.Get(c.Key)
		}
	}
	var h ledger.LtHash
	t0 := time.Now()
	for i, c := range changes {
		if !ledger.Hashed(c.Key) {
			continue
		}
		if olds[i] != nil {
			h.Remove(c.Key, olds[i])
		}
		if c.Value != nil {
			h.Add(c.Key, c.Value)
		}
	}
	_ = h.Sum()
	return time.Since(t0)
}

// submittedIDs returns the ids of the jobs the txs submitted, in order.
func submittedIDs(results []ledger.TxResult) ([]uint64, error) {
	var ids []uint64
	for i, r := range results {
		found := false
		for _, e := range r.Events {
			if e.Type != "job_submitted" {
				continue
			}
			for _, a := range e.Attrs {
				if a.Key == "job" {
					id, err := strconv.ParseUint(a.Value, 10, 64)
					if err != nil {
						return nil, fmt.Errorf("tx %d: job id %q: %w", i, a.Value, err)
					}
					ids = append(ids, id)
					found = true
				}
			}
		}
		if !found {
			return nil, fmt.Errorf("tx %d submitted no job", i)
		}
	}
	return ids, nil
}

// countPlacements counts the job_assigned events, the providers they
// reserved, and the events for a job assigned earlier in the same events.
func countPlacements(events []ledger.Event) (placements, providers, dups int) {
	seen := map[string]bool{}
	for _, e := range events {
		if e.Type != "job_assigned" {
			continue
		}
		placements++
		for _, a := range e.Attrs {
			switch a.Key {
			case "providers":
				providers += strings.Count(a.Value, ",") + 1
			case "job":
				if seen[a.Value] {
					dups++
				}
				seen[a.Value] = true
			}
		}
	}
	return placements, providers, dups
}
