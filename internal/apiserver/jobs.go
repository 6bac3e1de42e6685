package apiserver

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// jobStates are the states a job can be in (DESIGN.md section 7).
var jobStates = []string{ledger.JobQueued, ledger.JobAssigned, ledger.JobRunning, ledger.JobVerifying, ledger.JobSucceeded, ledger.JobFailed, ledger.JobCancelled}

// maxJobScan bounds the job records one filtered page reads; the page then
// ends early with a cursor to go on from.
const maxJobScan = 20_000

func parseJobID(w http.ResponseWriter, s string) (uint64, bool) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		writeError(w, http.StatusBadRequest, ledger.ErrUnknownJob.Code, fmt.Sprintf("job id %q: want a positive integer", s))
		return 0, false
	}
	return id, true
}

// job serves GET /v1/jobs/{id}.
func (s *Server) job(w http.ResponseWriter, r *http.Request) {
	id, ok := parseJobID(w, r.PathValue("id"))
	if !ok {
		return
	}
	kv, release := s.chain.View()
	defer release()
	j, found, err := ledger.GetJob(kv, id)
	if err != nil {
		writeLedgerError(w, err)
		return
	}
	if !found {
		writeError(w, http.StatusNotFound, ledger.ErrUnknownJob.Code, fmt.Sprintf("no job %d", id))
		return
	}
	renderJob(j)
	writeJSON(w, http.StatusOK, j)
}

// jobs serves GET /v1/jobs?owner=ADDR&state=S: jobs, newest first. The
// cursor is the id below which the page starts.
func (s *Server) jobs(w http.ResponseWriter, r *http.Request) {
	limit, ok := pageLimit(w, r)
	if !ok {
		return
	}
	before, ok := uintCursor(w, r)
	if !ok {
		return
	}
	var owner *address.Address
	if o := r.URL.Query().Get("owner"); o != "" {
		a, err := address.Parse(o)
		if err != nil {
			writeError(w, http.StatusBadRequest, ledger.ErrInvalidAddress.Code, "owner: "+err.Error())
			return
		}
		owner = &a
	}
	state := r.URL.Query().Get("state")
	if state != "" && !slices.Contains(jobStates, state) {
		writeError(w, http.StatusBadRequest, 0, fmt.Sprintf("state %q: want one of %s", state, strings.Join(jobStates, ", ")))
		return
	}
	kv, release := s.chain.View()
	defer release()
	out := apiwire.JobList{Jobs: []*ledger.Job{}, Height: ledger.Height(kv)}
	// Candidates newest first: the owner's index, or every id down from
	// the newest.
	var ids []uint64
	var moreIDs bool
	indexed := owner != nil
	if owner != nil {
		ids, moreIDs = ledger.JobIDsOfBefore(kv, *owner, before, maxJobScan)
	} else if state != "" && s.opts.JobsInState != nil {
		// The node's index of states: read only the jobs it names.
		ids, moreIDs, indexed = s.opts.JobsInState(state, before, limit)
	}
	next := ledger.LastJobID(kv)
	if before > 0 {
		next = min(next, before-1)
	}
	scanned := 0
	for {
		var id uint64
		if indexed {
			if scanned == len(ids) {
				break
			}
			id = ids[scanned]
		} else {
			if next == 0 || scanned == maxJobScan {
				break
			}
			id, next = next, next-1
		}
		scanned++
		j, found, err := ledger.GetJob(kv, id)
		if err != nil {
			writeLedgerError(w, err)
			return
		}
		if !found || (state != "" && j.State != state) {
			continue
		}
		out.Jobs = append(out.Jobs, j)
		if len(out.Jobs) == limit {
			break
		}
		if scanned%1024 == 0 && timedOut(w, r) {
			return
		}
	}
	// More may follow unless the walk reached the oldest job.
	switch {
	case indexed && (scanned < len(ids) || moreIDs):
		out.NextCursor = uintString(ids[scanned-1])
	case !indexed && next > 0:
		out.NextCursor = uintString(next + 1)
	}
	renderJobs(out.Jobs)
	writeJSON(w, http.StatusOK, out)
}

// providerJobs serves GET /v1/providers/{addr}/jobs: the jobs assigned to
// a provider and not finished, which its agent runs, oldest first. The
// cursor is the id after which the page starts.
func (s *Server) providerJobs(w http.ResponseWriter, r *http.Request) {
	a, ok := parseAddr(w, r)
	if !ok {
		return
	}
	limit, ok := pageLimit(w, r)
	if !ok {
		return
	}
	after, ok := uintCursor(w, r)
	if !ok {
		return
	}
	kv, release := s.chain.View()
	defer release()
	out := apiwire.JobList{Jobs: []*ledger.Job{}, Height: ledger.Height(kv)}
	for _, id := range ledger.ActiveJobsOf(kv, a) {
		if id <= after {
			continue
		}
		if len(out.Jobs) == limit {
			out.NextCursor = uintString(out.Jobs[len(out.Jobs)-1].ID)
			break
		}
		j, found, err := ledger.GetJob(kv, id)
		if err != nil {
			writeLedgerError(w, err)
			return
		}
		if found {
			out.Jobs = append(out.Jobs, j)
		}
	}
	renderJobs(out.Jobs)
	writeJSON(w, http.StatusOK, out)
}

// decodeStrict reads r's body into v as JSON, refusing unknown fields;
// when it cannot, it answers the error (naming what) and reports false.
func decodeStrict(w http.ResponseWriter, r *http.Request, what string, v any) bool {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeBodyError(w, 0, what, err)
		return false
	}
	dec := json.NewDecoder(bytesReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, ledger.ErrDecode.Code, what+": "+err.Error())
		return false
	}
	return true
}

// quote serves POST /v1/quote with a ledger.JobSpec: what submitting it
// now would give.
func (s *Server) quote(w http.ResponseWriter, r *http.Request) {
	var spec ledger.JobSpec
	if !decodeStrict(w, r, "spec", &spec) {
		return
	}
	// A trust: tee job counts the providers attested at the block time
	// of the state quoted (the time placement would be checked nearest),
	// never the wall clock.
	kv, release, now, err := s.viewAt(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, 0, err.Error())
		return
	}
	defer release()
	var at time.Time
	if now != 0 {
		at = time.Unix(now, 0)
	}
	q, err := ledger.QuoteJobAt(kv, &spec, at)
	if err != nil {
		writeError(w, http.StatusBadRequest, ledger.CodeOf(err), err.Error())
		return
	}
	renderQuote(q, &spec)
	writeJSON(w, http.StatusOK, q)
}
