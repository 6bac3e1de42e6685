package cli

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// The tests of this package run the commands in process, under a test
// binary that lives in the build cache: their hints read as a user on
// PATH sees them.
func init() { progName = "gpunet" }

// TestInvokedAs: hints name the program as it was run (issue 33): under
// go run, from PATH, by a path, or by a path to the program PATH finds.
func TestInvokedAs(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "gpunet")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "gpunet")
	if err := os.WriteFile(other, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	onPath := func(name string) (string, error) {
		if name == "gpunet" {
			return bin, nil
		}
		return "", errors.New("not found")
	}
	notOnPath := func(string) (string, error) { return "", errors.New("not found") }
	for _, c := range []struct {
		arg0 string
		look func(string) (string, error)
		want string
	}{
		{"/tmp/go-build2907430621/b001/exe/gpunet", onPath, "go run ./cmd/gpunet"},
		{"/root/.cache/go-build/4a/4a6a4baae4faf9bc8969990f26366fd8c53c13695eee5241d06623e8ef024695-d/gpunet", notOnPath, "go run ./cmd/gpunet"},
		{"/work/cache/4a/4a6a4baae4faf9bc8969990f26366fd8c53c13695eee5241d06623e8ef024695-d/gpunet", notOnPath, "go run ./cmd/gpunet"}, // GOCACHE elsewhere
		{"gpunet", onPath, "gpunet"},
		{"./gpunet", notOnPath, "./gpunet"},
		{bin, onPath, "gpunet"}, // the program PATH finds, run by its path
		{other, onPath, other},  // another gpunet than PATH's
		{bin, notOnPath, bin},   // not on PATH at all
	} {
		if got := invokedAs(c.arg0, c.look); got != c.want {
			t.Errorf("invokedAs(%q) = %q, want %q", c.arg0, got, c.want)
		}
	}
}
