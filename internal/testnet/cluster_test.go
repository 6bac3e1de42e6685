package testnet_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/bintest"
	"github.com/gpunet/gpunet/internal/testnet"
)

// TestUpSaysWhyInitFailed: when `gpunet init` fails (here for want of a
// keyring passphrase for the validators' operator keys: the passphrase
// file it is given is empty), Up returns init's error and removes the
// namespaces it made. It used to panic instead: its deferred cleanup
// called Close on the nil cluster `return nil, err` had just set.
func TestUpSaysWhyInitFailed(t *testing.T) {
	needNet(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	bin, err := bintest.Build(ctx, "github.com/gpunet/gpunet/cmd/gpunet")
	if err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "passphrase")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GPUNET_") && !strings.HasPrefix(kv, "CREDENTIALS_DIRECTORY=") {
			env = append(env, kv)
		}
	}
	c, err := testnet.Up(ctx, testnet.ClusterOptions{Bin: bin, Dir: t.TempDir(), Validators: 2, Hosts: []string{"client"},
		InitArgs: []string{"--keyring-passphrase-file", empty}, Env: env})
	if err == nil {
		c.Close()
		t.Fatal("Up with init failing: no error")
	}
	if c != nil {
		t.Errorf("Up failed (%v) but returned a cluster", err)
	}
	for _, want := range []string{"gpunet init", "--keyring-passphrase-file", "is empty"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	left, _ := filepath.Glob(fmt.Sprintf("/run/netns/%s%d-*", testnet.Prefix, os.Getpid()))
	if len(left) > 0 {
		t.Errorf("namespaces left after the failed Up: %v", left)
	}
}
