package openaigw

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/receipt"
)

// The paths the gateway answers.
const (
	PathPrefix      = "/openai/"
	PathModels      = "/openai/v1/models"
	PathCompletions = "/openai/v1/chat/completions"
	// UpstreamPath is where a replica serves chat completions.
	UpstreamPath = "/v1/chat/completions"
)

// Headers the gateway adds to an answer: which service and which provider's
// replica served it.
const (
	HeaderService  = "X-Gpunet-Service"
	HeaderProvider = "X-Gpunet-Provider"
)

// Defaults of Options.
const (
	DefaultMaxBody          = 4 << 20
	DefaultDialTimeout      = 5 * time.Second
	DefaultFirstByteTimeout = 60 * time.Second
)

// Bounds the gateway keeps.
const (
	// maxAttempts is how many replicas one request may try to dial.
	maxAttempts = 3
	// maxReplyBody is the largest non-streamed answer relayed; maxErrorBody
	// the most of a replica's error answer read.
	maxReplyBody = 32 << 20
	maxErrorBody = 64 << 10
	// MaxListed is the most services Directory.OpenAIServices should
	// return: GET /openai/v1/models reads no more.
	MaxListed = 1000
)

// Directory is what the gateway reads of the ledger. Its methods are
// called once or twice per request and must be safe for concurrent use.
type Directory interface {
	// ServicesForModel returns the active services whose spec declares
	// model (Spec.OpenAI.Models), in id order.
	ServicesForModel(model string) ([]*ledger.Service, error)
	// OpenAIServices returns the active services that declare models, in
	// id order, at most MaxListed.
	OpenAIServices() ([]*ledger.Service, error)
	// Reputation is provider's reputation in parts per million (0 for
	// one the ledger does not know).
	Reputation(provider address.Address) uint64
	// Access says who may use the active services that declare models.
	// The gateway asks it for every request, before it reads the body,
	// so it must be cheap (a node rebuilds it once a block); the gateway
	// never modifies what it returns.
	Access() (*Access, error)
}

// Access is who may use the active services that declare models, as the
// gateway checks it on a request's headers before it reads the body: a
// request that can use none of them is refused before it can make the
// gateway wait for a body.
type Access struct {
	// Public is true when one of the services is public.
	Public bool
	// Keys holds the SHA-256 of every key of theirs.
	Keys map[ledger.Hash]struct{}
}

// opens reports whether r carries one of a's keys.
func (a *Access) opens(r *http.Request) bool {
	for _, k := range requestKeys(r) {
		if _, ok := a.Keys[ledger.Hash(sha256.Sum256([]byte(k)))]; ok {
			return true
		}
	}
	return false
}

// Options configure a Gateway. Directory, Dial and Authorized are
// required.
type Options struct {
	Directory Directory
	// Dial opens a byte stream to port of provider's replica of svc (the
	// relay's Hub.DialReplica); credential is what Authorized returned.
	Dial func(ctx context.Context, svc *ledger.Service, provider address.Address, port uint64, credential string) (net.Conn, error)
	// Authorized reports whether r may use svc (svc is public, or r
	// carries one of its keys) and the credential to dial it with (the
	// relay's Authorized).
	Authorized func(svc *ledger.Service, r *http.Request) (credential string, ok bool)
	// MaxBody is the largest request body accepted (DefaultMaxBody if 0).
	MaxBody int64
	// DialTimeout bounds each dial; FirstByteTimeout bounds the wait for a
	// replica's answer to begin, and in a stream each wait for the next
	// event (defaults DefaultDialTimeout, DefaultFirstByteTimeout).
	DialTimeout, FirstByteTimeout time.Duration
	Log                           *slog.Logger // slog.Default() if nil
	Clock                         func() time.Time
	// Checks, when set, turns on replicas' receipts (checked, and passed
	// to the client in the Gpunet-Receipt header) and sampled
	// re-execution (check.go).
	Checks *CheckOptions
}

// Gateway is the OpenAI-compatible endpoint. It is an http.Handler for the
// paths under PathPrefix.
type Gateway struct {
	o         Options
	now       func() time.Time
	log       *slog.Logger
	transport *http.Transport
	stats     *stats
	checks    *checker // nil: no receipts, no checks
}

