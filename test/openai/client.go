// Package openaiclient runs OpenAI's official Node.js client (the openai
// npm package, pinned by package-lock.json beside this file) against an
// OpenAI-compatible endpoint, for tests: client.mjs makes a chat
// completion, a streamed one, a request for a model nobody serves and a
// models list, and Run returns what came back.
//
// The packages are installed once per lock file under the user's cache
// directory. Without node or npm, or when the install fails, the calling
// test is skipped with the reason, or fails under CI=true (CI must run it).
package openaiclient

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
	"runtime"
	"strings"
	"testing"
	"time"
)

// Usage is OpenAI's usage object.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Result is what client.mjs printed.
type Result struct {
	NonStreamed struct {
		Content string `json:"content"`
		Usage   *Usage `json:"usage"`
	} `json:"nonStreamed"`
	Streamed struct {
		Content      string  `json:"content"`
		Usage        *Usage  `json:"usage"`
		Chunks       int     `json:"chunks"`
		FirstChunkMs float64 `json:"firstChunkMs"`
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

// dir is this package's directory: client.mjs and the lock file.
func dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// need skips t, or fails it under CI=true, for a missing tool.
func need(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format+" (CI=true: the official client's test must run)", args...)
	}
	t.Skipf(format, args...)
}

// Install installs the locked packages once per lock file into the user's
// cache directory and returns where.
func Install(t testing.TB) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			need(t, "%s is not installed: %v", tool, err)
		}
	}
	h := sha256.New()
	for _, f := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join(dir(), f))
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
	into := filepath.Join(root, "openai-client-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(into, "node_modules", "openai", "package.json")); err == nil {
		return into
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
		b, _ := os.ReadFile(filepath.Join(dir(), f))
		if err := os.WriteFile(filepath.Join(tmp, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "npm_config_cache="+filepath.Join(root, "npm-cache"))
	if out, err := cmd.CombinedOutput(); err != nil {
		need(t, "npm ci of test/openai failed: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, into); err != nil && !errors.Is(err, fs.ErrExist) {
		// Another run installed it first (a non-empty dir is not replaced).
		if _, serr := os.Stat(filepath.Join(into, "node_modules", "openai")); serr != nil {
			t.Fatalf("install the client: %v", err)
		}
	}
	return into
}

// Run runs client.mjs against baseURL (a node's {api}/openai/v1) with key
// and model, and returns what it printed.
func Run(t testing.TB, baseURL, key, model string) Result {
	t.Helper()
	into := Install(t)
	script, err := os.ReadFile(filepath.Join(dir(), "client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	// Each run its own copy of the script, beside the installed packages
	// (so that its import of "openai" resolves).
	f, err := os.CreateTemp(into, "client-*.mjs")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	f.Write(script)
	f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", f.Name(), baseURL, key, model)
	cmd.Dir = into
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.mjs %s: %v\n%s", baseURL, err, stderr.String())
	}
	var r Result
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	t.Logf("official OpenAI client: %s", out)
	return r
}
