package openaigw

import (
	"strings"
	"testing"
	"time"

	openaiclient "github.com/gpunet/gpunet/test/openai"
)

// TestOfficialClient runs OpenAI's official Node.js client (test/openai)
// against the gateway, backed by a fake model server over real TCP: a
// chat completion, a streamed one with usage, the 404 of an unknown model
// as the client reports it, and the models list.
func TestOfficialClient(t *testing.T) {
	p := provider(1)
	svc := service(7, "tinylm", false, 100, p)
	h := newHarness(t, Options{}, svc)
	words := strings.Fields("Hello , network ! I am tiny .")
	h.serve(7, p, &fakeModel{Words: words, Delay: 5 * time.Millisecond})

	got := openaiclient.Run(t, h.url+"/openai/v1", testKey, "tinylm")
	want := strings.Join(words, "")
	wantUsage := openaiclient.Usage{PromptTokens: 5, CompletionTokens: len(words), TotalTokens: 5 + len(words)}
	if got.NonStreamed.Content != want || got.NonStreamed.Usage == nil || *got.NonStreamed.Usage != wantUsage {
		t.Errorf("non-streamed: %q usage %+v, want %q usage %+v", got.NonStreamed.Content, got.NonStreamed.Usage, want, wantUsage)
	}
	// role, one per word, finish, usage
	if got.Streamed.Content != want || got.Streamed.Usage == nil || *got.Streamed.Usage != wantUsage || got.Streamed.Chunks != len(words)+3 {
		t.Errorf("streamed: %q usage %+v in %d chunks, want %q usage %+v in %d", got.Streamed.Content, got.Streamed.Usage,
			got.Streamed.Chunks, want, wantUsage, len(words)+3)
	}
	if m := got.MissingModel; m == nil || m.Status != 404 || m.Code != CodeModelNotFound || m.Type != typeInvalidRequest {
		t.Errorf("unknown model: the client reported %+v, want 404 %s %s", m, CodeModelNotFound, typeInvalidRequest)
	}
	if len(got.Models) != 1 || got.Models[0].ID != "tinylm" || got.Models[0].OwnedBy != svc.Owner.String() {
		t.Errorf("models %+v, want tinylm owned by %s", got.Models, svc.Owner)
	}
}
