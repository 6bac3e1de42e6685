package apiserver

import (
	"bufio"
	"context"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gpunet/gpunet/internal/admission"
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
	// streams and large transfers, whose writes are then bounded by
	// StreamWriteIdle instead).
	Timeout time.Duration
	// BodyTimeout bounds how long the request body may take to arrive,
	// from the end of its headers (default Timeout, or DefaultBodyTimeout
	// when Timeout is -1). BodyIdle, when set, also cuts off a body that
	// sends nothing for that long (uploads and streams). Every route's
	// body is bounded: there is no "none".
	BodyTimeout, BodyIdle time.Duration
	// Trusted, when set, reports whether r's headers carry a credential
	// the route accepts (one of a service's keys). It is asked before any
	// byte of the body is read, and a request it accepts may take the
	// connections the node keeps in reserve (internal/admission). The
	// node's API token is trusted on every route.
	Trusted func(r *http.Request) bool
	// Vouches marks a route whose handler takes the connection over
	// only after it verified a registered provider's signature (the relay
	// agent's session): the client's address is then trusted for as long
	// as that connection stays open.
	Vouches bool
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

// Limits (docs/bounds.md lists them all).
const (
	// DefaultTimeout bounds a request unless its route says otherwise.
	DefaultTimeout = 15 * time.Second
	// DefaultBodyTimeout bounds the body of a request to a route without
	// a Timeout, unless the route says otherwise.
	DefaultBodyTimeout = 15 * time.Second
	// StreamWriteIdle is how long a client of a route without a Timeout
	// (a stream, a large download) may take to accept each 32 KiB of the
	// answer, unless the handler sets its own write deadlines.
	StreamWriteIdle = time.Minute
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
	rt = withDefaults(rt)
	for _, other := range s.routes {
		if other.ID == rt.ID {
			panic("apiserver: duplicate route id " + rt.ID)
		}
	}
	s.routes = append(s.routes, rt)
	s.mux.Handle(rt.Method+" "+rt.Path, s.wrap(rt))
}

// withDefaults fills in rt's unset limits.
func withDefaults(rt Route) Route {
	if rt.Status == 0 {
		rt.Status = http.StatusOK
	}
	if rt.MaxBody == 0 {
		rt.MaxBody = defaultMaxBody
	}
	if rt.Timeout == 0 {
		rt.Timeout = DefaultTimeout
	}
	if rt.BodyTimeout <= 0 {
		rt.BodyTimeout = DefaultBodyTimeout
		if rt.Timeout > 0 {
			rt.BodyTimeout = rt.Timeout
		}
	}
	return rt
}

// wrap applies a route's limits: admission, CORS, the token, the body
// limit and the time limits.
func (s *Server) wrap(rt Route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, req: r}
		defer func() {
			if s.opts.ObserveRequest != nil {
				s.opts.ObserveRequest(rt.ID, sw.status, time.Since(start))
			}
		}()
		// The headers alone decide the request's class: none of its body
		// has been read, so a slow body never holds a trusted client's
		// connection.
		if !admission.Admit(r, s.class(rt, r)) {
			refuseBusy(sw)
			return
		}
		if rt.Vouches {
			admission.VouchOnHijack(r)
		}
		r = setDeadlines(sw, r, rt, start)
		s.corsHeaders(sw, r)
		if rt.Auth && !s.authorized(sw, r) {
			sw.finish()
			return
		}
		if rt.MaxBody > 0 && sw.body != nil {
			r.Body = http.MaxBytesReader(sw, r.Body, rt.MaxBody) // r is setDeadlines' copy
		}
		if rt.Timeout > 0 {
			ctx, cancel := context.WithTimeout(r.Context(), rt.Timeout)
			defer cancel()
			r = r.WithContext(ctx)
		}
		rt.Handler.ServeHTTP(sw, r)
		sw.finish()
	})
}