// New returns a Gateway. It panics if o lacks Directory, Dial or
// Authorized.
func New(o Options) *Gateway {
	if o.Directory == nil || o.Dial == nil || o.Authorized == nil {
		panic("openaigw: Options need Directory, Dial and Authorized")
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.FirstByteTimeout <= 0 {
		o.FirstByteTimeout = DefaultFirstByteTimeout
	}
	g := &Gateway{o: o, now: o.Clock, log: o.Log, stats: newStats(), checks: newChecker(o.Checks)}
	if g.now == nil {
		g.now = time.Now
	}
	if g.log == nil {
		g.log = slog.Default()
	}
	g.transport = &http.Transport{
		DialContext:           g.dial,
		ResponseHeaderTimeout: o.FirstByteTimeout,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		// The answer is relayed as the replica sent it; usage is read from
		// it, so it must not come compressed.
		DisableCompression: true,
		ForceAttemptHTTP2:  false,
	}
	return g
}

// Close drops the idle connections to replicas.
func (g *Gateway) Close() { g.transport.CloseIdleConnections() }

// target is the replica a request's connections go to; it rides in the
// request's context to the transport's DialContext, and the replica's key
// is the request URL's host, so that connections are pooled per replica.
type target struct {
	svc        *ledger.Service
	provider   address.Address
	port       uint64
	credential string
}

type targetKey struct{}

// targetHost is a host name unique to a replica's port, for the transport's
// connection pool; it is never resolved.
func targetHost(t *target) string {
	return fmt.Sprintf("p%d.%s.s%d.replica.gpunet.invalid", t.port, hex.EncodeToString(t.provider[:]), t.svc.ID)
}

// dialError is a failure to reach a replica, before anything was sent to
// it: the request may go to another.
type dialError struct{ err error }

func (e *dialError) Error() string { return "dial replica: " + e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

func (g *Gateway) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	t, _ := ctx.Value(targetKey{}).(*target)
	if t == nil {
		return nil, &dialError{errors.New("no replica named")}
	}
	ctx, cancel := context.WithTimeout(ctx, g.o.DialTimeout)
	defer cancel()
	c, err := g.o.Dial(ctx, t.svc, t.provider, t.port, t.credential)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		return nil, &dialError{err}
	}
	return c, nil
}

// ServeHTTP answers GET PathModels, GET PathModels/{model} and POST
// PathCompletions, and CORS preflights for them.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// Keys are bearer tokens, never cookies: any origin may call.
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Expose-Headers", HeaderService+", "+HeaderProvider+", "+receipt.Header+", Retry-After")
	var allow string
	var serve func(http.ResponseWriter, *http.Request)
	switch p := r.URL.Path; {
	case p == PathCompletions:
		allow, serve = "POST, OPTIONS", g.chat
	case p == PathModels:
		allow, serve = "GET, HEAD, OPTIONS", g.models
	case strings.HasPrefix(p, PathModels+"/") && len(p) > len(PathModels)+1:
		allow, serve = "GET, HEAD, OPTIONS", g.model
	default:
		(&apiError{
			Status: http.StatusNotFound, Type: typeInvalidRequest, Code: CodeUnknownURL,
			Message: fmt.Sprintf("Invalid URL (%s %s): the gateway serves GET %s and POST %s.", r.Method, p, PathModels, PathCompletions),
		}).write(w)
		return
	}
	if r.Method == http.MethodOptions {
		h.Set("Access-Control-Allow-Methods", allow)
		if rh := r.Header.Get("Access-Control-Request-Headers"); rh != "" {
			h.Set("Access-Control-Allow-Headers", rh)
		}
		h.Set("Access-Control-Max-Age", "600")
		h.Set("Allow", allow)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if !slices.Contains(strings.Split(allow, ", "), r.Method) {
		h.Set("Allow", allow)
		(&apiError{
			Status: http.StatusMethodNotAllowed, Type: typeInvalidRequest, Code: CodeMethodNotAllowed,
			Message: fmt.Sprintf("Method %s is not allowed on %s: use %s.", r.Method, r.URL.Path, strings.TrimSuffix(allow, ", OPTIONS")),
		}).write(w)
		return
	}
	serve(w, r)
}

