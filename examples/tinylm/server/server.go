// Package server serves tinylm's model (examples/tinylm/model) with
// OpenAI's chat completions API: GET /health, GET /v1/models and
// POST /v1/chat/completions, streamed (server-sent events, a chunk per
// token) and not, in OpenAI's wire format, errors included.
//
// A completion continues the conversation's last message. Without a
// seed in the request, the seed is derived from the messages, so that
// the same conversation gets the same answer from every replica.
package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gpunet/gpunet/examples/tinylm/model"
)

// Limits of a request.
const (
	// MaxBodyBytes bounds a request's body; a larger one is refused with
	// 413.
	MaxBodyBytes = 1 << 20
	// MaxTokens is the most max_tokens may ask for.
	MaxTokens = 1024
	// maxStops is how many stop strings OpenAI accepts.
	maxStops = 4
)

// Options configure a Server.
type Options struct {
	// Name is the model's name in requests and /v1/models (default
	// "tinylm").
	Name string
	// TokenDelay is slept before each token: a slower model, for demos
	// and benchmarks of streaming.
	TokenDelay time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Model is what the server serves: tinylm's trigram model (*model.Model)
// or its int8 network (*model.Int8).
type Model interface {
	Tokenize(text string) []int32
	Generate(prompt []int32, o model.Options) *model.Generator
	// Fingerprint is the answers' system_fingerprint.
	Fingerprint() string
}

// Server is the HTTP handler. Create it with New.
type Server struct {
	m       Model
	o       Options
	mux     *http.ServeMux
	created int64
}

// New serves m.
func New(m Model, o Options) *Server {
	if o.Name == "" {
		o.Name = "tinylm"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{m: m, o: o, mux: http.NewServeMux(), created: o.Now().Unix()}
	s.mux.HandleFunc("/health", s.only(http.MethodGet, s.health))
	s.mux.HandleFunc("/v1/models", s.only(http.MethodGet, s.models))
	s.mux.HandleFunc("/v1/models/{id}", s.only(http.MethodGet, s.model))
	s.mux.HandleFunc("/v1/chat/completions", s.only(http.MethodPost, s.chat))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("Unknown request URL: %s %s.", r.Method, r.URL.Path), "invalid_request_error", "", "unknown_url")
	})
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// only answers 405, OpenAI-shaped, to any other method than method.
func (s *Server) only(method string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
			w.Header().Set("Allow", method)
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: want %s", r.Method, r.URL.Path, method), "invalid_request_error", "", "method_not_allowed")
			return
		}
		h(w, r)
	}
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "model": s.o.Name})
}

func (s *Server) card() modelCard {
	return modelCard{ID: s.o.Name, Object: "model", Created: s.created, OwnedBy: "gpunet"}
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, modelList{Object: "list", Data: []modelCard{s.card()}})
}

func (s *Server) model(w http.ResponseWriter, r *http.Request) {
	if id := r.PathValue("id"); id != s.o.Name {
		s.noModel(w, id)
		return
	}
	writeJSON(w, http.StatusOK, s.card())
}

func (s *Server) noModel(w http.ResponseWriter, name string) {
	writeError(w, http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", name), "invalid_request_error", "model", "model_not_found")
}

// job is a validated request.
type job struct {
	prompt       []int32
	promptTokens int
	opts         model.Options
	stream       bool
	includeUsage bool
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("The request body is larger than %d bytes.", MaxBodyBytes), "invalid_request_error", "", "request_too_large")
			return
		}
		writeError(w, http.StatusBadRequest, "Could not read the request body: "+err.Error(), "invalid_request_error", "", "")
		return
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "We could not parse the JSON body of your request: "+jsonProblem(err), "invalid_request_error", "", "")
		return
	}
	if req.Model == "" {
		writeError(w, http.StatusBadRequest, "you must provide a model parameter", "invalid_request_error", "model", "")
		return
	}
	if req.Model != s.o.Name {
		s.noModel(w, req.Model)
		return
	}
	j, param, err := s.validate(&req)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), "invalid_request_error", param, "")
		return
	}
	g := s.m.Generate(j.prompt, j.opts)
	id, created := completionID(), s.o.Now().Unix()
	if j.stream {
		s.streamCompletion(r.Context(), w, g, j, id, created)
		return
	}
	for more := true; more; {
		if !s.pause(r.Context()) {
			return // the client went away
		}
		_, more = g.Step()
	}
	if err := g.Err(); err != nil {
		writeError(w, http.StatusInternalServerError, "The model failed: "+err.Error(), "server_error", "", "")
		return
	}
	writeJSON(w, http.StatusOK, completion{
		ID: id, Object: "chat.completion", Created: created, Model: s.o.Name, SystemFingerprint: s.m.Fingerprint(),
		Choices: []choice{{Message: responseMessage{Role: "assistant", Content: g.Text()}, FinishReason: g.FinishReason()}},
		Usage:   j.usage(g),
	})
}

