package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiserver"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/blob"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Data across nodes: where the gateway may fetch a blob it lacks (the node
// a job or result says holds it, then the known nodes), what the node
// stores (GET /v1/storage), and the owner saying it fetched a job's
// outputs (POST /v1/jobs/{id}/fetched), which ends their retention early.

// fetchedGrace is how long outputs are kept after their owner said it
// fetched them: long enough for a second look.
const fetchedGrace = 10 * time.Minute

// sealedBound is the most bytes a sealed (encrypted) archive of at most
// plain bytes may have: age adds 16 bytes per 64 KiB chunk and a header,
// the archive a header per file.
func sealedBound(plain uint64) int64 {
	const slack = 1 << 20
	if plain > 1<<61 {
		return 0 // the store's own limit
	}
	return int64(2*plain + slack)
}

// dataSources decides, for the gateway, where a missing blob may be
// fetched from: only a blob the named job references, and only from known
// nodes.
type dataSources struct {
	view  func() (ledger.KV, func())
	peers *peerBook
}

// BlobSources implements blob.Sources.
func (d *dataSources) BlobSources(_ context.Context, h blob.Hash, job uint64) ([]string, int64, error) {
	if job == 0 {
		return nil, 0, fmt.Errorf("%w: name the job that references it (GET /v1/blobs/%s?job=ID) to have this node fetch it from the node that holds it", blob.ErrNotReferenced, h)
	}
	kv, release := d.view()
	j, ok, err := ledger.GetJob(kv, job)
	release()
	if err != nil {
		return nil, 0, err
	}
	if !ok {
		return nil, 0, fmt.Errorf("%w: there is no job %d", blob.ErrNotReferenced, job)
	}
	at, maxBytes, ok := jobHolds(j, h.String())
	if !ok {
		return nil, 0, fmt.Errorf("%w: job %d does not name %s", blob.ErrNotReferenced, job, h)
	}
	return d.order(at), maxBytes, nil
}

// jobHolds reports whether j names the blob ref, where it says the blob
// was put and the most bytes it may have (0: the store's limit).
func jobHolds(j *ledger.Job, ref string) (at string, maxBytes int64, ok bool) {
	switch ref {
	case j.Spec.Module, judgeProgram(j):
		return j.DataAt, 0, true
	case j.InputBlob:
		return j.DataAt, sealedBound(j.Spec.Disk), true
	}
	for _, a := range j.Assignments {
		if r := a.Result; r != nil {
			switch ref {
			case r.OutputBlob:
				return r.DataAt, sealedBound(j.Spec.Disk), true
			case r.LogBlob:
				return r.DataAt, 0, true
			}
		}
	}
	return "", 0, false
}

// judgeProgram is the blob of j's judge program (compare.program), or ""
// when it has none.
func judgeProgram(j *ledger.Job) string {
	if c := j.Spec.Compare; c != nil && c.Program != "" {
		return c.Program
	}
	return ""
}

// order lists the nodes to ask: the one that holds the blob first when it
// is a known node (a data_at that is not is never dialled: it is whatever
// the submitter wrote), then every other known node.
func (d *dataSources) order(at string) []string {
	peers := d.peers.List()
	var urls []string
	if at = canonURL(at); at != "" && at != d.peers.self && d.peers.Known(at) {
		urls = append(urls, at)
	}
	for _, p := range peers {
		if p != at {
			urls = append(urls, p)
		}
	}
	return urls
}

// dataRoutes serves GET /v1/storage and POST /v1/jobs/{id}/fetched.
func dataRoutes(k *blobKeeper) []apiserver.Route {
	s, view, retention := k.store, k.view, k.retention
	storage := func(w http.ResponseWriter, r *http.Request) {
		n, bytes, err := s.Usage()
		if err != nil {
			apiserver.WriteJSON(w, http.StatusInternalServerError, apiwire.ErrorBody{Code: apiwire.CodeInternal, Message: err.Error()})
			return
		}
		unref, arriving := s.Unreferenced()
		out := apiwire.Storage{Blobs: n, Bytes: bytes, MaxBlobBytes: s.MaxBlobBytes(),
			RetentionSeconds: int64(retention.Seconds()), FetchedGraceSeconds: int64(fetchedGrace.Seconds()),
			UnreferencedBytes: unref + arriving, UnreferencedMaxBytes: k.quota.NodeBytes, USyncPerGiB: k.usyncPerGiB()}
		if a := r.URL.Query().Get("account"); a != "" {
			addr, err := address.Parse(a)
			if err != nil {
				apiserver.WriteJSON(w, http.StatusBadRequest, apiwire.ErrorBody{Code: apiwire.CodeInvalidArgument, Message: "account: " + err.Error()})
				return
			}
			u := s.UsageOf(addr)
			acct := &apiwire.AccountStorage{Address: addr.String(), Bytes: u.Bytes, Blobs: u.Blobs, InFlight: u.InFlight, QuotaBytes: k.quota.Bytes, QuotaBlobs: k.quota.Blobs}
			if k.view != nil {
				kv, release := k.view()
				held, err := blobHeld(kv, addr)
				release()
				if err != nil {
					apiserver.WriteJSON(w, http.StatusInternalServerError, apiwire.ErrorBody{Code: apiwire.CodeInternal, Message: err.Error()})
					return
				}
				acct.Held = held
				if al := blob.AllowanceFor(held, k.usyncPerGiB()); acct.QuotaBytes < 0 || al < acct.QuotaBytes {
					acct.QuotaBytes = al
				}
			}
			out.Account = acct
		}
		apiserver.WriteJSON(w, http.StatusOK, out)
	}
	fetched := func(w http.ResponseWriter, r *http.Request) {
		fail := func(status int, code, msg string) {
			apiserver.WriteJSON(w, status, apiwire.ErrorBody{Code: code, Message: msg})
		}
		id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
		if err != nil || id == 0 {
			fail(http.StatusBadRequest, apiwire.CodeInvalidArgument, "id: want a job id")
			return
		}
		who, err := blob.VerifySignedRequest(r, time.Now())
		if err != nil {
			fail(http.StatusUnauthorized, apiwire.CodeUnauthorized, err.Error())
			return
		}
		kv, release := view()
		j, ok, err := ledger.GetJob(kv, id)
		release()
		switch {
		case err != nil:
			fail(http.StatusInternalServerError, apiwire.CodeInternal, err.Error())
			return
		case !ok:
			fail(http.StatusNotFound, apiwire.CodeNotFound, fmt.Sprintf("no job %d", id))
			return
		case j.Owner != who:
			fail(http.StatusForbidden, apiwire.CodeForbidden, fmt.Sprintf("job %d belongs to %s; only its owner says when its outputs were fetched", id, j.Owner))
			return
		}
		r0 := j.DeliveredResult()
		if !j.Done() || r0 == nil {
			fail(http.StatusConflict, apiwire.CodeConflict, fmt.Sprintf("job %d is %s and has no outputs to fetch", id, j.State))
			return
		}
		marked := 0
		for _, ref := range fetchedRefs(j, r0) {
			h, err := blob.ParseHash(ref)
			if err != nil {
				continue
			}
			if _, err := s.Stat(h); errors.Is(err, blob.ErrNotFound) {
				continue
			}
			if err := s.MarkFetched(h); err != nil {
				fail(http.StatusInternalServerError, apiwire.CodeInternal, err.Error())
				return
			}
			marked++
		}
		apiserver.WriteJSON(w, http.StatusOK, apiwire.OutputsFetched{Marked: marked})
	}
	return []apiserver.Route{
		{Method: "GET", Path: "/v1/storage", ID: "getStorage", Tag: "blobs",
			Summary: "What this node's blob gateway stores, how long it keeps finished jobs' blobs, its bound on uploads no job references, and with ?account= that account's usage against its quota (what it holds on the ledger buys)",
			Query:   []apiserver.Param{{Name: "account", Type: "string", Desc: "an account address (gpu1…)"}},
			Resp:    apiwire.Storage{}, Errors: []int{400}, Handler: http.HandlerFunc(storage)},
		{Method: "POST", Path: "/v1/jobs/{id}/fetched", ID: "postOutputsFetched", Tag: "blobs",
			Summary: "The job's owner says it fetched the outputs (Authorization: Gpunet-Ticket signed by the owner for this request, size 0); the node keeps them a short grace longer, not the whole retention",
			Resp:    apiwire.OutputsFetched{}, Errors: []int{400, 401, 403, 404, 409}, Handler: http.HandlerFunc(fetched)},
	}
}

// fetchedRefs are the blobs an owner's "fetched" lets go early: the
// delivered result's outputs and log, and for a gang every member's (the
// owner fetches them all, under rank-N/).
func fetchedRefs(j *ledger.Job, delivered *ledger.JobResult) []string {
	refs := []string{delivered.OutputBlob, delivered.LogBlob}
	if !j.Spec.Gang() {
		return refs
	}
	for _, a := range j.Assignments {
		if r := a.Result; r != nil && r != delivered {
			refs = append(refs, r.OutputBlob, r.LogBlob)
		}
	}
	return refs
}

// retentionPlan decides, for the blobs the ledger's jobs name, which to
// keep and which have expired: every blob of a job not finished is kept;
// a finished job's blobs are kept for retention after it finished, and
// its results' outputs and logs only until fetchedGrace after their owner
// said it fetched them. A blob two jobs name is kept if either keeps it.
type retentionPlan struct {
	keep    map[blob.Hash]bool
	expired map[blob.Hash]bool
}

func planRetention(jobs func(func(*ledger.Job) bool) error, fetchedAt func(blob.Hash) (time.Time, bool), now time.Time, retention time.Duration) (retentionPlan, error) {
	p := retentionPlan{keep: map[blob.Hash]bool{}, expired: map[blob.Hash]bool{}}
	err := jobs(func(j *ledger.Job) bool {
		live := !j.Done() || now.Before(time.Unix(j.FinishedAt, 0).Add(retention))
		add := func(ref string, output bool) {
			h, err := blob.ParseHash(ref)
			if err != nil {
				return
			}
			keep := live
			if keep && output && j.Done() {
				if at, ok := fetchedAt(h); ok && now.After(at.Add(fetchedGrace)) {
					keep = false
				}
			}
			if keep {
				p.keep[h] = true
			} else {
				p.expired[h] = true
			}
		}
		add(j.Spec.Module, false)
		if p := judgeProgram(j); p != "" {
			add(p, false)
		}
		add(j.InputBlob, false)
		for _, a := range j.Assignments {
			if a.Result != nil {
				add(a.Result.OutputBlob, true)
				add(a.Result.LogBlob, true)
			}
		}
		return true
	})
	for h := range p.keep {
		delete(p.expired, h)
	}
	return p, err
}
