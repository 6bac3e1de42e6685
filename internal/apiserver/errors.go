package apiserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"

	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/validator"
)

// ErrorBody is the JSON of every error response. Code is one of the
// stable codes below, fixed by the HTTP status; LedgerCode, when set, is
// the ledger's own error code (docs/ledger.md) that caused it.
type ErrorBody struct {
	Code       string `json:"code"`
	Message    string `json:"message"`
	LedgerCode uint32 `json:"ledger_code,omitempty"`
	// Tx is the rejected tx's result (code tx_rejected only).
	Tx *validator.TxResult `json:"tx,omitempty"`
}

// The stable error codes. Clients branch on these, never on the message.
const (
	CodeInvalidArgument     = "invalid_argument"     // 400: a parameter or body is malformed or out of range
	CodeUnauthorized        = "unauthorized"         // 401: a token is required and missing or wrong
	CodeForbidden           = "forbidden"            // 403: not allowed (bad signature, feature off)
	CodeNotFound            = "not_found"            // 404: no such object or endpoint
	CodeMethodNotAllowed    = "method_not_allowed"   // 405
	CodeConflict            = "conflict"             // 409: duplicate or out-of-order submission
	CodePayloadTooLarge     = "payload_too_large"    // 413: body over the route's limit
	CodeTxRejected          = "tx_rejected"          // 422: the ledger refused the tx (see ledger_code, tx)
	CodeHashMismatch        = "hash_mismatch"        // 422: a blob's body does not hash to its name
	CodeInternal            = "internal"             // 500
	CodeUnavailable         = "unavailable"          // 503: the node cannot answer now
	CodeTimeout             = "timeout"              // 504: the request ran past its time limit
	CodeInsufficientStorage = "insufficient_storage" // 507: the blob store is full
	CodeRequestTimeout      = "request_timeout"      // 408: an upload sent too slowly (the blob gateway's progress deadline)
	CodeQuotaExceeded       = "quota_exceeded"       // 403: an account's blob quota is used up
	CodeTooManyRequests     = "too_many_requests"    // 429: this client address is at a concurrency limit
)

// ErrorCodes maps each stable code to its HTTP status.
var ErrorCodes = map[string]int{
	CodeInvalidArgument:     http.StatusBadRequest,
	CodeUnauthorized:        http.StatusUnauthorized,
	CodeForbidden:           http.StatusForbidden,
	CodeNotFound:            http.StatusNotFound,
	CodeMethodNotAllowed:    http.StatusMethodNotAllowed,
	CodeConflict:            http.StatusConflict,
	CodePayloadTooLarge:     http.StatusRequestEntityTooLarge,
	CodeTxRejected:          http.StatusUnprocessableEntity,
	CodeHashMismatch:        http.StatusUnprocessableEntity,
	CodeInternal:            http.StatusInternalServerError,
	CodeUnavailable:         http.StatusServiceUnavailable,
	CodeTimeout:             http.StatusGatewayTimeout,
	CodeInsufficientStorage: http.StatusInsufficientStorage,
	CodeRequestTimeout:      http.StatusRequestTimeout,
	CodeQuotaExceeded:       http.StatusForbidden,
	CodeTooManyRequests:     http.StatusTooManyRequests,
}

// codeOf returns the stable code of an error status of the API's own
// routes.
func codeOf(status int) string {
	switch status {
	case http.StatusUnprocessableEntity:
		return CodeTxRejected
	case http.StatusBadRequest:
		return CodeInvalidArgument
	case http.StatusForbidden:
		return CodeForbidden
	}
	for c, s := range ErrorCodes {
		if s == status {
			return c
		}
	}
	if status >= 500 {
		return CodeInternal
	}
	return CodeInvalidArgument
}

func writeJSON(w http.ResponseWriter, status int, v any) { WriteJSON(w, status, v) }

// WriteJSON answers with status and v as JSON. The body is encoded into a
// pooled buffer first and written at once with its length: written
// straight to the connection, a page of 100 jobs went out as dozens of
// small chunks (a write system call each), and a value that failed to
// encode left a truncated body under a success status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	buf := jsonBufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= maxPooledJSON {
			jsonBufs.Put(buf)
		}
	}()
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		buf.Reset()
		status = http.StatusInternalServerError
		json.NewEncoder(buf).Encode(ErrorBody{Code: CodeInternal, Message: "encode the answer: " + err.Error()})
	}
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(buf.Len())}
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

var (
	jsonBufs        = sync.Pool{New: func() any { return new(bytes.Buffer) }}
	jsonContentType = []string{"application/json"} // shared: never appended to in place (its capacity is its length)
)

// maxPooledJSON is the largest buffer kept for reuse (a page of 1,000
// jobs is larger, and rare).
const maxPooledJSON = 1 << 20

// writeError writes the error body for status; ledgerCode is the ledger's
// code behind it, or 0.
func writeError(w http.ResponseWriter, status int, ledgerCode uint32, msg string) {
	writeJSON(w, status, ErrorBody{Code: codeOf(status), Message: msg, LedgerCode: ledgerCode})
}

// writeLedgerError answers a failed state read: the state is unreadable,
// which is the node's fault.
func writeLedgerError(w http.ResponseWriter, err error) {
	writeError(w, http.StatusInternalServerError, ledger.CodeOf(err), err.Error())
}
