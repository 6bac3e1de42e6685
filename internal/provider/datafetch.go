package provider

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/blob"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Getting a job's data, and what a provider does when it cannot. A job's
// module and inputs come through the node's gateway (which fetches them
// from the node that holds them); URL inputs straight from their URL,
// checked against their hash. When that fails (the blob is missing on
// every node, the URL is down, the content does not match its hash) the
// agent does not run the job in a loop: it waits longer after each
// failure (fetchBackoffMin doubling up to fetchBackoffMax), logs the
// reason once (again only when it changes), and after releaseAfter of
// failures (or failedPermanently times for a failure that retrying will
// not mend) hands the job back on chain (MsgReleaseJob) with the reason.

// Backoff and release bounds.
const (
	fetchBackoffMin = time.Second
	fetchBackoffMax = 30 * time.Second
	releaseAfter    = 90 * time.Second
	// failedPermanently is how many times a failure that retrying will
	// not mend (a hash mismatch, content too large) is seen before the
	// job is handed back.
	failedPermanently = 3
	urlFetchTimeout   = 10 * time.Minute
)

// dataError is a failure to get a job's data. Permanent marks one that
// retrying will not mend.
type dataError struct {
	err       error
	permanent bool
}

func (e *dataError) Error() string { return e.err.Error() }
func (e *dataError) Unwrap() error { return e.err }

// fetchFailures tracks, per job assignment, the failures to get its data.
// Its zero value is ready.
type fetchFailures struct {
	mu sync.Mutex
	m  map[uint64]*fetchFailure
}

type fetchFailure struct {
	assignedAt  int64
	first, next time.Time
	attempts    int
	logged      string
	released    bool
}

// get returns the record of job id's assignment at assignedAt, a fresh
// one when the job was placed again. The caller holds f.mu.
func (f *fetchFailures) get(id uint64, assignedAt int64) *fetchFailure {
	if f.m == nil {
		f.m = map[uint64]*fetchFailure{}
	}
	r := f.m[id]
	if r == nil || r.assignedAt != assignedAt {
		r = &fetchFailure{assignedAt: assignedAt}
		f.m[id] = r
	}
	return r
}

// ready reports whether job id may be tried again at now.
func (f *fetchFailures) ready(id uint64, assignedAt int64, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.m[id]
	if r == nil || r.assignedAt != assignedAt {
		return true
	}
	return !r.released && !now.Before(r.next)
}

// failed records a failure at now with err. It returns whether to log it
// (the first time, and when the reason changed), when the next try may
// be, and whether to hand the job back now (once).
func (f *fetchFailures) failed(id uint64, assignedAt int64, now time.Time, err error) (logIt bool, next time.Time, release bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.get(id, assignedAt)
	if r.attempts == 0 {
		r.first = now
	}
	r.attempts++
	wait := fetchBackoffMin << min(r.attempts-1, 16)
	wait = min(wait, fetchBackoffMax)
	r.next = now.Add(wait)
	msg := err.Error()
	logIt = msg != r.logged
	r.logged = msg
	var de *dataError
	permanent := errors.As(err, &de) && de.permanent
	if !r.released && (now.Sub(r.first) >= releaseAfter || (permanent && r.attempts >= failedPermanently)) {
		r.released, release = true, true
	}
	return logIt, r.next, release
}

// forget drops job id's record (its run succeeded, or it is not ours).
func (f *fetchFailures) forget(id uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, id)
}

// keepOnly drops the records of jobs not in ids.
func (f *fetchFailures) keepOnly(ids map[uint64]bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id := range f.m {
		if !ids[id] {
			delete(f.m, id)
		}
	}
}

// urlClient fetches URL inputs: bounded waits for the server, and at most
// a few redirects.
var urlClient = &http.Client{
	Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		ResponseHeaderTimeout: 30 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		IdleConnTimeout:       time.Minute,
	},
	CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("more than 5 redirects")
		}
		return nil
	},
}

// fetchURLInput downloads in to its path under root, reading at most limit
// bytes (in.Size when declared), and checks its hash. Nothing is left at
// the path unless it matches.
func fetchURLInput(ctx context.Context, hc *http.Client, in ledger.URLInput, root string, limit int64) error {
	if in.Size > 0 {
		limit = min(limit, int64(in.Size))
	}
	want, err := blob.ParseHash(in.SHA256)
	if err != nil {
		return &dataError{err: err, permanent: true}
	}
	ctx, cancel := context.WithTimeout(ctx, urlFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, in.URL, nil)
	if err != nil {
		return &dataError{err: err, permanent: true}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return &dataError{err: fmt.Errorf("input %s from %s: %w", in.Path, in.URL, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &dataError{err: fmt.Errorf("input %s from %s: the server answered %s", in.Path, in.URL, resp.Status)}
	}
	if resp.ContentLength > limit {
		return &dataError{err: fmt.Errorf("input %s from %s: %w: %d bytes, the job allows %d", in.Path, in.URL, blob.ErrTooLarge, resp.ContentLength, limit), permanent: true}
	}
	dst := filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(in.Path, "/")))
	if rel, err := filepath.Rel(root, dst); err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return &dataError{err: fmt.Errorf("input path %q is outside the job's directory", in.Path), permanent: true}
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".url-input-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return &dataError{err: fmt.Errorf("input %s from %s: after %d bytes: %w", in.Path, in.URL, n, err)}
	}
	if n > limit {
		return &dataError{err: fmt.Errorf("input %s from %s: %w: more than the %d bytes the job allows", in.Path, in.URL, blob.ErrTooLarge, limit), permanent: true}
	}
	var got blob.Hash
	h.Sum(got[:0])
	if got != want {
		return &dataError{err: fmt.Errorf("input %s from %s: %w: the content hashes to %s, the job pins %s", in.Path, in.URL, blob.ErrHashMismatch, got, want), permanent: true}
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
