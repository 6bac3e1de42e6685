package apiserver

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

// JobList is GET /v1/jobs?owner=ADDR and GET /v1/providers/{addr}/jobs.
type JobList struct {
	Jobs   []*ledger.Job `json:"jobs"`
	Height uint64        `json:"height"`
}

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
		writeError(w, http.StatusInternalServerError, ledger.CodeOf(err), err.Error())
		return
	}
	if !found {
		writeError(w, http.StatusNotFound, ledger.ErrUnknownJob.Code, fmt.Sprintf("no job %d", id))
		return
	}
	writeJSON(w, http.StatusOK, j)
}

// jobs serves GET /v1/jobs?owner=ADDR&limit=N: the owner's jobs, newest
// first.
func (s *Server) jobs(w http.ResponseWriter, r *http.Request) {
	owner, err := address.Parse(r.URL.Query().Get("owner"))
	if err != nil {
		writeError(w, http.StatusBadRequest, ledger.ErrInvalidAddress.Code, "owner: "+err.Error())
		return
	}
	limit := 100
	if l := r.URL.Query().Get("limit"); l != "" {
		if limit, err = strconv.Atoi(l); err != nil || limit < 1 || limit > 1000 {
			writeError(w, http.StatusBadRequest, 0, fmt.Sprintf("limit %q: want 1 to 1000", l))
			return
		}
	}
	kv, release := s.chain.View()
	defer release()
	out := JobList{Jobs: []*ledger.Job{}, Height: ledger.Height(kv)}
	ledger.JobsOf(kv, owner, func(id uint64) bool {
		if j, ok, e := ledger.GetJob(kv, id); e == nil && ok {
			out.Jobs = append(out.Jobs, j)
		}
		return len(out.Jobs) < limit
	})
	writeJSON(w, http.StatusOK, out)
}

// providerJobs serves GET /v1/providers/{addr}/jobs: the jobs assigned to
// a provider and not finished, which its agent runs.
func (s *Server) providerJobs(w http.ResponseWriter, r *http.Request) {
	a, ok := parseAddr(w, r)
	if !ok {
		return
	}
	kv, release := s.chain.View()
	defer release()
	out := JobList{Jobs: []*ledger.Job{}, Height: ledger.Height(kv)}
	for _, id := range ledger.ActiveJobsOf(kv, a) {
		if j, ok, err := ledger.GetJob(kv, id); err == nil && ok {
			out.Jobs = append(out.Jobs, j)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// quote serves POST /v1/quote with a ledger.JobSpec: what submitting it
// now would give.
func (s *Server) quote(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, 0, "spec: "+err.Error())
		return
	}
	var spec ledger.JobSpec
	dec := json.NewDecoder(bytesReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		writeError(w, http.StatusBadRequest, ledger.ErrDecode.Code, "spec: "+err.Error())
		return
	}
	kv, release := s.chain.View()
	defer release()
	q, err := ledger.QuoteJob(kv, &spec)
	if err != nil {
		writeError(w, http.StatusBadRequest, ledger.CodeOf(err), err.Error())
		return
	}
	writeJSON(w, http.StatusOK, q)
}
