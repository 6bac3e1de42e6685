package server

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/examples/tinylm/model"
)

func serve(t *testing.T, o Options) string {
	t.Helper()
	srv := httptest.NewServer(New(model.Default(), o))
	t.Cleanup(srv.Close)
	return srv.URL
}

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func decode[T any](t *testing.T, resp *http.Response) T {
	t.Helper()
	var v T
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("%s: %v", resp.Status, err)
	}
	return v
}

const question = `{"role":"user","content":"Is not Fire a Body heated so hot as to emit Light?"}`

// TestCompletion: a non-streamed completion is OpenAI's chat.completion
// with usage; its text is the model's with the request's seed, or with a
// seed from the messages when it has none (the same answer twice).
func TestCompletion(t *testing.T) {
	url := serve(t, Options{})
	body := `{"model":"tinylm","messages":[{"role":"system","content":"Answer as Newton."},` + question + `],"max_tokens":12,"seed":42,"temperature":0.7}`
	resp := post(t, url, body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	c := decode[completion](t, resp)
	m := model.Default()
	g := m.Generate(m.Tokenize("Is not Fire a Body heated so hot as to emit Light?"), model.Options{Temperature: 0.7, Seed: 42, MaxTokens: 12})
	want := g.Run()
	// system: 1 + 4 tokens ("Answer", " as", " Newton", "."); user: 1 + 13.
	wantUsage := usage{PromptTokens: 19, CompletionTokens: g.Tokens(), TotalTokens: 19 + g.Tokens()}
	if c.Object != "chat.completion" || !strings.HasPrefix(c.ID, "chatcmpl-") || c.Model != "tinylm" || c.Created == 0 || c.SystemFingerprint != m.Fingerprint() ||
		len(c.Choices) != 1 || c.Choices[0].Message.Role != "assistant" || c.Choices[0].Message.Content != want || c.Choices[0].FinishReason != g.FinishReason() || c.Usage != wantUsage {
		t.Fatalf("got %+v\nwant content %q, finish %q, usage %+v", c, want, g.FinishReason(), wantUsage)
	}

	seedless := `{"model":"tinylm","messages":[` + question + `]}`
	a := decode[completion](t, post(t, url, seedless))
	b := decode[completion](t, post(t, url, seedless))
	if a.Choices[0].Message.Content == "" || a.Choices[0].Message.Content != b.Choices[0].Message.Content || a.ID == b.ID {
		t.Errorf("the same seedless request twice: %q (%s) and %q (%s)", a.Choices[0].Message.Content, a.ID, b.Choices[0].Message.Content, b.ID)
	}
	if n := a.Usage.CompletionTokens; n < 1 || n > model.DefaultMaxTokens || a.Usage.TotalTokens != a.Usage.PromptTokens+n {
		t.Errorf("usage %+v: want 1 to %d completion tokens (the default max_tokens)", a.Usage, model.DefaultMaxTokens)
	}
}

// event is one server-sent event's data: a chunk, or [DONE].
type event struct {
	raw  string
	c    chunk
	at   time.Time
	done bool
}

func readEvents(t *testing.T, resp *http.Response) []event {
	t.Helper()
	var evs []event
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("a line that is not an event's data: %q", line)
		}
		e := event{raw: data, at: time.Now(), done: data == "[DONE]"}
		if !e.done {
			if err := json.Unmarshal([]byte(data), &e.c); err != nil {
				t.Fatalf("%q: %v", data, err)
			}
		}
		evs = append(evs, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestStream: a streamed completion is a role chunk, content chunks that
// add up to the non-streamed answer, a finish chunk, the usage chunk
// (choices empty) when stream_options.include_usage asks for it (usage
// null on the others), then [DONE]; without include_usage no chunk has a
// usage field.
func TestStream(t *testing.T) {
	url := serve(t, Options{})
	whole := decode[completion](t, post(t, url, `{"model":"tinylm","messages":[`+question+`],"max_tokens":30,"seed":5}`))

	for _, includeUsage := range []bool{true, false} {
		opts := ""
		if includeUsage {
			opts = `,"stream_options":{"include_usage":true}`
		}
		resp := post(t, url, `{"model":"tinylm","messages":[`+question+`],"max_tokens":30,"seed":5,"stream":true`+opts+`}`)
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
			t.Fatalf("%s, Content-Type %q", resp.Status, ct)
		}
		evs := readEvents(t, resp)
		if len(evs) < 4 || !evs[len(evs)-1].done {
			t.Fatalf("include_usage %v: %d events, the last not [DONE]: %+v", includeUsage, len(evs), evs)
		}
		evs = evs[:len(evs)-1]
		var u *usage
		if includeUsage {
			last := evs[len(evs)-1]
			if last.c.Choices == nil || len(last.c.Choices) != 0 || !strings.Contains(last.raw, `"choices":[]`) {
				t.Fatalf("the usage chunk's choices: %s", last.raw)
			}
			if err := json.Unmarshal(last.c.Usage, &u); err != nil || u == nil {
				t.Fatalf("the usage chunk: %s", last.raw)
			}
			evs = evs[:len(evs)-1]
		}
		first := evs[0].c.Choices[0]
		if first.Delta.Role != "assistant" || first.Delta.Content == nil || *first.Delta.Content != "" || first.FinishReason != nil {
			t.Errorf("the first chunk: %s", evs[0].raw)
		}
		fin := evs[len(evs)-1].c.Choices[0]
		if fin.FinishReason == nil || *fin.FinishReason != whole.Choices[0].FinishReason || fin.Delta != (delta{}) {
			t.Errorf("the finish chunk: %s, want finish_reason %q", evs[len(evs)-1].raw, whole.Choices[0].FinishReason)
		}
		var text strings.Builder
		for _, e := range evs {
			c := e.c
			if c.Object != "chat.completion.chunk" || c.ID != evs[0].c.ID || c.Created != evs[0].c.Created || c.Model != "tinylm" {
				t.Errorf("a chunk: %s", e.raw)
			}
			if wantNull := includeUsage; wantNull != strings.Contains(e.raw, `"usage":null`) || !wantNull && strings.Contains(e.raw, `"usage"`) {
				t.Errorf("include_usage %v, a chunk: %s", includeUsage, e.raw)
			}
			if d := c.Choices[0].Delta.Content; d != nil {
				text.WriteString(*d)
			}
		}
		if got := text.String(); got != whole.Choices[0].Message.Content {
			t.Errorf("streamed %q, not streamed %q", got, whole.Choices[0].Message.Content)
		}
		if includeUsage && *u != whole.Usage {
			t.Errorf("streamed usage %+v, not streamed %+v", *u, whole.Usage)
		}
	}
}

// TestStreamFlushesPerToken: with a token delay, the chunks arrive one by
// one as they are generated, not all at the end.
func TestStreamFlushesPerToken(t *testing.T) {
	const delay = 40 * time.Millisecond
	url := serve(t, Options{TokenDelay: delay})
	evs := readEvents(t, post(t, url, `{"model":"tinylm","messages":[`+question+`],"max_tokens":8,"temperature":0,"stream":true}`))
	var at []time.Time
	for _, e := range evs {
		if !e.done && len(e.c.Choices) == 1 && e.c.Choices[0].Delta.Content != nil && *e.c.Choices[0].Delta.Content != "" {
			at = append(at, e.at)
		}
	}
	if len(at) < 4 {
		t.Fatalf("%d content chunks", len(at))
	}
	if spread, want := at[len(at)-1].Sub(at[0]), time.Duration(len(at)-1)*delay*3/4; spread < want {
		t.Errorf("%d content chunks arrived within %v of each other, want them a token delay (%v) apart: buffered, not flushed", len(at), spread, delay)
	}
}

// TestStop: a stop string ends the answer before it, in both forms.
func TestStop(t *testing.T) {
	url := serve(t, Options{})
	base := `{"model":"tinylm","messages":[` + question + `],"max_tokens":40,"seed":9`
	full := decode[completion](t, post(t, url, base+`}`)).Choices[0].Message.Content
	words := strings.Fields(full)
	if len(words) < 5 {
		t.Fatalf("too short: %q", full)
	}
	stop := " " + words[3]
	want := full[:strings.Index(full, stop)]
	stopJSON, _ := json.Marshal(stop)
	got := decode[completion](t, post(t, url, base+`,"stop":`+string(stopJSON)+`}`))
	if got.Choices[0].Message.Content != want || got.Choices[0].FinishReason != "stop" {
		t.Errorf("stop %q: %q (%s), want %q (stop)", stop, got.Choices[0].Message.Content, got.Choices[0].FinishReason, want)
	}
	var streamed strings.Builder
	for _, e := range readEvents(t, post(t, url, base+`,"stream":true,"stop":[`+string(stopJSON)+`,"zzz"]}`)) {
		if !e.done && e.c.Choices[0].Delta.Content != nil {
			streamed.WriteString(*e.c.Choices[0].Delta.Content)
		}
	}
	if streamed.String() != want {
		t.Errorf("streamed with stop %q: %q, want %q", stop, streamed.String(), want)
	}
}

func TestModelsAndHealth(t *testing.T) {
	url := serve(t, Options{Name: "tinylm"})
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	l := decode[modelList](t, resp)
	resp.Body.Close()
	if l.Object != "list" || len(l.Data) != 1 || l.Data[0].ID != "tinylm" || l.Data[0].Object != "model" || l.Data[0].OwnedBy == "" {
		t.Errorf("/v1/models: %+v", l)
	}
	resp, err = http.Get(url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/health: %s", resp.Status)
	}
}

// TestErrors: bad requests get the status and OpenAI's error body
// ({"error":{"message","type","param","code"}}) an OpenAI client reads.
func TestErrors(t *testing.T) {
	url := serve(t, Options{})
	msgs := `"messages":[` + question + `]`
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		param, code              any
	}{
		{"unknown model", "POST", "/v1/chat/completions", `{"model":"gpt-4o",` + msgs + `}`, 404, "model", "model_not_found"},
		{"unknown model card", "GET", "/v1/models/gpt-4o", ``, 404, "model", "model_not_found"},
		{"no model", "POST", "/v1/chat/completions", `{` + msgs + `}`, 400, "model", nil},
		{"malformed JSON", "POST", "/v1/chat/completions", `{"model":"tinylm",`, 400, nil, nil},
		{"a wrong type", "POST", "/v1/chat/completions", `{"model":"tinylm",` + msgs + `,"max_tokens":"many"}`, 400, nil, nil},
		{"no messages", "POST", "/v1/chat/completions", `{"model":"tinylm","messages":[]}`, 400, "messages", nil},
		{"a bad role", "POST", "/v1/chat/completions", `{"model":"tinylm","messages":[{"role":"king","content":"hi"}]}`, 400, "messages[0].role", nil},
		{"an image part", "POST", "/v1/chat/completions", `{"model":"tinylm","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, nil, nil},
		{"max_tokens too many", "POST", "/v1/chat/completions", `{"model":"tinylm",` + msgs + `,"max_tokens":1025}`, 400, "max_tokens", nil},
		{"max_completion_tokens 0", "POST", "/v1/chat/completions", `{"model":"tinylm",` + msgs + `,"max_completion_tokens":0}`, 400, "max_completion_tokens", nil},
		{"temperature 3", "POST", "/v1/chat/completions", `{"model":"tinylm",` + msgs + `,"temperature":3}`, 400, "temperature", nil},
		{"top_p 2", "POST", "/v1/chat/completions", `{"model":"tinylm",` + msgs + `,"top_p":2}`, 400, "top_p", nil},
		{"n 2", "POST", "/v1/chat/completions", `{"model":"tinylm",` + msgs + `,"n":2}`, 400, "n", nil},
		{"five stops", "POST", "/v1/chat/completions", `{"model":"tinylm",` + msgs + `,"stop":["a","b","c","d","e"]}`, 400, "stop", nil},
		{"stream_options without stream", "POST", "/v1/chat/completions", `{"model":"tinylm",` + msgs + `,"stream_options":{"include_usage":true}}`, 400, "stream_options", nil},
		{"too large", "POST", "/v1/chat/completions", `{"model":"tinylm","messages":[{"role":"user","content":"` + strings.Repeat("Light ", MaxBodyBytes/6+1) + `"}]}`, 413, nil, "request_too_large"},
		{"GET a completion", "GET", "/v1/chat/completions", ``, 405, nil, "method_not_allowed"},
		{"an unknown path", "POST", "/v1/completions", `{}`, 404, nil, "unknown_url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), tc.method, url+tc.path, strings.NewReader(tc.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var e struct {
				Error map[string]any `json:"error"`
			}
			if err := json.Unmarshal(b, &e); err != nil || resp.StatusCode != tc.status {
				t.Fatalf("%s %s\n%s", resp.Status, err, b)
			}
			for _, k := range []string{"message", "type", "param", "code"} {
				if _, ok := e.Error[k]; !ok {
					t.Errorf("no %q in %s", k, b)
				}
			}
			if msg, _ := e.Error["message"].(string); msg == "" || e.Error["type"] != "invalid_request_error" || e.Error["param"] != tc.param || e.Error["code"] != tc.code {
				t.Errorf("got %s, want param %v, code %v", b, tc.param, tc.code)
			}
		})
	}
}

// FuzzChat: whatever the body, the server answers with a status and JSON
// (an error) or a completion, never a panic.
func FuzzChat(f *testing.F) {
	f.Add(`{"model":"tinylm","messages":[` + question + `],"max_tokens":3}`)
	f.Add(`{"model":"tinylm","messages":[{"role":"user","content":[{"type":"text","text":"Light"}]}],"stop":"x","stream":true}`)
	f.Add(`{"model":"tinylm","messages":[{"role":"user","content":null}],"top_p":0.01,"temperature":2,"max_tokens":1}`)
	h := New(model.Default(), Options{})
	f.Fuzz(func(t *testing.T, body string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body)))
		if rec.Code == 0 || rec.Body.Len() == 0 {
			t.Fatalf("no answer to %q", body)
		}
	})
}
