package blob

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gpunet/gpunet/internal/address"
)

// holdBack is how many bytes of a blob the handler keeps until it has
// hashed the whole file. If the hash is wrong it aborts instead of
// sending them, so the response is always cut short of its
// Content-Length: no client, verifying or not, receives a complete
// response whose bytes do not match the name it asked for.
const holdBack = 64 << 10

// PutResponse is the JSON body of a successful PUT.
type PutResponse struct {
	Hash Hash  `json:"hash"`
	Size int64 `json:"size"`
}

// errorResponse is the JSON body of every error: the node API's shape
// (internal/apiserver), a stable code and a message.
type errorResponse struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// errorCodes are the stable codes of the statuses the gateway answers.
var errorCodes = map[int]string{
	http.StatusBadRequest:            "invalid_argument",
	http.StatusNotFound:              "not_found",
	http.StatusMethodNotAllowed:      "method_not_allowed",
	http.StatusRequestEntityTooLarge: "payload_too_large",
	http.StatusUnprocessableEntity:   "hash_mismatch",
	http.StatusInsufficientStorage:   "insufficient_storage",
	http.StatusUnauthorized:          "unauthorized",
	http.StatusForbidden:             "forbidden",
	http.StatusRequestTimeout:        "request_timeout",
	http.StatusTooManyRequests:       "too_many_requests",
	http.StatusServiceUnavailable:    "unavailable",
}

// codeQuota is the code of a 403 for a used-up quota.
const codeQuota = "quota_exceeded"

type handler struct {
	store *Store
	log   *slog.Logger
	mux   *http.ServeMux
	lim   Limits
	slots uploadSlots
	auth  *Auth
	used  usedTickets
	fetch *fetcher // nil: no fetch-through
}

// NewHandler returns the blob gateway's HTTP handler:
//
//	PUT  /v1/blobs         store the body; 201 {"hash","size"}, or 200 if it was already stored
//	PUT  /v1/blobs/{hash}  the same, failing with 422 unless the body hashes to {hash}
//	GET  /v1/blobs/{hash}  the blob, with Content-Length, ETag and X-Content-SHA256
//	HEAD /v1/blobs/{hash}  the same headers, no body
//
// With GatewayOptions.Fetch, a GET or HEAD of a blob the store lacks
// fetches it from another gateway first (fetch.go); ?job=ID names the job
// that references it, which tells the gateway where to look.
//
// Errors are JSON {"code": "...", "message": "..."}: 400 for a malformed hash, 404, 405,
// 413 over the size limit (the message states it), 422 hash mismatch, 507
// disk full. Mount it with mux.Handle("/v1/blobs", h) and
// mux.Handle("/v1/blobs/", h). A nil log discards.
//
// It applies the default Limits and lets anyone upload: a node serves
// NewGateway with an Auth instead.
func NewHandler(s *Store, log *slog.Logger) http.Handler {
	return NewGateway(s, GatewayOptions{Logger: log})
}

// GatewayOptions configure NewGateway.
type GatewayOptions struct {
	Logger *slog.Logger // nil discards
	Limits Limits
	// Auth, when set, makes every upload carry the node's API token or an
	// upload ticket, and charges ticketed uploads to their account's
	// quota and the gateway's bound on unreferenced uploads. Nil lets
	// anyone upload (tests, a private gateway).
	Auth *Auth
	// Fetch, when set, makes a GET or HEAD of a blob the store lacks
	// fetch it from another gateway first (fetch.go).
	Fetch *FetchOptions
}

// Auth is who may upload to a gateway.
type Auth struct {
	// Token, when set, is accepted as "Authorization: Bearer TOKEN" (the
	// node's api_token): its holder runs the node, so its uploads are
	// charged to no account.
	Token string
	// Quota bounds each account's unreferenced blobs, and all of them
	// together.
	Quota Quota
	// Allowance, when set, says how many bytes an account may keep that
	// no job references (at most Quota.Bytes counts; 0 refuses its
	// uploads). A node derives it from what the account holds on the
	// ledger (docs/blobs.md), so that room costs something and a fresh or
	// dust account brings none. An error (the ledger could not be read)
	// refuses the upload with 503.
	Allowance func(address.Address) (Allowance, error)
	// Now is the clock for ticket expiry (nil: time.Now).
	Now func() time.Time
}

