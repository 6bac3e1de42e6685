package openaigw

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// Error types, as OpenAI names them.
const (
	typeInvalidRequest = "invalid_request_error"
	typeServer         = "server_error"
)

// Error codes the gateway answers with (OpenAI's where it has one).
const (
	CodeInvalidAPIKey    = "invalid_api_key"
	CodeModelNotFound    = "model_not_found"
	CodeNoReplicaReady   = "no_replica_ready"
	CodeUpstreamError    = "upstream_error"
	CodeUpstreamTimeout  = "upstream_timeout"
	CodeRequestTooLarge  = "request_too_large"
	CodeRequestTimeout   = "request_timeout"
	CodeUnsupportedMedia = "unsupported_media_type"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeUnknownURL       = "unknown_url"
)

// apiError is an error answered to the client as an OpenAI error object
// with status Status.
type apiError struct {
	Status  int
	Message string
	Type    string
	Param   string // "" is written as null
	Code    string // "" is written as null
	// RetryAfter, when positive, is sent as the Retry-After header
	// (seconds).
	RetryAfter int
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// errorBody is OpenAI's error object.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// body is e as OpenAI's JSON error object.
func (e *apiError) body() []byte {
	b, _ := json.Marshal(errorBody{errorDetail{
		Message: e.Message, Type: e.Type, Param: nullable(e.Param), Code: nullable(e.Code),
	}})
	return b
}

// write answers e.
func (e *apiError) write(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	w.WriteHeader(e.Status)
	w.Write(append(e.body(), '\n'))
}

// invalid is a 400 about param.
func invalid(param, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Param: param, Message: fmt.Sprintf(format, args...)}
}

func errNoKey() *apiError {
	return &apiError{
		Status: http.StatusUnauthorized, Type: typeInvalidRequest, Code: CodeInvalidAPIKey,
		Message: "You didn't provide an API key. You need to provide your service key in an Authorization header " +
			"using Bearer auth (i.e. Authorization: Bearer YOUR_KEY) or in an X-Gpunet-Key header. " +
			"A service's owner makes keys with gpunet service access ID --new-key.",
	}
}

func errBadKey(model string) *apiError {
	return &apiError{
		Status: http.StatusUnauthorized, Type: typeInvalidRequest, Code: CodeInvalidAPIKey,
		Message: fmt.Sprintf("Incorrect API key provided: the key is not one of the keys of any service serving the model %q.", model),
	}
}

// errBadKeyAny refuses a key that opens no service declaring models, found
// before the request's body (and so its model) is read.
func errBadKeyAny() *apiError {
	return &apiError{
		Status: http.StatusUnauthorized, Type: typeInvalidRequest, Code: CodeInvalidAPIKey,
		Message: "Incorrect API key provided: the key is not one of the keys of any active service serving models.",
	}
}

func errModelNotFound(model string) *apiError {
	return &apiError{
		Status: http.StatusNotFound, Type: typeInvalidRequest, Param: "model", Code: CodeModelNotFound,
		Message: fmt.Sprintf("The model %q does not exist: no active service on this network declares it (GET /openai/v1/models lists the models you may use).", model),
	}
}

func errNoReplica(model string, why string) *apiError {
	return &apiError{
		Status: http.StatusServiceUnavailable, Type: typeServer, Code: CodeNoReplicaReady, RetryAfter: 5,
		Message: fmt.Sprintf("No replica serving the model %q is ready: %s. Retry later.", model, why),
	}
}

func errUpstream(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadGateway, Type: typeServer, Code: CodeUpstreamError, Message: fmt.Sprintf(format, args...)}
}

func errTimeout(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusGatewayTimeout, Type: typeServer, Code: CodeUpstreamTimeout, Message: fmt.Sprintf(format, args...)}
}

func errInternal(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusInternalServerError, Type: typeServer, Message: fmt.Sprintf(format, args...)}
}
