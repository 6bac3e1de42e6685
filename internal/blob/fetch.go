package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Fetch-through: a gateway asked for a blob it lacks fetches it from
// another node's gateway that has it, checks its hash while it streams to a
// temporary file (Store.put: nothing unchecked is ever stored), keeps it and
// serves it. Which blobs may be fetched, and from where, is the Sources'
// decision: a node lets only blobs a job on its ledger names be fetched, only
// from the nodes it knows (never an open proxy, never a URL a stranger
// wrote on the ledger). One fetch per hash runs at a time; concurrent
// requests for it wait for that one.

// LocalHeader, sent with any value on a GET or HEAD, asks a gateway for
// what it holds itself: it does not fetch a missing blob from its peers.
// Gateways send it when they fetch from each other, so that a blob missing
// everywhere costs one request per node, not a loop.
const LocalHeader = "X-Gpunet-Local"

// ErrNotReferenced is returned by Sources for a blob the gateway must not
// fetch: no job it knows names it (with the request's job, that job).
var ErrNotReferenced = errors.New("no job on this node's ledger names this blob")

// Sources decides where a gateway may fetch a blob it lacks.
type Sources interface {
	// BlobSources returns the API base URLs of the nodes to try for h, in
	// order, and the most bytes h may have (0: the store's limit), for a
	// request naming job (0 when it names none). An error, typically
	// wrapping ErrNotReferenced, means h is not to be fetched; its text is
	// shown to the client.
	BlobSources(ctx context.Context, h Hash, job uint64) (urls []string, maxBytes int64, err error)
}

// FetchOptions turn on fetch-through in NewGateway.
type FetchOptions struct {
	Sources Sources
	// Client makes the requests to other gateways (nil: a client with
	// the timeouts below and no redirects).
	Client *http.Client
	// MaxConcurrent bounds the fetches in progress (0: 8); more wait.
	MaxConcurrent int
	// Timeout bounds one blob's fetch from all its sources (0: 30 min);
	// IdleTimeout the time a source may send nothing (0: 30 s).
	Timeout, IdleTimeout time.Duration
}

// Fetch defaults.
const (
	DefaultFetchConcurrency = 8
	DefaultFetchTimeout     = 30 * time.Minute
	DefaultFetchIdle        = 30 * time.Second
)

type fetcher struct {
	store    *Store
	src      Sources
	hc       *http.Client
	sem      chan struct{}
	timeout  time.Duration
	idle     time.Duration
	log      *slog.Logger
	mu       sync.Mutex
	inflight map[Hash]*fetchCall
}

type fetchCall struct {
	done chan struct{}
	err  error
}

func newFetcher(s *Store, o *FetchOptions, log *slog.Logger) *fetcher {
	f := &fetcher{store: s, src: o.Sources, hc: o.Client, timeout: o.Timeout, idle: o.IdleTimeout, log: log, inflight: map[Hash]*fetchCall{}}
	n := o.MaxConcurrent
	if n <= 0 {
		n = DefaultFetchConcurrency
	}
	f.sem = make(chan struct{}, n)
	if f.timeout <= 0 {
		f.timeout = DefaultFetchTimeout
	}
	if f.idle <= 0 {
		f.idle = DefaultFetchIdle
	}
	if f.hc == nil {
		f.hc = &http.Client{
			Transport: &http.Transport{
				Proxy:                 nil,
				ResponseHeaderTimeout: f.idle,
				TLSHandshakeTimeout:   10 * time.Second,
				MaxIdleConnsPerHost:   4,
				IdleConnTimeout:       time.Minute,
			},
			// A peer answers a blob or an error; a redirect would take
			// the request somewhere no node chose.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return f
}

// fetch makes h present in the store, fetching it from the sources for a
// request naming job. It returns nil once h is stored. The fetch itself
// runs under the fetcher's own time limit, not ctx: a client that gives up
// does not cancel it for those waiting with it.
func (f *fetcher) fetch(ctx context.Context, h Hash, job uint64) error {
	urls, maxBytes, err := f.src.BlobSources(ctx, h, job)
	if err != nil {
		return err
	}
	if maxBytes <= 0 || maxBytes > f.store.MaxBlobBytes() {
		maxBytes = f.store.MaxBlobBytes()
	}
	f.mu.Lock()
	c := f.inflight[h]
	if c == nil {
		c = &fetchCall{done: make(chan struct{})}
		f.inflight[h] = c
		go func() {
			c.err = f.run(h, urls, maxBytes)
			f.mu.Lock()
			delete(f.inflight, h)
			f.mu.Unlock()
			close(c.done)
		}()
	}
	f.mu.Unlock()
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run fetches h from the first of urls that has it.
func (f *fetcher) run(h Hash, urls []string, maxBytes int64) error {
	if len(urls) == 0 {
		return errors.New("this node knows no other node to fetch it from")
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	select {
	case f.sem <- struct{}{}:
		defer func() { <-f.sem }()
	case <-ctx.Done():
		return fmt.Errorf("waiting for a fetch slot: %w", ctx.Err())
	}
	var errs []string
	for _, u := range urls {
		err := f.from(ctx, u, h, maxBytes)
		if err == nil {
			f.log.Info("blob fetched from a peer", "hash", h, "from", u)
			return nil
		}
		f.log.Debug("blob fetch from a peer failed", "hash", h, "from", u, "err", err)
		errs = append(errs, fmt.Sprintf("%s: %v", u, err))
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("not found on any of the %d node(s) asked: %s", len(urls), strings.Join(errs, "; "))
}

// from fetches h from the gateway at base into the store.
func (f *fetcher) from(ctx context.Context, base string, h Hash, maxBytes int64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/v1/blobs/"+h.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set(LocalHeader, "1")
	resp, err := f.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return responseError("fetch", resp)
	}
	if resp.ContentLength > maxBytes {
		return fmt.Errorf("%w: it has %d bytes, at most %d are allowed for it", ErrTooLarge, resp.ContentLength, maxBytes)
	}
	body := &idleReader{r: resp.Body, idle: f.idle, timer: time.AfterFunc(f.idle, cancel)}
	defer body.timer.Stop()
	_, _, _, err = f.store.put(ctx, body, &h, maxBytes)
	if err != nil && ctx.Err() != nil && !errors.Is(err, ErrHashMismatch) {
		return fmt.Errorf("the node sent nothing for %v or the fetch took too long: %w", f.idle, err)
	}
	return err
}

// idleReader moves a deadline (a timer that cancels the fetch) forward at
// every read.
type idleReader struct {
	r     io.Reader
	idle  time.Duration
	timer *time.Timer
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.timer.Reset(r.idle)
	}
	return n, err
}
