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
}

type handler struct {
	store *Store
	log   *slog.Logger
	mux   *http.ServeMux
}

// NewHandler returns the blob gateway's HTTP handler:
//
//	PUT  /v1/blobs         store the body; 201 {"hash","size"}, or 200 if it was already stored
//	PUT  /v1/blobs/{hash}  the same, failing with 422 unless the body hashes to {hash}
//	GET  /v1/blobs/{hash}  the blob, with Content-Length, ETag and X-Content-SHA256
//	HEAD /v1/blobs/{hash}  the same headers, no body
//
// Errors are JSON {"code": "...", "message": "..."}: 400 for a malformed hash, 404, 405,
// 413 over the size limit (the message states it), 422 hash mismatch, 507
// disk full. Mount it with mux.Handle("/v1/blobs", h) and
// mux.Handle("/v1/blobs/", h). A nil log discards.
func NewHandler(s *Store, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &handler{store: s, log: log, mux: http.NewServeMux()}
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
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("%v: %d bytes declared, the limit of this gateway is %d bytes", ErrTooLarge, r.ContentLength, h.store.MaxBlobBytes()))
		return
	}
	sum, n, created, err := h.store.put(r.Context(), r.Body, want)
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
	if _, err := io.CopyBuffer(w, io.LimitReader(src, head), *bufp); err != nil {
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
	w.Write(tail)
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