// hasKey reports whether r carries a service key at all.
func hasKey(r *http.Request) bool {
	return r.Header.Get("X-Gpunet-Key") != "" || r.Header.Get("Authorization") != ""
}

// requestKeys lists the keys r carries: X-Gpunet-Key, then Authorization:
// Bearer (as the relay's Authorized reads them).
func requestKeys(r *http.Request) []string {
	var keys []string
	if k := r.Header.Get("X-Gpunet-Key"); k != "" {
		keys = append(keys, k)
	}
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		if k := strings.TrimSpace(a[7:]); k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

// mayUse checks, on r's headers alone, that r may use at least one service
// that declares models: one is public, or r carries a key of one. It is
// the gateway's first check, before any byte of the body is read, so that
// a client without a key cannot make the gateway wait for a body.
func (g *Gateway) mayUse(r *http.Request) *apiError {
	acc, err := g.o.Directory.Access()
	switch {
	case err != nil:
		g.log.Error("openai gateway: read who may use the services", "err", err)
		return errInternal("could not read the services: %v", err)
	case acc.Public || acc.opens(r):
		return nil
	case !hasKey(r):
		return errNoKey()
	}
	return errBadKeyAny()
}

// KeyHolder reports whether r's headers carry a key of an active service
// that declares models. A node admits such requests to the connections it
// keeps for trusted clients (internal/admission).
func (g *Gateway) KeyHolder(r *http.Request) bool {
	acc, err := g.o.Directory.Access()
	return err == nil && acc.opens(r)
}

// refuseBeforeBody answers e to a request whose body was not read, and
// closes the connection: net/http would otherwise read up to 256 KiB more
// of a body that may never come before it sends the answer. It gives the
// body drainGrace to arrive after the answer, so that a client whose body
// is on its way is not reset before it reads the answer.
func refuseBeforeBody(w http.ResponseWriter, r *http.Request, e *apiError) {
	if r.Body != nil && r.Body != http.NoBody {
		w.Header().Set("Connection", "close")
		http.NewResponseController(w).SetReadDeadline(time.Now().Add(drainGrace))
	}
	e.write(w)
}

// drainGrace is how long a refused request's body may go on arriving.
const drainGrace = time.Second

// modelObject is OpenAI's model object.
type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// modelList is OpenAI's list of models.
type modelList struct {
	Object string        `json:"object"`
	Data   []modelObject `json:"data"`
}

// usableModels lists the models of the services r may use, by id; a model
// that several services declare is listed once, owned by the oldest.
func (g *Gateway) usableModels(r *http.Request) ([]modelObject, *apiError) {
	svcs, err := g.o.Directory.OpenAIServices()
	if err != nil {
		g.log.Error("openai gateway: list services", "err", err)
		return nil, errInternal("could not read the services: %v", err)
	}
	seen := map[string]bool{}
	data := []modelObject{}
	for _, svc := range svcs[:min(len(svcs), MaxListed)] {
		if svc.Done() || svc.Spec.OpenAI == nil {
			continue
		}
		if _, ok := g.o.Authorized(svc, r); !ok {
			continue
		}
		for _, m := range svc.Spec.OpenAI.Models {
			if seen[m] {
				continue
			}
			seen[m] = true
			data = append(data, modelObject{ID: m, Object: "model", Created: svc.CreatedAt, OwnedBy: svc.Owner.String()})
		}
	}
	slices.SortFunc(data, func(a, b modelObject) int { return strings.Compare(a.ID, b.ID) })
	return data, nil
}

func (g *Gateway) models(w http.ResponseWriter, r *http.Request) {
	data, aerr := g.usableModels(r)
	if aerr != nil {
		aerr.write(w)
		return
	}
	writeJSON(w, http.StatusOK, modelList{Object: "list", Data: data})
}

// model answers GET /openai/v1/models/{model}: the model if r may use it.
func (g *Gateway) model(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, PathModels+"/")
	data, aerr := g.usableModels(r)
	if aerr != nil {
		aerr.write(w)
		return
	}
	for _, m := range data {
		if m.ID == id {
			writeJSON(w, http.StatusOK, m)
			return
		}
	}
	e := errModelNotFound(id)
	e.Message = fmt.Sprintf("The model %q does not exist or you do not have access to it.", id)
	e.write(w)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		errInternal("encode the answer: %v", err).write(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// checkContentType checks r's Content-Type, before its body is read.
func checkContentType(r *http.Request) *apiError {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		// JSON, or what curl -d sends by default: the body is read as
		// JSON either way (a form's fields are not JSON, and get 400).
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && mt != "application/x-www-form-urlencoded") {
			return &apiError{
				Status: http.StatusUnsupportedMediaType, Type: typeInvalidRequest, Code: CodeUnsupportedMedia,
				Message: fmt.Sprintf("Unsupported Content-Type %q: send the request as JSON with Content-Type: application/json.", ct),
			}
		}
	}
	return nil
}