// maxUsedTickets bounds how many live tickets a gateway remembers.
const maxUsedTickets = 1 << 16

// NewGateway returns the blob gateway's HTTP handler (see NewHandler) with
// o's limits and authentication. Besides NewHandler's answers, an upload
// may get 401 (no or a bad token or ticket), 403 quota_exceeded, 408 (sent
// too slowly), 429 (this address has MaxUploadsPerIP in progress), 503
// (MaxUploads in progress) and 507 insufficient_storage (the gateway holds
// Quota.NodeBytes of uploads no job references). Every refusal but 408
// comes before the body is read (a chunked upload is cut off as it passes
// a quota).
func NewGateway(s *Store, o GatewayOptions) http.Handler {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	lim := o.Limits.withDefaults()
	h := &handler{store: s, log: log, mux: http.NewServeMux(), lim: lim, auth: o.Auth,
		slots: uploadSlots{max: lim.MaxUploads, perIP: lim.MaxUploadsPerIP}, used: usedTickets{max: maxUsedTickets}}
	if h.auth != nil {
		a := *h.auth
		a.Quota = a.Quota.withDefaults()
		if a.Now == nil {
			a.Now = time.Now
		}
		h.auth = &a
	}
	if o.Fetch != nil && o.Fetch.Sources != nil {
		h.fetch = newFetcher(s, o.Fetch, log)
	}
	h.mux.HandleFunc("PUT /v1/blobs", h.put)
	h.mux.HandleFunc("PUT /v1/blobs/{hash}", h.put)
	h.mux.HandleFunc("GET /v1/blobs/{hash}", h.get) // also HEAD
	h.mux.HandleFunc("/v1/blobs", h.fallback)
	h.mux.HandleFunc("/v1/blobs/", h.fallback)
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

func (h *handler) fallback(w http.ResponseWriter, r *http.Request) {
	rest, _ := strings.CutPrefix(r.URL.Path, "/v1/blobs")
	switch {
	case rest == "" || rest == "/":
		w.Header().Set("Allow", "PUT")
	case !strings.Contains(rest[1:], "/"):
		w.Header().Set("Allow", "GET, HEAD, PUT")
	default:
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path))
		return
	}
	writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, w.Header().Get("Allow")))
}

func (h *handler) put(w http.ResponseWriter, r *http.Request) {
	w = closeOnError{w}
	var want *Hash
	if s := r.PathValue("hash"); s != "" {
		p, err := ParseHash(s)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		want = &p
	}
	if r.ContentLength > h.store.MaxBlobBytes() {
		// Refused before a byte of the body is read; the server closes
		// the connection rather than drain it.
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("%v: %d bytes declared, the limit of this gateway is %d bytes", ErrTooLarge, r.ContentLength, h.store.MaxBlobBytes()))
		return
	}
	up, err := h.authorize(r)
	if err != nil {
		h.refuse(w, err)
		return
	}
	if up.bound != nil {
		if want != nil && *want != *up.bound {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("the ticket is for %s, the path names %s", *up.bound, *want))
			return
		}
		want = up.bound
	}
	release, err := h.slots.acquire(clientIP(r))
	if err != nil {
		h.refuse(w, err)
		return
	}
	defer release()

	limit := h.store.MaxBlobBytes()
	body := io.Reader(r.Body)
	if up.charged {
		if err := h.store.checkQuota(up.acct, r.ContentLength, up.quota, up.basis); err != nil {
			h.refuse(w, err)
			return
		}
		q := &quotaReader{r: body, s: h.store, up: up}
		defer q.release()
		body = q
	}
	pr := newProgressReader(w, body, h.lim)
	sum, n, created, err := h.store.put(r.Context(), pr, want, limit)
	pr.done()
	if err == nil && up.charged {
		err = h.store.ownBlob(up.acct, sum, n)
	}
	if err != nil {
		var rerr *readError
		status := http.StatusInternalServerError
		switch {
		case errors.Is(err, ErrTooLarge):
			status = http.StatusRequestEntityTooLarge
		case errors.Is(err, ErrHashMismatch):
			status = http.StatusUnprocessableEntity
		case errors.Is(err, ErrNoSpace):
			status = http.StatusInsufficientStorage
		case errors.Is(err, ErrQuota), errors.Is(err, ErrGatewayFull), errors.Is(err, errTooSlow):
			h.refuse(w, err)
			return
		case errors.As(err, &rerr), r.Context().Err() != nil:
			status = http.StatusBadRequest
		}
		if status >= 500 {
			h.log.Error("blob put failed", "err", err)
		} else {
			h.log.Debug("blob put rejected", "status", status, "err", err)
		}
		writeError(w, status, err.Error())
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/blobs/"+sum.String())
		h.log.Debug("blob stored", "hash", sum, "size", n)
	}
	writeJSON(w, status, PutResponse{Hash: sum, Size: n})
}

