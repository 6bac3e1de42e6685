package blob

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// Client talks to a blob gateway. It verifies every hash itself, so it
// need not trust the gateway.
type Client struct {
	base string
	// HTTPClient, if non-nil, is used instead of http.DefaultClient. It
	// should have no overall Timeout: blobs can be large; bound calls
	// with their context instead.
	HTTPClient *http.Client
	// Signer, when set, signs an upload ticket for each upload, so that
	// the gateway charges it to the signer's account (see Ticket). Token,
	// when set instead, is sent as the node's API token. A gateway that
	// requires neither ignores them.
	Signer Signer
	Token  string
	// AnswerTimeout bounds the wait for a download's answer (0:
	// DefaultAnswerTimeout): a gateway that lacks the blob fetches all of
	// it from a peer before it answers. IdleTimeout bounds how long a
	// download's body may send nothing (0: DefaultDownloadIdle). A download
	// that stalls fails instead of holding its caller, a provider's run
	// that cannot start without its inputs, forever.
	AnswerTimeout, IdleTimeout time.Duration
}

// Download bounds (Client.AnswerTimeout, Client.IdleTimeout): a gateway
// fetching from a peer may take DefaultFetchTimeout before it answers; a
// body that sends nothing for a minute has stalled.
const (
	DefaultAnswerTimeout = DefaultFetchTimeout + time.Minute
	DefaultDownloadIdle  = time.Minute
)

// NewClient returns a client for the gateway at base, such as
// "http://127.0.0.1:26657".
func NewClient(base string) *Client {
	return &Client{base: strings.TrimRight(base, "/")}
}

// Base returns the gateway's base URL.
func (c *Client) Base() string { return c.base }

func (c *Client) hc() *http.Client {
	if c.HTTPClient != nil {
		return c.HTTPClient
	}
	return http.DefaultClient
}

// Put uploads everything read from r, streaming it (chunked, so its
// length need not be known), and returns the hash and length the gateway
// stored. It hashes what it sends and fails with ErrHashMismatch if the
// gateway names a different hash.
func (c *Client) Put(ctx context.Context, r io.Reader) (Hash, int64, error) {
	return c.put(ctx, r, -1, nil)
}

// PutFile uploads the file at path with its length declared up front (so
// a gateway can refuse an oversized one before it is sent). The file is
// read again from the start if the upload must be sent again (a client
// whose HTTPClient fails over between nodes moves a broken upload to the
// next node: chainclient.Failover).
func (c *Client) PutFile(ctx context.Context, path string) (Hash, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return Hash{}, 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return Hash{}, 0, err
	}
	if !info.Mode().IsRegular() {
		return Hash{}, 0, fmt.Errorf("blob upload: %s is not a regular file", path)
	}
	return c.put(ctx, f, info.Size(), func() (io.ReadCloser, error) { return os.Open(path) })
}