// readChatRequest reads and validates r's body.
func (g *Gateway) readChatRequest(w http.ResponseWriter, r *http.Request) (*chatRequest, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.o.MaxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, &apiError{
				Status: http.StatusRequestEntityTooLarge, Type: typeInvalidRequest, Code: CodeRequestTooLarge,
				Message: fmt.Sprintf("The request body is larger than this gateway accepts (%d bytes).", g.o.MaxBody),
			}
		}
		if isTimeout(err) {
			return nil, &apiError{
				Status: http.StatusRequestTimeout, Type: typeInvalidRequest, Code: CodeRequestTimeout,
				Message: fmt.Sprintf("The request body did not arrive in time: %v.", err),
			}
		}
		return nil, invalid("", "Could not read the request body: %v.", err)
	}
	return parseChatRequest(body)
}

// chat answers POST /openai/v1/chat/completions.
func (g *Gateway) chat(w http.ResponseWriter, r *http.Request) {
	// The headers first: the key, then the content type.
	if aerr := g.mayUse(r); aerr != nil {
		refuseBeforeBody(w, r, aerr)
		return
	}
	if aerr := checkContentType(r); aerr != nil {
		refuseBeforeBody(w, r, aerr)
		return
	}
	req, aerr := g.readChatRequest(w, r)
	if aerr != nil {
		aerr.write(w)
		return
	}
	cands, aerr := g.candidates(r, req.Model)
	if aerr != nil {
		aerr.write(w)
		return
	}
	// The body for services whose answers are exact, and for the others
	// (with log-probabilities: upstreamBody), made when first needed.
	var ups [2]*upstream
	upstreamFor := func(c *candidate) (*upstream, error) {
		i := 0
		if g.asksLogprobs(c.Service) {
			i = 1
		}
		if ups[i] == nil {
			b, trim, err := req.upstreamBody(i == 1)
			if err != nil {
				return nil, err
			}
			ups[i] = &upstream{body: b, trim: trim}
		}
		return ups[i], nil
	}

	var lastErr error
	tries := min(len(cands), maxAttempts)
	for i, c := range cands[:tries] {
		up, err := upstreamFor(&c)
		if err != nil {
			errInternal("encode the request: %v", err).write(w)
			return
		}
		done, err := g.try(w, r, req, up, &c, i == tries-1)
		if done {
			return
		}
		g.log.Warn("openai gateway: replica could not take the request, trying the next", "service", c.Service.ID, "provider", c.Provider, "err", err)
		lastErr = err
	}
	if r.Context().Err() != nil {
		return // the client left
	}
	errNoReplica(req.Model, fmt.Sprintf("none of the %d replicas tried could be reached (last: %v)", min(len(cands), maxAttempts), lastErr)).write(w)
}

