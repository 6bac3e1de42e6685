package dashboard

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/jobclient"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
)

// MaxLogBytes bounds the log text one answer of the log route carries: of
// a longer log it holds the end (JobLog.Truncated); `gpunet job logs`
// prints all of it.
const MaxLogBytes = 1 << 20

// Log sources.
const (
	// LogFromResult: the full log the job's delivered result holds.
	LogFromResult = "result"
	// LogLive: chunks of the live log the providers relay through the
	// node while the job runs.
	LogLive = "live"
)

// JobLog is GET /v1/dashboard/jobs/{id}/log: a job's log, decrypted with
// its owner's key from the node's keyring.
type JobLog struct {
	Job uint64 `json:"job"`
	// Key is the keyring name of the owner's key.
	Key    string `json:"key"`
	Source string `json:"source"` // LogFromResult or LogLive
	Text   string `json:"text"`
	// Next is, for a live log, the chunk to ask from next (?from=).
	Next uint64 `json:"next"`
	// Truncated says the log was longer than MaxLogBytes: Text is its end.
	Truncated bool `json:"truncated"`
	// Final says no more will come: the text is the result's whole log,
	// or the job ended without a result.
	Final bool `json:"final"`
}

// jobLog serves a job's log to the dashboard: while the job runs, the live
// chunks from ?from= on; once it has a delivered result, that result's log.
// Both are sealed to the job's owner, so the node answers only for a job
// whose owner's key is in its keyring (the route needs the API token, as
// submitting with those keys does).
func (d *Dashboard) jobLog(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("job id %q: want a positive integer", r.PathValue("id")))
		return
	}
	var from uint64
	if f := r.URL.Query().Get("from"); f != "" {
		if from, err = strconv.ParseUint(f, 10, 64); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("from %q: want the next of the previous answer (a non-negative integer)", f))
			return
		}
	}
	cl := chainclient.New(d.o.API())
	j, err := cl.Job(r.Context(), id)
	if chainclient.IsNotFound(err) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no job %d", id))
		return
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("job %d: %v", id, err))
		return
	}
	key, status, err := d.ownerKey(j)
	if err != nil {
		writeError(w, status, err.Error())
		return
	}
	jc := jobclient.New(cl, key, d.o.Home, d.o.ChainID)
	out := JobLog{Job: id, Key: key.Name}
	var text tailBuffer
	if j.DeliveredResult() != nil {
		out.Source, out.Final = LogFromResult, true
		err = jc.FetchLogs(r.Context(), j, &text)
	} else {
		// While it runs, and for a job that ended without a result, the
		// chunks the relay holds.
		out.Source, out.Final, out.Next = LogLive, j.Done(), from
		err = jc.StreamLogs(r.Context(), id, &out.Next, &text)
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("job %d's log: %v", id, err))
		return
	}
	out.Text, out.Truncated = text.String(), text.dropped
	writeJSON(w, http.StatusOK, out)
}

// ownerKey finds j's owner in the node's keyring and unlocks it; on failure
// it returns the HTTP status to answer with.
func (d *Dashboard) ownerKey(j *ledger.Job) (*keys.Key, int, error) {
	kr, err := d.keyring()
	if err != nil {
		return nil, http.StatusInternalServerError, err
	}
	list, err := kr.List()
	if err != nil {
		return nil, http.StatusInternalServerError, err
	}
	for _, k := range list {
		if k.Address != j.Owner {
			continue
		}
		key, err := kr.Get(k.Name)
		if err != nil {
			return nil, http.StatusForbidden, fmt.Errorf("job %d's owner is %q of this node's keyring, which the node cannot open: %w; run gpunet job logs %d --from %s", j.ID, k.Name, err, j.ID, k.Name)
		}
		return key, 0, nil
	}
	return nil, http.StatusNotFound, fmt.Errorf("job %d's owner %s is not a key of this node's keyring: its log is sealed to that key; run gpunet job logs %d --from KEY where the key is", j.ID, j.Owner, j.ID)
}

// tailBuffer keeps the last MaxLogBytes written to it.
type tailBuffer struct {
	b       bytes.Buffer
	dropped bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n, err := t.b.Write(p)
	if t.b.Len() > 2*MaxLogBytes {
		t.trim()
	}
	return n, err
}

func (t *tailBuffer) trim() {
	if extra := t.b.Len() - MaxLogBytes; extra > 0 {
		t.b.Next(extra)
		t.dropped = true
	}
}

func (t *tailBuffer) String() string {
	t.trim()
	return t.b.String()
}
