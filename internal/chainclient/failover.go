package chainclient

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// Failover is an http.RoundTripper over the APIs of several nodes of one
// network. A request addressed to any of them (its URL begins with one of
// the base URLs) goes to the one that answered last; when that one cannot
// be reached it moves on to the next, in order, each at most once per
// request, and sticks to the first that answers. Requests to other URLs
// pass through unchanged.
//
// A request moves on:
//   - when the connection could not be made (refused, no route, dial
//     timeout): the request was never sent;
//   - when the node answered 502 or 503 (it did not act on the request);
//   - for GET, HEAD, PUT and OPTIONS (safe to repeat: blob uploads are
//     content-addressed), also when the connection broke after the request
//     was sent, or the node answered 504.
//
// A POST whose connection broke after sending (a tx that may have reached
// the node) is not repeated: its error is returned, and the next request
// starts at the next node. A body is sent again only if the request has
// GetBody (http.NewRequest sets it for in-memory bodies); a streamed body
// is sent once.
type Failover struct {
	bases []string
	cur   atomic.Int64
	next  http.RoundTripper
}

// NewFailover returns a Failover over bases (each "http://host:port",
// without a trailing slash) sending through next (nil:
// DefaultTransport).
func NewFailover(bases []string, next http.RoundTripper) *Failover {
	if next == nil {
		next = DefaultTransport()
	}
	return &Failover{bases: bases, next: next}
}

// DefaultTransport is http.DefaultTransport's settings with a 5 s dial
// timeout, so that a node whose host is gone is passed over in seconds.
func DefaultTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return t
}

// Bases returns the base URLs, in order.
func (f *Failover) Bases() []string { return append([]string(nil), f.bases...) }

// Current returns the base URL requests go to now.
func (f *Failover) Current() string { return f.bases[f.cur.Load()] }

// RoundTrip implements http.RoundTripper.
func (f *Failover) RoundTrip(req *http.Request) (*http.Response, error) {
	rest, ok := f.strip(req.URL.String())
	if !ok || len(f.bases) == 1 {
		return f.next.RoundTrip(req)
	}
	n := int64(len(f.bases))
	start := f.cur.Load()
	var errs []error
	for k := range n {
		i := (start + k) % n
		r, err := f.retarget(req, f.bases[i]+rest, k > 0)
		if err != nil {
			break // the body cannot be sent again
		}
		resp, err := f.next.RoundTrip(r)
		last := k == n-1
		switch {
		case err == nil && !unavailable(req.Method, resp.StatusCode):
			f.cur.Store(i)
			return resp, nil
		case err == nil:
			if last {
				f.cur.Store((i + 1) % n)
				return resp, nil
			}
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
			errs = append(errs, errors.New(f.bases[i]+": "+resp.Status))
		case req.Context().Err() != nil:
			return nil, err
		default:
			errs = append(errs, err)
			if !isDialError(err) && !idempotent(req.Method) {
				f.cur.Store((i + 1) % n)
				return nil, err
			}
		}
		f.cur.CompareAndSwap(i, (i+1)%n)
	}
	if len(errs) == 0 {
		errs = append(errs, errors.New("no node to send the request to"))
	}
	return nil, errors.Join(errs...)
}

// strip returns what follows the base URL that u begins with.
func (f *Failover) strip(u string) (string, bool) {
	for _, b := range f.bases {
		if rest, ok := strings.CutPrefix(u, b); ok && (rest == "" || rest[0] == '/' || rest[0] == '?') {
			return rest, true
		}
	}
	return "", false
}

// retarget returns req addressed to u; again says the body was sent
// before and must be got anew.
func (f *Failover) retarget(req *http.Request, u string, again bool) (*http.Request, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return nil, err
	}
	r := req.Clone(req.Context())
	r.URL, r.Host = pu, ""
	if again && req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return nil, errors.New("body not replayable")
		}
		if r.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// unavailable reports whether a node's answer says it did not act on the
// request and another node should be asked.
func unavailable(method string, status int) bool {
	switch status {
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		return true
	case http.StatusGatewayTimeout:
		return idempotent(method)
	}
	return false
}

func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodOptions:
		return true
	}
	return false
}

// isDialError reports whether err happened before the request was sent:
// the connection was never made.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