// validate checks the request's values and says which param is wrong.
func (s *Server) validate(req *chatRequest) (*job, string, error) {
	if len(req.Messages) == 0 {
		return nil, "messages", errors.New("messages: you must provide at least one message")
	}
	j := &job{stream: req.Stream, opts: model.Options{Temperature: 1, MaxTokens: model.DefaultMaxTokens}}
	seed := sha256.New()
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool":
		default:
			return nil, fmt.Sprintf("messages[%d].role", i), fmt.Errorf("messages[%d].role %q: want system, developer, user, assistant or tool", i, m.Role)
		}
		// A message costs its content's tokens and one for its role.
		j.promptTokens += 1 + len(model.Split(string(m.Content)))
		fmt.Fprintf(seed, "%s\x00%s\x00", m.Role, m.Content)
	}
	j.prompt = s.m.Tokenize(string(req.Messages[len(req.Messages)-1].Content))
	sum := seed.Sum(nil)
	j.opts.Seed = binary.BigEndian.Uint64(sum[:8])
	if req.Seed != nil {
		j.opts.Seed = uint64(*req.Seed)
	}
	maxTokens, param := req.MaxCompletionTokens, "max_completion_tokens"
	if maxTokens == nil {
		maxTokens, param = req.MaxTokens, "max_tokens"
	}
	if maxTokens != nil {
		if *maxTokens < 1 || *maxTokens > MaxTokens {
			return nil, param, fmt.Errorf("%s %d: want 1 to %d", param, *maxTokens, MaxTokens)
		}
		j.opts.MaxTokens = *maxTokens
	}
	if t := req.Temperature; t != nil {
		if *t < 0 || *t > 2 {
			return nil, "temperature", fmt.Errorf("temperature %g: want 0 to 2", *t)
		}
		j.opts.Temperature = *t
	}
	if p := req.TopP; p != nil {
		if *p < 0 || *p > 1 {
			return nil, "top_p", fmt.Errorf("top_p %g: want 0 to 1", *p)
		}
		j.opts.TopP = *p
	}
	if req.N != nil && *req.N != 1 {
		return nil, "n", fmt.Errorf("n %d: tinylm gives one choice, want 1", *req.N)
	}
	if len(req.Stop) > maxStops {
		return nil, "stop", fmt.Errorf("stop: %d strings, want at most %d", len(req.Stop), maxStops)
	}
	j.opts.Stop = req.Stop
	if req.StreamOptions != nil {
		if !req.Stream {
			return nil, "stream_options", errors.New("stream_options: only allowed when stream is true")
		}
		j.includeUsage = req.StreamOptions.IncludeUsage
	}
	return j, "", nil
}

func (j *job) usage(g *model.Generator) usage {
	return usage{PromptTokens: j.promptTokens, CompletionTokens: g.Tokens(), TotalTokens: j.promptTokens + g.Tokens()}
}

// streamCompletion writes the completion as server-sent events: a chunk
// with the assistant's role, a chunk per token's text (flushed as it
// comes), one with the finish reason, the usage chunk when asked for, and
// [DONE].
func (s *Server) streamCompletion(ctx context.Context, w http.ResponseWriter, g *model.Generator, j *job, id string, created int64) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	base := chunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: s.o.Name, SystemFingerprint: s.m.Fingerprint()}
	if j.includeUsage {
		base.Usage = json.RawMessage("null")
	}
	send := func(c chunk) bool {
		b, _ := json.Marshal(c)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	withChoice := func(d delta, finish *string) chunk {
		c := base
		c.Choices = []chunkChoice{{Delta: d, FinishReason: finish}}
		return c
	}
	empty := ""
	if !send(withChoice(delta{Role: "assistant", Content: &empty}, nil)) {
		return
	}
	for more := true; more; {
		if !s.pause(ctx) {
			return
		}
		var text string
		text, more = g.Step()
		if text != "" && !send(withChoice(delta{Content: &text}, nil)) {
			return
		}
	}
	if g.Err() != nil {
		return // no finish reason: the client sees the answer cut short
	}
	finish := g.FinishReason()
	if !send(withChoice(delta{}, &finish)) {
		return
	}
	if j.includeUsage {
		c := base
		c.Choices = []chunkChoice{}
		c.Usage, _ = json.Marshal(j.usage(g))
		if !send(c) {
			return
		}
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	rc.Flush()
}

// pause waits TokenDelay; false when ctx ended (the client left).
func (s *Server) pause(ctx context.Context) bool {
	if s.o.TokenDelay <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(s.o.TokenDelay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func completionID() string {
	var b [12]byte
	rand.Read(b[:])
	return "chatcmpl-" + hex.EncodeToString(b[:])
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// writeError writes OpenAI's error body; param and code are null when
// empty.
func writeError(w http.ResponseWriter, status int, msg, typ, param, code string) {
	d := errorDetail{Message: msg, Type: typ}
	if param != "" {
		d.Param = &param
	}
	if code != "" {
		d.Code = &code
	}
	writeJSON(w, status, apiError{d})
}

// jsonProblem says what is wrong with a body json.Unmarshal refused,
// naming the field when it can.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("%s: want %s, not %s", te.Field, te.Type, te.Value)
	}
	return err.Error()
}
