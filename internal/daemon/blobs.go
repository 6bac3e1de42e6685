package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/blob"
	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/validator"
)

// liveJobsCounted is how many of an account's newest jobs blobHeld looks
// at for the escrow of the unfinished ones.
const liveJobsCounted = 64

// blobHeld is what account a holds on the ledger that prices its room in
// the node's gateway: its balance, its provider stake and the escrow of
// its unfinished jobs (among its newest liveJobsCounted). Each is locked
// or spent by moving it: tokens moved to another account leave this one's
// allowance when the node next checks it (enforceAllowances).
func blobHeld(kv ledger.KV, a address.Address) (uint64, error) {
	acct, err := ledger.GetAccount(kv, a)
	if err != nil {
		return 0, fmt.Errorf("reading the account: %w", err)
	}
	held := acct.Balance
	add := func(n uint64) { // saturating

		if held+n < held {
			held = ^uint64(0)
		} else {
			held += n
		}
	}
	if p, ok, err := ledger.GetProvider(kv, a); err != nil {
		return 0, fmt.Errorf("reading the provider: %w", err)
	} else if ok {
		add(p.Stake)
	}
	seen := 0
	var jerr error
	ledger.JobsOf(kv, a, func(id uint64) bool {
		j, ok, err := ledger.GetJob(kv, id)
		if err != nil {
			jerr = err
			return false
		}
		if ok && !j.Done() {
			add(j.Escrow)
		}
		seen++
		return seen < liveJobsCounted
	})
	if jerr != nil {
		return 0, fmt.Errorf("reading its jobs: %w", jerr)
	}
	return held, nil
}

// blobAllowance says how many bytes an account may keep in the node's
// gateway that no job references: blob.AllowanceFor what it holds
// (blobHeld) at usyncPerGiB. A fresh key or a dust account gets nothing,
// and N accounts get what one holding the same tokens gets.
func blobAllowance(view func() (ledger.KV, func()), usyncPerGiB uint64) func(address.Address) (blob.Allowance, error) {
	if usyncPerGiB == 0 {
		usyncPerGiB = blob.DefaultUSyncPerGiB
	}
	return func(a address.Address) (blob.Allowance, error) {
		kv, release := view()
		defer release()
		held, err := blobHeld(kv, a)
		if err != nil {
			return blob.Allowance{}, err
		}
		return blob.Allowance{
			Bytes: blob.AllowanceFor(held, usyncPerGiB),
			Basis: fmt.Sprintf("it holds %s (balance, provider stake and the escrow of its unfinished jobs), and this node keeps 1 GiB of uploads that no job references for each %s an account holds, in whole MiB (blob_usync_per_gib)",
				jobspec.Amount(held), jobspec.Amount(usyncPerGiB)),
		}, nil
	}
}

// blobQuota is the gateway's quota from the node's config: each account's
// cap (its allowance may give it less) and the bound on all unreferenced
// uploads together.
func blobQuota(cfg *validator.Config) blob.Quota {
	q := blob.Quota{Bytes: cfg.BlobAccountMaxBytes, Blobs: blob.DefaultQuotaBlobs, NodeBytes: cfg.BlobUnreferencedMaxBytes}
	if q.Bytes == 0 {
		q.Bytes = blob.DefaultQuotaBytes
	}
	if q.NodeBytes == 0 {
		q.NodeBytes = blob.DefaultQuotaNodeBytes
	}
	return q
}

// gatewayLimits sizes the gateway's upload caps to the API's connection
// cap: an upload holds a connection and a temporary file.
func gatewayLimits(conns int) blob.Limits {
	return blob.Limits{MaxUploads: min(blob.DefaultMaxUploads, max(conns/4, 4))}
}

// sweepEvery is how often a node collects blobs; allowanceEvery how often
// it checks that every account with uploads no job references still holds
// what pays for them.
const (
	sweepEvery     = 10 * time.Minute
	allowanceEvery = 30 * time.Second
)

// blobKeeper is what the node's sweeper needs: the store, the ledger, and
// the rules of what is kept.
type blobKeeper struct {
	store     *blob.Store
	view      func() (ledger.KV, func())
	retention time.Duration
	quota     blob.Quota
	allowance func(address.Address) (blob.Allowance, error)
	// perGiB is the node's blob_usync_per_gib (0: the default).
	perGiB uint64
	log    *slog.Logger
}

func (k *blobKeeper) usyncPerGiB() uint64 {
	if k.perGiB == 0 {
		return blob.DefaultUSyncPerGiB
	}
	return k.perGiB
}

// run sweeps until ctx ends: every sweepEvery it collects blobs
// (sweepOnce), and every allowanceEvery it takes back what accounts keep
// beyond their allowance (enforceAllowances).
func (k *blobKeeper) run(ctx context.Context) {
	sweep, check := time.NewTicker(sweepEvery), time.NewTicker(allowanceEvery)
	defer sweep.Stop()
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sweep.C:
			kv, release := k.view()
			sweepOnce(k.store, jobsIn(kv), k.retention, time.Now(), k.log)
			release()
		case <-check.C:
			k.enforceAllowances(time.Now())
		}
	}
}

func jobsIn(kv ledger.KV) func(func(*ledger.Job) bool) error {
	return func(fn func(*ledger.Job) bool) error { return ledger.JobsFrom(kv, 0, fn) }
}

// enforceAllowances re-reads the allowance of every account with uploads
// no job references. Those that hold more than it (they moved or spent
// what paid for it) first have the blobs jobs now reference released, then
// lose their oldest uploads until they fit: tokens moved from account to
// account buy room once, for at most allowanceEvery. An account whose
// allowance cannot be read keeps what it has until the next check.
func (k *blobKeeper) enforceAllowances(now time.Time) {
	limit := func(a address.Address) (int64, bool) {
		al, err := k.allowance(a)
		if err != nil {
			k.log.Warn("blob allowance: reading the account; its uploads stay until the next check", "account", a, "err", err)
			return 0, false
		}
		if k.quota.Bytes >= 0 {
			al.Bytes = min(al.Bytes, k.quota.Bytes)
		}
		return al.Bytes, true
	}
	var over []address.Address
	for _, a := range k.store.Accounts() {
		if keep, ok := limit(a); ok && k.store.UsageOf(a).Bytes > keep {
			over = append(over, a)
		}
	}
	if len(over) == 0 {
		return
	}
	kv, release := k.view()
	plan, err := planRetention(jobsIn(kv), k.store.FetchedAt, now, k.retention)
	release()
	if err != nil {
		k.log.Error("blob allowance: reading the jobs' blobs; nothing evicted", "err", err)
		return
	}
	referenced := func(h blob.Hash) bool { return plan.keep[h] }
	k.store.Release(referenced)
	for _, a := range over {
		keep, ok := limit(a)
		if !ok || k.store.UsageOf(a).Bytes <= keep {
			continue
		}
		res := k.store.Evict(a, keep, referenced)
		k.log.Info("blob allowance: evicted uploads an account no longer holds enough for", "account", a, "allowance", keep,
			"dropped", res.Dropped, "deleted", res.Deleted, "freed_bytes", res.FreedBytes)
	}
}

// sweepOnce is one round of the sweeper at now over the ledger's jobs: it
// deletes the blobs whose retention has passed (planRetention) and
// collects the blobs no job names once blob.DefaultSweepGrace has passed
// since their last upload.
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
