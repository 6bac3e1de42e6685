package openaigw

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// clientDir is test/openai: OpenAI's official Node.js client, pinned, and
// the script that drives it.
const clientDir = "../../test/openai"

// needNode skips the test, or fails it under CI (CI=true), when a tool it
// needs is missing or cannot be installed.
func needNode(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format+" (CI=true: the official client's test must run)", args...)
	}
	t.Skipf(format, args...)
}

// installClient installs test/openai's locked packages once per lock file
// into the user's cache directory and returns where (the script is run
// from there, so that its import of "openai" resolves).
func installClient(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		needNode(t, "node is not installed: %v", err)
	}
	if _, err := exec.LookPath("npm"); err != nil {
		needNode(t, "npm is not installed: %v", err)
	}
	h := sha256.New()
	for _, f := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join(clientDir, f))
		if err != nil {
			t.Fatal(err)
		}
		h.Write(b)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	root := filepath.Join(cache, "gpunet")
	dir := filepath.Join(root, "openai-client-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json")); err == nil {
		return dir
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(root, "install-*")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	for _, f := range []string{"package.json", "package-lock.json"} {
		b, _ := os.ReadFile(filepath.Join(clientDir, f))
		if err := os.WriteFile(filepath.Join(tmp, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "npm_config_cache="+filepath.Join(root, "npm-cache"))
	if out, err := cmd.CombinedOutput(); err != nil {
		needNode(t, "npm ci of test/openai failed: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, fs.ErrExist) {
		// Another run installed it first (a non-empty dir is not replaced).
		if _, serr := os.Stat(filepath.Join(dir, "node_modules", "openai")); serr != nil {
			t.Fatalf("install the client: %v", err)
		}
	}
	return dir
}

// TestOfficialClient runs OpenAI's official Node.js client (test/openai)
// against the gateway, backed by a fake model server over real TCP: a
// chat completion, a streamed one with usage, the 404 of an unknown model
// as the client reports it, and the models list.
func TestOfficialClient(t *testing.T) {
	dir := installClient(t)
	script, err := os.ReadFile(filepath.Join(clientDir, "client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	// Each run its own copy of the script, beside the installed packages.
	f, err := os.CreateTemp(dir, "client-*.mjs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(f.Name()) })
	f.Write(script)
	f.Close()

	p := provider(1)
	svc := service(7, "tinylm", false, 100, p)
	h := newHarness(t, Options{}, svc)
	words := strings.Fields("Hello , network ! I am tiny .")
	h.serve(7, p, &fakeModel{Words: words, Delay: 5 * time.Millisecond})

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", f.Name(), h.url+"/openai/v1", testKey, "tinylm")
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.mjs: %v\n%s", err, stderr.String())
	}
	type usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	}
	var got struct {
		NonStreamed struct {
			Content string `json:"content"`
			Usage   *usage `json:"usage"`
		} `json:"nonStreamed"`
		Streamed struct {
			Content string `json:"content"`
			Usage   *usage `json:"usage"`
			Chunks  int    `json:"chunks"`
		} `json:"streamed"`
		MissingModel *struct {
			Status int    `json:"status"`
			Code   string `json:"code"`
			Type   string `json:"type"`
		} `json:"missingModel"`
		Models []struct {
			ID      string `json:"id"`
			OwnedBy string `json:"owned_by"`
		} `json:"models"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	t.Logf("client: %s", out)
	want := strings.Join(words, "")
	wantUsage := usage{PromptTokens: 5, CompletionTokens: len(words), TotalTokens: 5 + len(words)}
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