// candidates returns the routable replicas of the services r may use that
// serve model, best first, or the error to answer.
func (g *Gateway) candidates(r *http.Request, model string) ([]candidate, *apiError) {
	svcs, err := g.o.Directory.ServicesForModel(model)
	if err != nil {
		g.log.Error("openai gateway: services for model", "model", model, "err", err)
		return nil, errInternal("could not read the services: %v", err)
	}
	var cands []candidate
	usable := 0
	for _, svc := range svcs {
		if svc.Done() || !svc.ServesModel(model) {
			continue
		}
		cred, ok := g.o.Authorized(svc, r)
		if !ok {
			continue
		}
		usable++
		for i := range svc.Replicas {
			rep := &svc.Replicas[i]
			if !routable(svc, rep) {
				continue
			}
			lat, inFlight := g.stats.get(replicaKey{svc.ID, rep.Provider})
			cands = append(cands, candidate{
				Service: svc, Credential: cred, Provider: rep.Provider, Price: rep.PricePerHour,
				Latency: lat, InFlight: inFlight, Reputation: g.o.Directory.Reputation(rep.Provider),
			})
		}
	}
	switch {
	case len(svcs) == 0:
		return nil, errModelNotFound(model)
	case usable == 0 && !hasKey(r):
		return nil, errNoKey()
	case usable == 0:
		return nil, errBadKey(model)
	case len(cands) == 0:
		return nil, errNoReplica(model, fmt.Sprintf("its %d service(s) have no replica ready yet", usable))
	}
	rank(cands)
	return cands, nil
}

// retryable reports whether a replica's answer status says it did not take
// the request on (overloaded, starting, its server down behind the port),
// so that another replica may be asked without doing the work twice.
func retryable(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// upstream is a request's body as sent to a replica, and what to take
// off its answer before the client gets it.
type upstream struct {
	body []byte
	trim *logprobTrim
}

// asksLogprobs reports whether requests to svc's replicas ask for
// log-probabilities whatever the client asked: with checks on, for a
// service whose answers are not declared bit-exact, so that a check can
// tell a near tie (two honest replicas on different hardware) from a
// wrong answer.
func (g *Gateway) asksLogprobs(svc *ledger.Service) bool {
	return g.checks != nil && svc.Spec.OpenAI != nil && !svc.Spec.OpenAI.Exact
}

// try sends the request to c's replica and relays its answer. It reports
// done once it has answered the client (an answer, or an error); when not
// done, the replica could not be reached, or (unless it is the last to
// try) answered a retryable status, and err says why.
func (g *Gateway) try(w http.ResponseWriter, r *http.Request, req *chatRequest, u *upstream, c *candidate, last bool) (done bool, err error) {
	body := u.body
	key := replicaKey{c.Service.ID, c.Provider}
	start := g.now()
	end := g.stats.begin(key, start)
	defer end()

	t := &target{svc: c.Service, provider: c.Provider, port: c.Service.Spec.OpenAI.Port, credential: c.Credential}
	ctx, cancel := context.WithCancel(context.WithValue(r.Context(), targetKey{}, t))
	defer cancel()
	up, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+targetHost(t)+UpstreamPath, bytes.NewReader(body))
	if err != nil {
		errInternal("make the request: %v", err).write(w)
		return true, nil
	}
	setUpstreamHeaders(up, req.Stream)
	resp, err := g.transport.RoundTrip(up)
	if err != nil {
		if r.Context().Err() == nil {
			g.stats.observe(key, failurePenalty, g.now())
		}
		if _, ok := errors.AsType[*dialError](err); ok && r.Context().Err() == nil {
			return false, err
		}
		switch {
		case r.Context().Err() != nil:
			// The client left; nobody reads an answer.
		case isTimeout(err):
			errTimeout("The replica (service %d, provider %s) did not begin to answer within %s.", c.Service.ID, c.Provider, g.o.FirstByteTimeout).write(w)
		default:
			errUpstream("The replica (service %d, provider %s) failed: %v.", c.Service.ID, c.Provider, err).write(w)
		}
		return true, nil
	}
	defer resp.Body.Close()
	if retryable(resp.StatusCode) && !last {
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody)) // the connection can be reused
		g.stats.observe(key, failurePenalty, g.now())
		return false, fmt.Errorf("the replica answered %s", resp.Status)
	}
	g.stats.observe(key, g.now().Sub(start), g.now())

	h := w.Header()
	h.Set(HeaderService, strconv.FormatUint(c.Service.ID, 10))
	h.Set(HeaderProvider, c.Provider.String())
	if resp.StatusCode/100 != 2 {
		g.relayError(w, resp, c)
		return true, nil
	}
	var a answered
	if req.Stream {
		a = g.relayStream(w, resp, c, cancel, u)
	} else {
		a = g.relayBody(w, resp, c, u)
	}
	g.maybeCheck(c, req, body, a)
	return true, nil
}

