package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/keys"
)

// gpunetRun runs the CLI in-process and returns its exit code, stdout and
// stderr.
func gpunetRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestKeysAddEncrypts is the at-rest finding of issue 19: `gpunet keys
// add` wrote the private key in the clear. It now encrypts it with the
// passphrase, asks for none to list, show or resolve the key, and fails
// clearly without one.
func TestKeysAddEncrypts(t *testing.T) {
	ttyPath = filepath.Join(t.TempDir(), "no-tty") // never prompt the developer's terminal
	t.Setenv(keys.PassphraseEnv, "")
	home := t.TempDir()
	passFile := filepath.Join(home, "pass")
	if err := os.WriteFile(passFile, []byte("open sesame\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := gpunetRun(t, "keys", "add", "carol", "--home", home, "--keyring-passphrase-file", passFile, "--output", "json")
	if code != 0 {
		t.Fatalf("keys add: exit %d: %s", code, errOut)
	}
	var added keyJSON
	if err := json.Unmarshal([]byte(out), &added); err != nil || !added.Encrypted {
		t.Fatalf("keys add: %s (%v), want an encrypted key", out, err)
	}
	data, err := os.ReadFile(filepath.Join(home, "keyring", "carol.json"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("private_key_seed")) || bytes.Contains(data, []byte("AGE-SECRET-KEY")) {
		t.Fatalf("carol's key file holds her private key in the clear:\n%s", data)
	}

	// Listing and showing need no passphrase.
	for _, args := range [][]string{{"keys", "list"}, {"keys", "show", "carol"}} {
		if code, out, errOut := gpunetRun(t, append(args, "--home", home)...); code != 0 || !strings.Contains(out, added.Address) {
			t.Errorf("%v: exit %d: %s %s", args, code, out, errOut)
		}
	}

	// The passphrase decrypts it: from the file, or from the environment.
	kr, err := keys.Open(filepath.Join(home, "keyring"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(keys.PassphraseEnv, "open sesame")
	if k, err := kr.Get("carol"); err != nil || k.Address.String() != added.Address {
		t.Errorf("Get with the passphrase: %v", err)
	}
	t.Setenv(keys.PassphraseEnv, "")

	// Without a passphrase or a terminal: a clear error saying how.
	code, _, errOut = gpunetRun(t, "keys", "add", "dave", "--home", home)
	for _, want := range []string{"--keyring-passphrase-file", keys.PassphraseEnv, "--unencrypted"} {
		if code != ExitError || !strings.Contains(errOut, want) {
			t.Errorf("keys add without a passphrase: exit %d, %q; want exit %d naming %s", code, errOut, ExitError, want)
		}
	}
	if code, out, errOut := gpunetRun(t, "keys", "add", "dave", "--unencrypted", "--home", home); code != 0 || !strings.Contains(out, "unencrypted") {
		t.Errorf("keys add --unencrypted: exit %d: %s %s", code, out, errOut)
	}
}
