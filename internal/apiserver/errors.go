package apiserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// codeOf returns the stable code of an error status of the API's own
// routes.
func codeOf(status int) string {
	switch status {
	case http.StatusUnprocessableEntity:
		return apiwire.CodeTxRejected
	case http.StatusBadRequest:
		return apiwire.CodeInvalidArgument
	case http.StatusForbidden:
		return apiwire.CodeForbidden
	}
	for c, s := range apiwire.ErrorCodes {
		if s == status {
			return c
		}
	}
	if status >= 500 {
		return apiwire.CodeInternal
	}
	return apiwire.CodeInvalidArgument
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
		json.NewEncoder(buf).Encode(apiwire.ErrorBody{Code: apiwire.CodeInternal, Message: "encode the answer: " + err.Error()})
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
	writeJSON(w, status, apiwire.ErrorBody{Code: codeOf(status), Message: msg, LedgerCode: ledgerCode})
}

// writeLedgerError answers a failed state read: the state is unreadable,
// which is the node's fault.
func writeLedgerError(w http.ResponseWriter, err error) {
	writeError(w, http.StatusInternalServerError, ledger.CodeOf(err), err.Error())
}