// setUpstreamHeaders sets the headers of a request to a replica: the same
// for every request, checked copies included.
func setUpstreamHeaders(up *http.Request, stream bool) {
	up.Header.Set("Content-Type", "application/json")
	if stream {
		up.Header.Set("Accept", "text/event-stream")
	} else {
		up.Header.Set("Accept", "application/json")
	}
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}

// relayError answers a replica's non-2xx answer: a 4xx with an OpenAI
// error object is the replica's verdict on the request and passes as it
// came; anything else is the replica failing, a 502.
func (g *Gateway) relayError(w http.ResponseWriter, resp *http.Response, c *candidate) {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var eb struct {
		Error *errorDetail `json:"error"`
	}
	parsed := json.Unmarshal(b, &eb) == nil && eb.Error != nil && eb.Error.Message != ""
	if ra := resp.Header.Get("Retry-After"); ra != "" && retryable(resp.StatusCode) {
		w.Header().Set("Retry-After", ra) // an OpenAI client waits as the replica asks
	}
	if resp.StatusCode/100 == 4 && parsed {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(resp.StatusCode)
		w.Write(b)
		return
	}
	msg := strings.TrimSpace(string(b))
	if parsed {
		msg = eb.Error.Message
	}
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	errUpstream("The replica (service %d, provider %s) answered %s: %s", c.Service.ID, c.Provider, resp.Status, msg).write(w)
}

// relayBody answers a replica's whole (non-streamed) answer, which must be
// a JSON object with usage, with the replica's receipt when it matches
// (the receipt and outputs, log-probabilities included, are returned); the
// client gets it without the log-probabilities it did not ask for (u.trim).
func (g *Gateway) relayBody(w http.ResponseWriter, resp *http.Response, c *candidate, u *upstream) answered {
	body := u.body
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBody+1))
	switch {
	case err != nil && isTimeout(err):
		errTimeout("The replica (service %d, provider %s) stopped answering: %v.", c.Service.ID, c.Provider, err).write(w)
		return answered{}
	case err != nil:
		errUpstream("The replica (service %d, provider %s) broke off its answer: %v.", c.Service.ID, c.Provider, err).write(w)
		return answered{}
	case len(b) > maxReplyBody:
		errUpstream("The replica (service %d, provider %s) answered more than %d bytes.", c.Service.ID, c.Provider, maxReplyBody).write(w)
		return answered{}
	}
	var reply struct {
		Usage json.RawMessage `json:"usage"`
	}
	if err := json.Unmarshal(b, &reply); err != nil || len(b) == 0 || firstByte(b) != '{' {
		errUpstream("The replica (service %d, provider %s) answered something other than a JSON chat completion.", c.Service.ID, c.Provider).write(w)
		return answered{}
	}
	if len(reply.Usage) == 0 || reply.Usage[0] != '{' {
		errUpstream("The replica (service %d, provider %s) returned no usage: every answer must report its token usage.", c.Service.ID, c.Provider).write(w)
		return answered{}
	}
	var a answered
	if g.checks != nil {
		// Every answer must come with its replica's receipt: one that
		// could omit it when it answers wrongly would never be checked.
		var o receipt.Outputs
		if err := o.Add(b); err == nil {
			var enc string
			if enc, a.r = g.answerReceipt(resp.Header.Get(receipt.Header), c, body, &o); enc != "" {
				w.Header().Set(receipt.Header, enc)
			}
			a.o = &o
		}
		if a.r == nil {
			g.stats.observe(replicaKey{c.Service.ID, c.Provider}, failurePenalty, g.now())
			errUpstream("The replica (service %d, provider %s) answered without a valid receipt of its answer (%s).", c.Service.ID, c.Provider, receipt.Header).write(w)
			return answered{}
		}
	}
	b = u.trim.apply(b)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	w.Write(b)
	return a
}

func firstByte(b []byte) byte {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return c
		}
	}
	return 0
}
