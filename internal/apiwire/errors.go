package apiwire

import "net/http"

// ErrorBody is the JSON of every error response. Code is one of the
// stable codes below, fixed by the HTTP status; LedgerCode, when set, is
// the ledger's own error code (docs/ledger.md) that caused it.
type ErrorBody struct {
	Code       string `json:"code"`
	Message    string `json:"message"`
	LedgerCode uint32 `json:"ledger_code,omitempty"`
	// Tx is the rejected tx's result (code tx_rejected only).
	Tx *TxResult `json:"tx,omitempty"`
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