func (h *handler) get(w http.ResponseWriter, r *http.Request) {
	want, err := ParseHash(r.PathValue("hash"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	f, size, err := h.store.open(want)
	if errors.Is(err, ErrNotFound) && h.fetch != nil && r.Header.Get(LocalHeader) == "" {
		var job uint64
		if q := r.URL.Query().Get("job"); q != "" {
			if job, err = strconv.ParseUint(q, 10, 64); err != nil || job == 0 {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("job %q: want a job id", q))
				return
			}
		}
		if ferr := h.fetch.fetch(r.Context(), want, job); ferr != nil {
			writeError(w, http.StatusNotFound, fmt.Sprintf("%v: %s is not on this node, and it could not fetch it from another: %v", ErrNotFound, want, ferr))
			return
		}
		f, size, err = h.store.open(want)
	}
	if errors.Is(err, ErrNotFound) {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	if err != nil {
		h.log.Error("blob open failed", "hash", want, "err", err)
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	defer f.Close()

	etag := `"` + want.String() + `"`
	hdr := w.Header()
	hdr.Set("ETag", etag)
	hdr.Set("X-Content-SHA256", want.Hex())
	hdr.Set("Cache-Control", "public, max-age=31536000, immutable")
	if inm := r.Header.Get("If-None-Match"); inm != "" && (inm == etag || inm == "*") {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hdr.Set("Content-Type", "application/octet-stream")
	hdr.Set("Content-Length", strconv.FormatInt(size, 10))
	if r.Method == http.MethodHead {
		return
	}
	w.WriteHeader(http.StatusOK)

	bufp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bufp)
	hasher := sha256.New()
	src := io.TeeReader(f, hasher)
	abort := func(msg string, args ...any) {
		h.log.Error(msg, append([]any{"hash", want}, args...)...)
		panic(http.ErrAbortHandler) // closes the connection short of Content-Length
	}
	head := max(size-holdBack, 0)
	// The deadline stays set when the response is aborted: net/http
	// flushes its buffer before closing, which must not wait on the
	// client either.
	pw := newProgressWriter(w, h.lim)
	if _, err := io.CopyBuffer(pw, io.LimitReader(src, head), *bufp); err != nil {
		// Most likely the client went away; still cut the response.
		abort("blob send failed", "err", err)
	}
	tail := (*bufp)[:size-head]
	if _, err := io.ReadFull(src, tail); err != nil {
		abort("blob read failed", "err", err)
	}
	var got Hash
	hasher.Sum(got[:0])
	if got != want {
		moved, qerr := h.store.quarantine(want, f)
		abort("stored blob is corrupt: its bytes hash to something else; response aborted",
			"got", got, "quarantined_to", moved, "quarantine_err", qerr)
	}
	if _, err := pw.Write(tail); err == nil {
		pw.done()
	}
}

// progressWriter sends a download under a progress deadline, as
// progressReader reads an upload: before each write it moves the
// connection's write deadline to IdleTimeout from now, so a client that
// stops reading is cut off by the connection itself, and after RateGrace
// it fails when the average rate falls below MinRate (a reader taking a
// few bytes just before each deadline). Without it one client holds a
// connection, an open blob file and a 256 KiB buffer for as long as it
// likes.
type progressWriter struct {
	w     io.Writer
	rc    *http.ResponseController
	lim   Limits
	start time.Time
	n     int64
}

func newProgressWriter(w http.ResponseWriter, lim Limits) *progressWriter {
	return &progressWriter{w: w, rc: http.NewResponseController(w), lim: lim, start: time.Now()}
}

// writeChunk is the most a single Write sends under one deadline: a
// client must take this much every IdleTimeout, whatever the buffer the
// caller writes from.
const writeChunk = 32 << 10

func (p *progressWriter) Write(b []byte) (int, error) {
	total := 0
	for len(b) > 0 {
		now := time.Now()
		if elapsed := now.Sub(p.start); p.lim.MinRate > 0 && elapsed > p.lim.RateGrace {
			if rate := float64(p.n) / elapsed.Seconds(); rate < float64(p.lim.MinRate) {
				return total, fmt.Errorf("download too slow: %d bytes in %v is %.0f bytes/s, below the gateway's minimum of %d bytes/s", p.n, elapsed.Round(time.Millisecond), rate, p.lim.MinRate)
			}
		}
		if p.lim.IdleTimeout > 0 {
			// An error means the writer cannot set deadlines (a test
			// recorder); the rate check still applies.
			p.rc.SetWriteDeadline(now.Add(p.lim.IdleTimeout))
		}
		chunk := b[:min(len(b), writeChunk)]
		n, err := p.w.Write(chunk)
		total += n
		p.n += int64(n)
		if err != nil {
			if isTimeout(err) {
				err = fmt.Errorf("download stalled: the client took nothing for %v (the gateway's idle limit) after %d bytes: %w", p.lim.IdleTimeout, p.n, err)
			}
			return total, err
		}
		b = b[n:]
	}
	return total, nil
}

// done lifts the write deadline so that the connection can be reused;
// call it only after the whole body went out.
func (p *progressWriter) done() { p.rc.SetWriteDeadline(time.Time{}) }

// closeOnError answers an error to an upload with "Connection: close".
// Without it, net/http reads up to 256 KiB more of a body the handler
// left unread before it sends the answer, so a client that declares too
// much, or is refused, and then sends slowly (or nothing) would hold the
// refusal back, and its connection, for as long as it likes.
type closeOnError struct{ http.ResponseWriter }

func (w closeOnError) WriteHeader(status int) {
	if status >= 400 {
		w.Header().Set("Connection", "close")
	}
	w.ResponseWriter.WriteHeader(status)
}

// Unwrap lets http.ResponseController reach the connection.
func (w closeOnError) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// refuse answers an upload refused by a limit, the authentication or a
// quota, naming the limit.
func (h *handler) refuse(w http.ResponseWriter, err error) {
	var status int
	code := ""
	msg := err.Error()
	switch {
	case errors.Is(err, errBusyIP):
		status = http.StatusTooManyRequests
		msg = fmt.Sprintf("this address has %d uploads in progress, the gateway's limit per client address (max_uploads_per_ip); retry when one ends", h.lim.MaxUploadsPerIP)
		w.Header().Set("Retry-After", "5")
	case errors.Is(err, errBusy):
		status = http.StatusServiceUnavailable
		msg = fmt.Sprintf("the gateway has %d uploads in progress, its limit (max_uploads); retry shortly", h.lim.MaxUploads)
		w.Header().Set("Retry-After", "5")
	case errors.Is(err, errTicketsFull):
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "60")
	case errors.Is(err, errTooSlow):
		status = http.StatusRequestTimeout
	case errors.Is(err, ErrQuota):
		status, code = http.StatusForbidden, codeQuota
	case errors.Is(err, ErrGatewayFull):
		status = http.StatusInsufficientStorage
		w.Header().Set("Retry-After", "60")
	case errors.Is(err, errAllowanceUnknown):
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "5")
	case errors.Is(err, errUnauthorized), errors.Is(err, errBadTicket):
		status = http.StatusUnauthorized
		w.Header().Set("WWW-Authenticate", TicketScheme+`, Bearer realm="gpunet"`)
	default:
		status = http.StatusForbidden
	}
	h.log.Debug("blob put refused", "status", status, "err", err)
	if code == "" {
		code = errorCodes[status]
	}
	writeJSON(w, status, errorResponse{Code: code, Message: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	code, ok := errorCodes[status]
	if !ok {
		code = "internal"
	}
	writeJSON(w, status, errorResponse{Code: code, Message: msg})
}