// refuseBusy answers a request admission refused, and closes its
// connection without reading its body.
func refuseBusy(sw *statusWriter) {
	sw.Header().Set("Retry-After", "2")
	sw.Header().Set("Connection", "close")
	writeError(sw, http.StatusServiceUnavailable, 0, "this node's API is serving as many requests without a key as it may; retry in a moment, or send a key (a service's key, or the node's API token)")
	sw.dropBody()
}

// unrouted bounds what no route serves (a 404, a 405, a CORS preflight)
// as a route with the default limits.
func (s *Server) unrouted(h http.HandlerFunc) http.Handler {
	rt := withDefaults(Route{ID: "unrouted", Handler: h})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, req: r}
		if !admission.Admit(r, s.class(rt, r)) {
			refuseBusy(sw)
			return
		}
		r = setDeadlines(sw, r, rt, time.Now())
		h(sw, r)
		sw.finish()
	})
}

// statusWriter records the status a handler wrote, bounds a stream's
// writes (StreamWriteIdle), and closes the connection after an error
// answered before the request's body was read.
type statusWriter struct {
	http.ResponseWriter
	req    *http.Request
	body   *bodyTimer // nil: the request has no body
	status int
	// writeIdle, when set, is the write deadline each 32 KiB of the
	// answer gets; ownDeadline is set once the handler sets its own.
	writeIdle   time.Duration
	ownDeadline bool
	hijacked    bool // the handler took the connection over: hands off
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		if code >= 400 && w.body != nil && !w.body.eof {
			// Answered before the body was read (a refusal): close the
			// connection rather than let net/http read up to 256 KiB
			// more of a body that may never come before it answers.
			w.Header().Set("Connection", "close")
			w.body.refused = true
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

// streamChunk is the most of an answer written under one deadline.
const streamChunk = 32 << 10

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.writeIdle == 0 || w.ownDeadline {
		return w.ResponseWriter.Write(b)
	}
	total := 0
	for len(b) > 0 {
		chunk := b[:min(len(b), streamChunk)]
		http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(w.writeIdle))
		n, err := w.ResponseWriter.Write(chunk)
		total += n
		if err != nil {
			return total, err
		}
		b = b[n:]
	}
	return total, nil
}

// Unwrap lets http.ResponseController reach the connection (deadlines,
// flushing for streams).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush implements http.Flusher for streaming handlers.
func (w *statusWriter) Flush() {
	rc := http.NewResponseController(w.ResponseWriter)
	if w.writeIdle > 0 && !w.ownDeadline {
		rc.SetWriteDeadline(time.Now().Add(w.writeIdle))
	}
	rc.Flush()
}

// SetWriteDeadline lets a handler bound its writes itself (the blob
// gateway's progress deadline, a server-sent event stream).
func (w *statusWriter) SetWriteDeadline(t time.Time) error {
	w.ownDeadline = true
	return http.NewResponseController(w.ResponseWriter).SetWriteDeadline(t)
}

// Hijack lets a handler take the connection over (the relay's sessions and
// tunnels), after which the connection's deadlines are the handler's only.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.hijacked = true
	}
	return c, brw, err
}

// drainGrace is how long net/http may go on reading a refused request's
// body after the answer (up to 256 KiB), so that a client whose body is
// already on its way is not reset before it reads the answer.
const drainGrace = time.Second

// dropBody closes the connection soon after the answer rather than read
// the rest of the body: a refused request's body is worth nothing, and
// reading it would let a slow client hold the connection.
func (w *statusWriter) dropBody() {
	if w.req.Body != nil && w.req.Body != http.NoBody {
		http.NewResponseController(w.ResponseWriter).SetReadDeadline(time.Now().Add(drainGrace))
	}
}

// finish runs once the handler has returned.
func (w *statusWriter) finish() {
	if w.hijacked {
		return
	}
	if w.body != nil && w.body.refused && !w.body.eof {
		w.dropBody()
	}
	if w.writeIdle > 0 && !w.ownDeadline {
		// The end of the answer (a chunked body's last chunk) is written
		// after the handler returns.
		http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(w.writeIdle))
	}
}

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
		s.preflightH.ServeHTTP(w, r)
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
