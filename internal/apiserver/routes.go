package apiserver

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Route is one endpoint: how it is served and how /openapi.json documents
// it. The server registers handlers only from Routes, and builds the
// OpenAPI document from the same values, so the two cannot drift apart
// (TestOpenAPIMatchesRoutes checks it against the live mux).
type Route struct {
	Method string // GET, POST, PUT (a GET route also answers HEAD)
	// Path in http.ServeMux syntax: /v1/jobs/{id}; {name...} matches the
	// rest of the path. A path parameter named id (a job id) or height (a
	// block height) is documented as a positive integer, any other as a
	// string.
	Path    string
	ID      string // OpenAPI operationId, unique
	Tag     string
	Summary string
	// Query lists the query and header parameters; path parameters come
	// from Path and are described by PathParams.
	Query      []Param
	PathParams map[string]string
	// Body is a sample of the JSON request body (nil: none, or BodyType
	// names a non-JSON one).
	Body     any
	BodyType string // request content type when not JSON, e.g. application/octet-stream
	// Resp is a sample of the success response body; RespType is its
	// content type (default application/json), or several separated by
	// commas when it depends on what is asked for (the dashboard's
	// assets: text/javascript, text/css, image/svg+xml).
	Resp     any
	RespType string
	Status   int // success status (default 200)
	// List marks a paginated list (it documents limit and cursor).
	List bool
	// Auth requires the node's API token (Authorization: Bearer TOKEN).
	Auth bool
	// MaxBody bounds the request body in bytes (default 64 KiB; -1: the
	// handler bounds it itself).
	MaxBody int64
	// Timeout bounds the request (default DefaultTimeout; -1: none, for
	// streams and large transfers).
	Timeout time.Duration
	// Errors lists the error statuses it may answer besides 500.
	Errors []int

	Handler http.Handler
}

// Param is a documented query or header parameter.
type Param struct {
	Name     string
	In       string // query (default) or header
	Type     string // string, integer, boolean
	Desc     string
	Required bool
	// Min and Max bound an integer parameter (both 0: unbounded; Max 0
	// with Min set: no upper bound).
	Min, Max int64
}

// intPathParams are the path parameters that are positive integers.
var intPathParams = map[string]bool{"id": true, "height": true}

// Limits.
const (
	// DefaultTimeout bounds a request unless its route says otherwise.
	DefaultTimeout = 15 * time.Second
	// defaultMaxBody bounds a request body unless its route says
	// otherwise.
	defaultMaxBody = 64 << 10
	// maxHeaderBytes bounds the request line and headers.
	maxHeaderBytes = 64 << 10
)

// Routes returns the API's routes, those mounted included, in the order
// they were added.
func (s *Server) Routes() []Route { return slices.Clone(s.routes) }

// Mount adds routes served by handlers from outside the package (the blob
// gateway, the dashboard). Each route's Handler serves it.
func (s *Server) Mount(routes ...Route) {
	for _, rt := range routes {
		s.add(rt)
	}
}

func (s *Server) add(rt Route) {
	if rt.Handler == nil {
		panic("apiserver: route " + rt.ID + " has no handler")
	}
	if rt.Status == 0 {
		rt.Status = http.StatusOK
	}
	if rt.MaxBody == 0 {
		rt.MaxBody = defaultMaxBody
	}
	if rt.Timeout == 0 {
		rt.Timeout = DefaultTimeout
	}
	for _, other := range s.routes {
		if other.ID == rt.ID {
			panic("apiserver: duplicate route id " + rt.ID)
		}
	}
	s.routes = append(s.routes, rt)
	s.mux.Handle(rt.Method+" "+rt.Path, s.wrap(rt))
}

// wrap applies a route's limits: CORS, the token, the body limit and the
// time limit.
func (s *Server) wrap(rt Route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if s.opts.ObserveRequest != nil {
				s.opts.ObserveRequest(rt.ID, sw.status, time.Since(start))
			}
		}()
		s.corsHeaders(sw, r)
		if rt.Auth && !s.authorized(sw, r) {
			return
		}
		if rt.MaxBody > 0 && r.Body != nil {
			r.Body = http.MaxBytesReader(sw, r.Body, rt.MaxBody)
		}
		if rt.Timeout > 0 {
			ctx, cancel := context.WithTimeout(r.Context(), rt.Timeout)
			defer cancel()
			r = r.WithContext(ctx)
			// The connection's deadlines enforce the limit on slow clients
			// too; the context stops the handler's own waits.
			rc := http.NewResponseController(w)
			rc.SetReadDeadline(start.Add(rt.Timeout))
			rc.SetWriteDeadline(start.Add(rt.Timeout + 5*time.Second))
		}
		rt.Handler.ServeHTTP(sw, r)
	})
}

// statusWriter records the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (deadlines,
// flushing for streams).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush implements http.Flusher for streaming handlers.
func (w *statusWriter) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

// authorized checks the API token; on failure it has written the error.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if s.opts.Token == "" {
		writeError(w, http.StatusForbidden, 0, "this node has no api_token in its config, so actions that use its keyring are off; set api_token in HOME/config/gpunet.yaml and restart")
		return false
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(s.opts.Token)) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gpunet"`)
		writeError(w, http.StatusUnauthorized, 0, "missing or wrong API token: send Authorization: Bearer TOKEN (the api_token of the node's config)")
		return false
	}
	return true
}

// corsHeaders allows the request's origin when the node's config lists it
// (or "*"). CORS is off by default: no header is set.
func (s *Server) corsHeaders(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || len(s.opts.CORSOrigins) == 0 {
		return false
	}
	if !slices.Contains(s.opts.CORSOrigins, "*") && !slices.Contains(s.opts.CORSOrigins, origin) {
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
	h.Set("Access-Control-Expose-Headers", "Content-Length, ETag, X-Content-SHA256")
	return true
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		s.preflight(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// preflight answers a CORS preflight: 204 with the allowed methods when
// the origin is allowed, 403 otherwise.
func (s *Server) preflight(w http.ResponseWriter, r *http.Request) {
	if !s.corsHeaders(w, r) {
		writeError(w, http.StatusForbidden, 0, "cross-origin requests are not allowed by this node (cors_origins in its config)")
		return
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Methods", strings.Join(s.allowed(r), ", "))
	h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Gpunet-Provider, X-Gpunet-Seq, X-Gpunet-Signature")
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
}

// allowed returns the methods some route serves r's path with.
func (s *Server) allowed(r *http.Request) []string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut} {
		r2 := r.Clone(r.Context())
		r2.Method = m
		if _, pattern := s.mux.Handler(r2); pattern != "" && pattern != "/" {
			out = append(out, m)
		}
	}
	return out
}

// notFound answers what no route serves: 405 with Allow when another
// method would be served, 404 otherwise.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	s.corsHeaders(w, r)
	if allow := s.allowed(r); len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, http.StatusMethodNotAllowed, 0, fmt.Sprintf("method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", ")))
		return
	}
	writeError(w, http.StatusNotFound, 0, fmt.Sprintf("no such endpoint: %s %s (the API is described at /openapi.json)", r.Method, r.URL.Path))
}

// timedOut reports whether r's time ran out, answering 504 if so.
func timedOut(w http.ResponseWriter, r *http.Request) bool {
	if r.Context().Err() == nil {
		return false
	}
	writeError(w, http.StatusGatewayTimeout, 0, "the request ran past its time limit: "+context.Cause(r.Context()).Error())
	return true
}
