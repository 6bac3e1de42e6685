package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/blob"
	"github.com/gpunet/gpunet/internal/ledger"
)

// blobAccount decides whether an account may upload to the node's gateway:
// it must be one the ledger holds something for (a balance or a provider
// record), so that a key made up on the spot brings no fresh quota.
func blobAccount(view func() (ledger.KV, func())) func(address.Address) error {
	return func(a address.Address) error {
		kv, release := view()
		defer release()
		acct, err := ledger.GetAccount(kv, a)
		if err != nil {
			return fmt.Errorf("reading the account: %w", err)
		}
		if acct.Balance > 0 {
			return nil
		}
		if _, ok, err := ledger.GetProvider(kv, a); err == nil && ok {
			return nil
		}
		return errors.New("the ledger holds no balance or provider stake for it; only funded accounts and providers may store blobs")
	}
}

// gatewayLimits sizes the gateway's upload caps to the API's connection
// cap: an upload holds a connection and a temporary file.
func gatewayLimits(conns int) blob.Limits {
	return blob.Limits{MaxUploads: min(blob.DefaultMaxUploads, max(conns/4, 4))}
}

// sweepEvery is how often a node collects blobs no job references.
const sweepEvery = 10 * time.Minute

// sweepBlobs runs the gateway's sweeper until ctx ends: every sweepEvery it
// reads which blobs the ledger's jobs name and collects the others once
// blob.DefaultSweepGrace has passed since their last upload.
func sweepBlobs(ctx context.Context, s *blob.Store, view func() (ledger.KV, func()), log *slog.Logger) {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		refs, err := referencedBlobs(view)
		if err != nil {
			log.Error("blob sweep: reading the jobs' blobs; nothing collected", "err", err)
			continue
		}
		res, err := s.Sweep(func(h blob.Hash) bool { return refs[h] }, time.Now().Add(-blob.DefaultSweepGrace))
		if err != nil {
			log.Error("blob sweep failed", "err", err)
		}
		log.Debug("blob sweep", "kept", res.Kept, "released", res.Released, "deleted", res.Deleted, "freed_bytes", res.FreedBytes)
	}
}

// referencedBlobs returns every blob a job on the ledger names: its wasm
// module, its inputs, and each replica's outputs and log.
func referencedBlobs(view func() (ledger.KV, func())) (map[blob.Hash]bool, error) {
	kv, release := view()
	defer release()
	refs := make(map[blob.Hash]bool)
	err := ledger.JobsFrom(kv, 0, func(j *ledger.Job) bool {
		jobBlobs(j, func(h blob.Hash) { refs[h] = true })
		return true
	})
	return refs, err
}

// jobBlobs calls add for each blob j names.
func jobBlobs(j *ledger.Job, add func(blob.Hash)) {
	names := []string{j.Spec.Module, j.InputBlob}
	for _, a := range j.Assignments {
		if a.Result != nil {
			names = append(names, a.Result.OutputBlob, a.Result.LogBlob)
		}
	}
	for _, n := range names {
		if h, err := blob.ParseHash(n); err == nil {
			add(h)
		}
	}
}
