package provider

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/blob"
	"github.com/gpunet/gpunet/internal/egress"
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
// not mend) hands the job back on chain (MsgReleaseJob) with the reason:
// for a URL input, fixed words that carry nothing the fetch learned (see
// urlNotFetched).

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

// dataError is a failure to get a job's data. Its text (err's) is what
// the agent puts on the public ledger when it hands the job back
// (dataFailed); detail, when set, is the whole story for the provider's
// own log, and never goes on chain. Permanent marks a failure that
// retrying will not mend.
type dataError struct {
	err       error
	detail    error
	permanent bool
}

func (e *dataError) Error() string { return e.err.Error() }

func (e *dataError) Unwrap() error {
	if e.detail != nil {
		return e.detail
	}
	return e.err
}

// LogValue implements slog.LogValuer: logged, a dataError shows its detail
// too.
func (e *dataError) LogValue() slog.Value {
	if e.detail == nil {
		return slog.StringValue(e.err.Error())
	}
	return slog.StringValue(e.err.Error() + ": " + e.detail.Error())
}

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
	var de *dataError
	if errors.As(err, &de) && de.detail != nil {
		msg = de.LogValue().String()
	}
	logIt = msg != r.logged
	r.logged = msg
	permanent := de != nil && de.permanent
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

// URL inputs are written by whoever submits a job, and fetched by the
// provider: from its own network, unless it checks. The agent dials only
// public addresses (egress.Policy), checked on the address actually
// dialled after name resolution, for every connection including each
// redirect's, so a name that resolves to 127.0.0.1, a DNS answer that
// changes between a check and the dial, or a public server that redirects
// to 10.0.0.5 reach nothing; its operator may allow named networks
// (Options.AllowFetchNetworks, `provider start --allow-fetch-network`).
//
// What it says on chain. A release reason is public, and the URL was
// chosen by the submitter: whatever the fetch learned (the address a name
// resolved to, that it was refused and why, the server's status or error
// text, a byte count, the hash of the reply) would turn every provider
// into a probe of its own network that answers on the ledger. So the
// reason is the input's path (from the job's spec, public already) and one
// of three fixed phrases; the details go to the provider's log only.
//
//   - "could not be fetched": anything short of a 200 reply read to its
//     end: a refused address, a name that does not resolve, a server down
//     or slow, any status, a broken transfer. A refused address is
//     deliberately not told apart, in words or in time: it is retried and
//     handed back on the same schedule as a server that is down, so the
//     ledger does not say whether a name resolved to a private address.
//   - "is larger than the job allows" and "does not hash to its sha256":
//     said only after the agent connected to an address it allows, which
//     by default is a public one anyone can fetch from, so they tell the
//     submitter nothing it could not learn itself (they are one fixed
//     phrase each, no bytes of the reply). They are permanent (handed
//     back after failedPermanently tries). A provider that allows a
//     network lets job owners learn which of the three a URL there gets:
//     docs/jobspec.md says so.
const (
	urlNotFetched = "could not be fetched"
	urlTooLarge   = "is larger than the job allows"
	urlMismatch   = "does not hash to its sha256"
)

// urlRedirects bounds the redirects a URL input's fetch follows.
const urlRedirects = 5

// newURLClient returns the client that fetches URL inputs for an agent
// whose operator allows the networks allow besides public addresses:
// every connection (redirects' too) goes through the policy's check, no
// proxy (a proxy would dial the target itself, unchecked), bounded waits
// for the server, at most urlRedirects redirects, and no connection kept
// after a fetch.
func newURLClient(allow []netip.Prefix) *http.Client {
	policy := &egress.Policy{Allow: allow}
	dialer := &net.Dialer{Timeout: 30 * time.Second, Control: policy.Control}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           dialer.DialContext,
			ResponseHeaderTimeout: 30 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			DisableKeepAlives:     true,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= urlRedirects {
				return fmt.Errorf("more than %d redirects", urlRedirects)
			}
			return nil
		},
	}
}

// urlClient is the client for this agent's URL inputs.
func (a *Agent) urlClient() *http.Client { return newURLClient(a.o.AllowFetchNetworks) }

// fetchURLInput downloads in to its path under root, reading at most limit
// bytes (in.Size when declared), and checks its hash. Nothing is left at
// the path unless it matches. A failure to get it is a *dataError whose
// text is fit for the ledger: the input's path and a fixed phrase (see
// above), with what happened in its detail.
func fetchURLInput(ctx context.Context, hc *http.Client, in ledger.URLInput, root string, limit int64) error {
	if in.Size > 0 {
		limit = min(limit, int64(in.Size))
	}
	fail := func(what string, permanent bool, format string, args ...any) error {
		return &dataError{
			err:       fmt.Errorf("input %s %s", in.Path, what),
			detail:    fmt.Errorf("from %s: "+format, append([]any{in.URL}, args...)...),
			permanent: permanent,
		}
	}
	want, err := blob.ParseHash(in.SHA256)
	if err != nil {
		return &dataError{err: fmt.Errorf("input %s: its sha256 is not valid", in.Path), detail: err, permanent: true}
	}
	dst := filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(in.Path, "/")))
	if rel, err := filepath.Rel(root, dst); err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return &dataError{err: fmt.Errorf("input path %q is outside the job's directory", in.Path), permanent: true}
	}
	ctx, cancel := context.WithTimeout(ctx, urlFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, in.URL, nil)
	if err != nil {
		return fail(urlNotFetched, true, "%w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fail(urlNotFetched, false, "%w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fail(urlNotFetched, false, "the server answered %s", resp.Status)
	}
	if resp.ContentLength > limit {
		return fail(urlTooLarge, true, "%w: %d bytes, the job allows %d", blob.ErrTooLarge, resp.ContentLength, limit)
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
		return fail(urlNotFetched, false, "after %d bytes: %w", n, err)
	}
	if n > limit {
		return fail(urlTooLarge, true, "%w: more than the %d bytes the job allows", blob.ErrTooLarge, limit)
	}
	var got blob.Hash
	h.Sum(got[:0])
	if got != want {
		return fail(urlMismatch, true, "%w: the content hashes to %s, the job pins %s", blob.ErrHashMismatch, got, want)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
