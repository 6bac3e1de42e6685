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

// sweepEvery is how often a node collects blobs.
const sweepEvery = 10 * time.Minute

// sweepBlobs runs the gateway's sweeper until ctx ends: every sweepEvery it
// reads which blobs the ledger's jobs name, deletes those whose retention
// has passed (planRetention), and collects the blobs no job names once
// blob.DefaultSweepGrace has passed since their last upload.
func sweepBlobs(ctx context.Context, s *blob.Store, view func() (ledger.KV, func()), retention time.Duration, log *slog.Logger) {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		kv, release := view()
		sweepOnce(s, func(fn func(*ledger.Job) bool) error { return ledger.JobsFrom(kv, 0, fn) }, retention, time.Now(), log)
		release()
	}
}

// sweepOnce is one round of sweepBlobs at now over the ledger's jobs.
func sweepOnce(s *blob.Store, jobs func(func(*ledger.Job) bool) error, retention time.Duration, now time.Time, log *slog.Logger) {
	plan, err := planRetention(jobs, s.FetchedAt, now, retention)
	if err != nil {
		log.Error("blob sweep: reading the jobs' blobs; nothing collected", "err", err)
		return
	}
	expired := 0
	for h := range plan.expired {
		if err := s.Delete(h); err == nil {
			expired++
		}
	}
	res, err := s.Sweep(func(h blob.Hash) bool { return plan.keep[h] }, now.Add(-blob.DefaultSweepGrace))
	if err != nil {
		log.Error("blob sweep failed", "err", err)
	}
	log.Debug("blob sweep", "kept", res.Kept, "released", res.Released, "deleted", res.Deleted, "freed_bytes", res.FreedBytes, "expired", expired)
}