// put uploads r, of length bytes (-1: unknown). reopen, when not nil,
// gives the same bytes again from the start, so that the request can be
// sent again (http.Request.GetBody); the hash checked at the end is of the
// body last sent.
func (c *Client) put(ctx context.Context, r io.Reader, length int64, reopen func() (io.ReadCloser, error)) (Hash, int64, error) {
	body := &hashingReader{r: r, h: sha256.New(), done: make(chan struct{})}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.base+"/v1/blobs", body)
	if err != nil {
		return Hash{}, 0, err
	}
	req.ContentLength = length // -1: chunked
	if reopen != nil {
		// GetBody is called by the transport within Do, in this
		// goroutine, before Do returns: body is the last one sent when
		// it is read below.
		req.GetBody = func() (io.ReadCloser, error) {
			rc, err := reopen()
			if err != nil {
				return nil, err
			}
			body = &hashingReader{r: rc, h: sha256.New(), done: make(chan struct{})}
			return struct {
				io.Reader
				io.Closer
			}{body, rc}, nil
		}
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	if length > 0 {
		// The gateway refuses an upload over its size limit or the
		// account's quota before reading it: wait for its go-ahead
		// rather than send a body it will not read (and have the
		// connection reset under the refusal).
		req.Header.Set("Expect", "100-continue")
	}
	switch {
	case c.Signer != nil:
		req.Header.Set("Authorization", SignTicket(c.Signer.PrivateKey(), req.Method, req.URL.Path, length, Hash{}, time.Now().Add(ticketLifetime)))
	case c.Token != "":
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.hc().Do(req)
	if err != nil {
		return Hash{}, 0, fmt.Errorf("blob upload: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return Hash{}, 0, responseError("blob upload", resp)
	}
	var pr PutResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&pr); err != nil {
		return Hash{}, 0, fmt.Errorf("blob upload: decoding gateway response: %w", err)
	}
	// The gateway read the whole body before answering, so our reader
	// saw EOF; done makes that visible to this goroutine.
	select {
	case <-body.done:
	default:
		return Hash{}, 0, fmt.Errorf("blob upload: gateway answered %s before the upload finished", resp.Status)
	}
	if pr.Hash != body.sum || pr.Size != body.n {
		return Hash{}, 0, fmt.Errorf("blob upload: %w: sent %d bytes hashing to %s, gateway stored %d bytes as %s",
			ErrHashMismatch, body.n, body.sum, pr.Size, pr.Hash)
	}
	return pr.Hash, pr.Size, nil
}

// hashingReader hashes what is read through it and closes done at EOF,
// after which sum and n are final.
type hashingReader struct {
	r    io.Reader
	h    hash.Hash
	n    int64
	sum  Hash
	done chan struct{}
	eof  bool
}

func (hr *hashingReader) Read(p []byte) (int, error) {
	if hr.eof {
		return 0, io.EOF
	}
	n, err := hr.r.Read(p)
	hr.h.Write(p[:n])
	hr.n += int64(n)
	if err == io.EOF {
		hr.eof = true
		hr.h.Sum(hr.sum[:0])
		close(hr.done)
	}
	return n, err
}

// Stat returns the size of blob h on the gateway, or ErrNotFound.
func (c *Client) Stat(ctx context.Context, h Hash) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, c.base+"/v1/blobs/"+h.String(), nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.hc().Do(req)
	if err != nil {
		return 0, fmt.Errorf("blob stat: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, responseError("blob stat "+h.String(), resp)
	}
	return resp.ContentLength, nil
}

// Get streams blob h into w and returns the number of bytes written. It
// hashes the bytes as they pass and returns ErrHashMismatch if they do
// not hash to h. On any error, what was written to w is garbage and must
// be discarded. A gateway that finds its own copy corrupt cuts the
// response short, which Get reports as io.ErrUnexpectedEOF.
func (c *Client) Get(ctx context.Context, h Hash, w io.Writer) (int64, error) {
	return c.GetForJob(ctx, h, 0, w)
}

// GetForJob is Get for a blob that job (0: none) references: the gateway,
// if it lacks the blob, fetches it from the node the job says holds it
// (docs/blobs.md).
func (c *Client) GetForJob(ctx context.Context, h Hash, job uint64, w io.Writer) (int64, error) {
	u := c.base + "/v1/blobs/" + h.String()
	if job != 0 {
		u += "?job=" + strconv.FormatUint(job, 10)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	answer, idle := cmpOr(c.AnswerTimeout, DefaultAnswerTimeout), cmpOr(c.IdleTimeout, DefaultDownloadIdle)
	waiting := time.AfterFunc(answer, func() { cancel(fmt.Errorf("the gateway did not answer within %v", answer)) })
	resp, err := c.hc().Do(req)
	waiting.Stop()
	if err != nil {
		return 0, fmt.Errorf("blob download %s: %w", h, orCause(ctx, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, responseError("blob download "+h.String(), resp)
	}
	hasher := sha256.New()
	body := &idleReader{r: resp.Body, idle: idle, timer: time.AfterFunc(idle, func() { cancel(fmt.Errorf("the download sent nothing for %v", idle)) })}
	defer body.timer.Stop()
	n, err := io.Copy(io.MultiWriter(w, hasher), body)
	if err != nil {
		return n, fmt.Errorf("blob download %s: after %d of %d bytes: %w", h, n, resp.ContentLength, orCause(ctx, err))
	}
	var got Hash
	hasher.Sum(got[:0])
	if got != h {
		return n, fmt.Errorf("blob download: %w: asked for %s, received %d bytes hashing to %s", ErrHashMismatch, h, n, got)
	}
	return n, nil
}

// responseError turns a gateway's error response into an error wrapping
// the matching sentinel.
func responseError(op string, resp *http.Response) error {
	var er errorResponse
	if resp.Request == nil || resp.Request.Method != http.MethodHead {
		json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&er)
	}
	msg := er.Message
	if msg == "" {
		msg = "(no error message)"
	}
	var sentinel error
	switch resp.StatusCode {
	case http.StatusNotFound:
		sentinel = ErrNotFound
	case http.StatusRequestEntityTooLarge:
		sentinel = ErrTooLarge
	case http.StatusUnprocessableEntity:
		sentinel = ErrHashMismatch
	case http.StatusInsufficientStorage:
		sentinel = ErrNoSpace
	case http.StatusForbidden:
		if er.Code == codeQuota {
			sentinel = ErrQuota
		}
	case http.StatusBadRequest:
		if strings.Contains(msg, ErrBadHash.Error()) {
			sentinel = ErrBadHash
		}
	}
	return &GatewayError{Op: op, StatusCode: resp.StatusCode, Message: msg, err: sentinel}
}

// GatewayError is an error answer from a gateway. It unwraps to the
// matching sentinel (ErrNotFound, ErrTooLarge, ErrHashMismatch,
// ErrNoSpace, ErrBadHash, ErrQuota), if any.
type GatewayError struct {
	Op         string // what the client was doing
	StatusCode int
	Message    string // the gateway's "message" text, or the status line
	err        error
}

func (e *GatewayError) Error() string {
	return fmt.Sprintf("%s: gateway answered %d %s: %s", e.Op, e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// Unwrap returns the sentinel matching the status, or nil.
func (e *GatewayError) Unwrap() error { return e.err }

// cmpOr is d, or def when d is not positive.
func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// orCause is err, or the cause ctx was cancelled with when that is what
// ended the call (a download's own bound, which says more than "context
// canceled").
func orCause(ctx context.Context, err error) error {
	if c := context.Cause(ctx); c != nil && ctx.Err() != nil && !errors.Is(c, context.Canceled) {
		return fmt.Errorf("%w (%v)", c, err)
	}
	return err
}
