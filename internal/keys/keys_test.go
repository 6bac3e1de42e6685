package keys

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"filippo.io/age"

	"github.com/gpunet/gpunet/internal/address"
)

func openTemp(t *testing.T) *Keyring {
	t.Helper()
	kr, err := Open(filepath.Join(t.TempDir(), "keyring"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return kr
}

func mustAdd(t *testing.T, kr *Keyring, name string) *Key {
	t.Helper()
	k, err := kr.Add(name)
	if err != nil {
		t.Fatalf("Add(%q): %v", name, err)
	}
	return k
}

func sameKey(t *testing.T, got, want *Key) {
	t.Helper()
	if got.Name != want.Name || got.Address != want.Address || !bytes.Equal(got.PubKey, want.PubKey) ||
		!bytes.Equal(got.PrivateKey(), want.PrivateKey()) || got.Identity().String() != want.Identity().String() {
		t.Errorf("key mismatch:\n got  %s %s\n want %s %s", got.Name, got.Address, want.Name, want.Address)
	}
}

func TestOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "keyring")
	kr, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if kr.Dir() != dir {
		t.Errorf("Dir() = %q, want %q", kr.Dir(), dir)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o700 {
		t.Errorf("keyring dir mode = %v, want 0700", fi.Mode().Perm())
	}
	// Opening again is fine.
	if _, err := Open(dir); err != nil {
		t.Errorf("reopen: %v", err)
	}

	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(file); err == nil {
		t.Error("Open on a regular file succeeded")
	}
	if _, err := Open(""); err == nil {
		t.Error("Open(\"\") succeeded")
	}
}

func TestRoundTrip(t *testing.T) {
	kr := openTemp(t)
	names := []string{"provider-1", "alice", "0bob", "a.b_c-d"}
	added := map[string]*Key{}
	for _, n := range names {
		k := mustAdd(t, kr, n)
		if k.Name != n {
			t.Errorf("Add(%q).Name = %q", n, k.Name)
		}
		if k.Address != address.FromPubKey(k.PubKey) {
			t.Errorf("%s: address does not match public key", n)
		}
		if !strings.HasPrefix(k.Address.String(), "gpu1") {
			t.Errorf("%s: address %s lacks gpu1 prefix", n, k.Address)
		}
		if !bytes.Equal(k.PrivateKey().Public().(ed25519.PublicKey), k.PubKey) {
			t.Errorf("%s: private key does not match public key", n)
		}
		added[n] = k
	}

	for _, n := range names {
		got, err := kr.Get(n)
		if err != nil {
			t.Fatalf("Get(%q): %v", n, err)
		}
		sameKey(t, got, added[n])
	}

	// A fresh keyring on the same directory sees the same keys.
	kr2, err := Open(kr.Dir())
	if err != nil {
		t.Fatal(err)
	}
	list, err := kr2.List()
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	wantOrder := []string{"0bob", "a.b_c-d", "alice", "provider-1"}
	if len(list) != len(wantOrder) {
		t.Fatalf("List returned %d keys, want %d", len(list), len(wantOrder))
	}
	for i, k := range list {
		if k.Name != wantOrder[i] {
			t.Errorf("List()[%d] = %q, want %q", i, k.Name, wantOrder[i])
		}
		sameKey(t, k, added[k.Name])
	}

	if err := kr.Delete("alice"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := kr.Get("alice"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Delete: err = %v, want ErrNotFound", err)
	}
	if err := kr.Delete("alice"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Delete: err = %v, want ErrNotFound", err)
	}
	list, err = kr.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 {
		t.Errorf("List after Delete: %d keys, want 3", len(list))
	}
	// The name is free again.
	if _, err := kr.Add("alice"); err != nil {
		t.Errorf("Add after Delete: %v", err)
	}
}

func TestListEmptyAndIgnoresOtherFiles(t *testing.T) {
	kr := openTemp(t)
	list, err := kr.List()
	if err != nil || len(list) != 0 {
		t.Fatalf("List on empty keyring = %v, %v", list, err)
	}
	mustAdd(t, kr, "alice")
	for name, content := range map[string]string{
		"README":          "hello",
		"notes.txt":       "{}",
		"Upper.json":      "garbage",
		".hidden.json":    "garbage",
		".alice.tmp-1234": "garbage",
	} {
		if err := os.WriteFile(filepath.Join(kr.Dir(), name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(kr.Dir(), "sub.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	list, err = kr.List()
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(list) != 1 || list[0].Name != "alice" {
		t.Errorf("List = %v, want just alice", list)
	}
}

func TestAddDuplicate(t *testing.T) {
	kr := openTemp(t)
	first := mustAdd(t, kr, "alice")
	tests := []struct {
		name string
		add  func() (*Key, error)
	}{
		{"Add", func() (*Key, error) { return kr.Add("alice") }},
		{"Import", func() (*Key, error) { return kr.Import("alice", make([]byte, 32), "") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := tt.add()
			if !errors.Is(err, ErrExists) {
				t.Fatalf("err = %v, want ErrExists", err)
			}
			if k != nil {
				t.Error("returned a key along with the error")
			}
			if !strings.Contains(err.Error(), `"alice"`) {
				t.Errorf("error %q does not name the key", err)
			}
		})
	}
	got, err := kr.Get("alice")
	if err != nil {
		t.Fatal(err)
	}
	sameKey(t, got, first)
	assertNoTempFiles(t, kr)
}

func TestConcurrentAdd(t *testing.T) {
	kr := openTemp(t)
	const n = 8
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		keys    = make([]*Key, n)
		errs    = make([]error, n)
		success int
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			keys[i], errs[i] = kr.Add("racer")
		}()
	}
	close(start)
	wg.Wait()
	var winner *Key
	for i := range n {
		switch {
		case errs[i] == nil:
			success++
			winner = keys[i]
		case !errors.Is(errs[i], ErrExists):
			t.Errorf("goroutine %d: unexpected error %v", i, errs[i])
		}
	}
	if success != 1 {
		t.Fatalf("%d Adds succeeded, want exactly 1", success)
	}
	got, err := kr.Get("racer")
	if err != nil {
		t.Fatal(err)
	}
	sameKey(t, got, winner)
	assertNoTempFiles(t, kr)
}

func assertNoTempFiles(t *testing.T, kr *Keyring) {
	t.Helper()
	entries, err := os.ReadDir(kr.Dir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func TestBadNames(t *testing.T) {
	kr := openTemp(t)
	valid := []string{"a", "0", "provider-1", "alice", "a.b", "a_b", "a-", strings.Repeat("x", 64)}
	for _, n := range valid {
		if err := ValidateName(n); err != nil {
			t.Errorf("ValidateName(%q) = %v, want nil", n, err)
		}
	}
	invalid := []string{
		"", "../x", "Alice", "ALICE", "a/b", `a\b`, ".hidden", "-x", "_x", "a b", "a\x00", "é",
		strings.Repeat("x", 65), "..", ".", "alice.json/..",
	}
	for _, n := range invalid {
		t.Run(n, func(t *testing.T) {
			err := ValidateName(n)
			if err == nil {
				t.Fatalf("ValidateName(%q) = nil, want error", n)
			}
			msg := err.Error()
			if !strings.Contains(msg, fmt.Sprintf("%q", n)) || !strings.Contains(msg, "lowercase") {
				t.Errorf("error %q should name %q and state the rule", msg, n)
			}
			for op, f := range map[string]func() error{
				"Add":    func() error { _, err := kr.Add(n); return err },
				"Import": func() error { _, err := kr.Import(n, make([]byte, 32), ""); return err },
				"Get":    func() error { _, err := kr.Get(n); return err },
				"Delete": func() error { return kr.Delete(n) },
			} {
				if err := f(); err == nil || errors.Is(err, ErrNotFound) {
					t.Errorf("%s(%q) err = %v, want a name error", op, n, err)
				}
			}
		})
	}
	entries, _ := os.ReadDir(kr.Dir())
	if len(entries) != 0 {
		t.Errorf("bad names left %d files behind", len(entries))
	}
}

func TestGetUnknown(t *testing.T) {
	kr := openTemp(t)
	mustAdd(t, kr, "alice")
	_, err := kr.Get("bob")
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	for _, want := range []string{`"bob"`, kr.Dir(), "gpunet keys add bob", "gpunet keys list"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestCorruptFiles(t *testing.T) {
	kr := openTemp(t)
	good := mustAdd(t, kr, "alice")
	other := mustAdd(t, kr, "other")
	goodBytes, err := os.ReadFile(kr.path("alice"))
	if err != nil {
		t.Fatal(err)
	}
	var base keyFile
	if err := json.Unmarshal(goodBytes, &base); err != nil {
		t.Fatal(err)
	}
	if err := kr.Delete("other"); err != nil {
		t.Fatal(err)
	}
	edit := func(f func(*keyFile)) []byte {
		kf := base
		f(&kf)
		b, err := json.Marshal(kf)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name    string
		content []byte
		want    string // substring of the error besides the file name
	}{
		{"truncated JSON", goodBytes[:len(goodBytes)/2], "JSON"},
		{"empty file", nil, "JSON"},
		{"not JSON", []byte("hello"), "JSON"},
		{"trailing data", append(bytes.Clone(goodBytes), []byte("{}")...), "after"},
		{"unknown field", []byte(strings.Replace(string(goodBytes), `"name"`, `"extra": 1, "name"`, 1)), "extra"},
		{"address of another key", edit(func(kf *keyFile) { kf.Address = other.Address.String() }), "address"},
		{"address bad checksum", edit(func(kf *keyFile) {
			// Change the last character (to one it is not, or the key would
			// be intact one time in 32).
			last := "q"
			if strings.HasSuffix(kf.Address, "q") {
				last = "p"
			}
			kf.Address = kf.Address[:len(kf.Address)-1] + last
		}), "address"},
		{"public key of another key", edit(func(kf *keyFile) { kf.PublicKey = base64.StdEncoding.EncodeToString(other.PubKey) }), "public_key"},
		{"seed bad base64", edit(func(kf *keyFile) { kf.PrivateKeySeed = "!!!not base64!!!" }), "private_key_seed"},
		{"seed short", edit(func(kf *keyFile) { kf.PrivateKeySeed = base64.StdEncoding.EncodeToString(make([]byte, 31)) }), "31 bytes"},
		{"seed of another key", edit(func(kf *keyFile) { kf.PrivateKeySeed = base64.StdEncoding.EncodeToString(other.PrivateKey().Seed()) }), "public_key"},
		{"public key bad base64", edit(func(kf *keyFile) { kf.PublicKey = "%%%" }), "public_key"},
		{"bad identity", edit(func(kf *keyFile) { kf.X25519Identity = "AGE-SECRET-KEY-1NOPE" }), "x25519_identity"},
		{"missing identity", edit(func(kf *keyFile) { kf.X25519Identity = "" }), "x25519_identity"},
		{"wrong type", edit(func(kf *keyFile) { kf.Type = "secp256k1" }), "type"},
		{"name mismatch", edit(func(kf *keyFile) { kf.Name = "bob" }), `"bob"`},
		{"invalid name", edit(func(kf *keyFile) { kf.Name = "../bob" }), "name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := kr.path("alice")
			if err := os.WriteFile(path, tt.content, 0o600); err != nil {
				t.Fatal(err)
			}
			for op, f := range map[string]func() error{
				"Get":  func() error { _, err := kr.Get("alice"); return err },
				"List": func() error { _, err := kr.List(); return err },
			} {
				err := f()
				if err == nil {
					t.Fatalf("%s accepted a corrupt file", op)
				}
				if errors.Is(err, ErrNotFound) {
					t.Errorf("%s: corrupt file reported as not found: %v", op, err)
				}
				if !strings.Contains(err.Error(), path) {
					t.Errorf("%s: error %q does not name the file %s", op, err, path)
				}
				if !strings.Contains(err.Error(), tt.want) {
					t.Errorf("%s: error %q does not mention %q", op, err, tt.want)
				}
			}
		})
	}
	// Restoring the original content makes the key usable again.
	if err := os.WriteFile(kr.path("alice"), goodBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := kr.Get("alice")
	if err != nil {
		t.Fatal(err)
	}
	sameKey(t, got, good)
}

func TestSign(t *testing.T) {
	kr := openTemp(t)
	k := mustAdd(t, kr, "signer")
	loaded, err := kr.Get("signer")
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range [][]byte{nil, []byte("hello"), bytes.Repeat([]byte{0xff}, 4096)} {
		sig := loaded.Sign(msg)
		if !ed25519.Verify(k.PubKey, msg, sig) {
			t.Errorf("signature over %d bytes does not verify", len(msg))
		}
		if ed25519.Verify(k.PubKey, append(bytes.Clone(msg), 0), sig) {
			t.Error("signature verifies for a different message")
		}
	}
	// PrivateKey returns a copy: scribbling on it does not change the key.
	pk := k.PrivateKey()
	for i := range pk {
		pk[i] = 0
	}
	if !ed25519.Verify(k.PubKey, []byte("x"), k.Sign([]byte("x"))) {
		t.Error("modifying PrivateKey() result changed the key")
	}
}

func TestIdentityRoundTrip(t *testing.T) {
	kr := openTemp(t)
	alice := mustAdd(t, kr, "alice")
	bob := mustAdd(t, kr, "bob")
	if !strings.HasPrefix(alice.Recipient(), "age1") {
		t.Errorf("Recipient() = %q, want age1…", alice.Recipient())
	}
	if !strings.HasPrefix(alice.Identity().String(), "AGE-SECRET-KEY-1") {
		t.Error("Identity() is not an AGE-SECRET-KEY-1 identity")
	}
	if alice.Recipient() == bob.Recipient() {
		t.Error("two keys share a recipient")
	}

	rcpt, err := age.ParseX25519Recipient(alice.Recipient())
	if err != nil {
		t.Fatalf("parse recipient: %v", err)
	}
	plaintext := []byte("job results for alice")
	var buf bytes.Buffer
	w, err := age.Encrypt(&buf, rcpt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(plaintext); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ciphertext := buf.Bytes()

	// Decrypt with the identity as loaded back from disk.
	loaded, err := kr.Get("alice")
	if err != nil {
		t.Fatal(err)
	}
	r, err := age.Decrypt(bytes.NewReader(ciphertext), loaded.Identity())
	if err != nil {
		t.Fatalf("decrypt: %v", err)
	}
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, plaintext) {
		t.Errorf("decrypted %q, want %q", got, plaintext)
	}
	if _, err := age.Decrypt(bytes.NewReader(ciphertext), bob.Identity()); err == nil {
		t.Error("bob decrypted a message for alice")
	}
}

func TestFileMode(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no unix permissions")
	}
	kr := openTemp(t)
	mustAdd(t, kr, "alice")
	if _, err := kr.Import("bob", make([]byte, 32), ""); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"alice", "bob"} {
		fi, err := os.Stat(kr.path(n))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", n, fi.Mode().Perm())
		}
	}
}

func TestFileFormat(t *testing.T) {
	kr := openTemp(t)
	k := mustAdd(t, kr, "alice")
	data, err := os.ReadFile(filepath.Join(kr.Dir(), "alice.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"name":             "alice",
		"type":             "ed25519",
		"address":          k.Address.String(),
		"public_key":       base64.StdEncoding.EncodeToString(k.PubKey),
		"private_key_seed": base64.StdEncoding.EncodeToString(k.PrivateKey().Seed()),
		"x25519_identity":  k.Identity().String(),
	}
	if len(m) != len(want) {
		t.Errorf("file has %d fields, want %d: %s", len(m), len(want), data)
	}
	for f, v := range want {
		if m[f] != v {
			t.Errorf("field %q = %q, want %q", f, m[f], v)
		}
	}
}

func TestImportDeterministic(t *testing.T) {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i)
	}
	const (
		wantAddr      = "gpu12er44f65vdr5cq59mawm7272ku76v5f4cu0ltr"
		identity      = "AGE-SECRET-KEY-1UPP4VDUYHAKZ9F3R75SU8HENHL9G8Q4M77NXFM4YD838SUG30HMSYCSKZQ"
		wantRecipient = "age1mrsvucv4g0ddu5wl5mpe9v53f9j4gf7ypgfymntvlg7jefgdz93qwhc9xd"
	)
	tests := []struct {
		name     string
		identity string
	}{
		{"given identity", identity},
		{"given identity with whitespace", "  " + identity + "\n"},
		{"generated identity", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kr := openTemp(t)
			k, err := kr.Import("det", seed, tt.identity)
			if err != nil {
				t.Fatal(err)
			}
			if k.Address.String() != wantAddr {
				t.Errorf("address = %s, want %s", k.Address, wantAddr)
			}
			if !bytes.Equal(k.PrivateKey().Seed(), seed) {
				t.Error("seed not preserved")
			}
			if tt.identity != "" && k.Recipient() != wantRecipient {
				t.Errorf("recipient = %s, want %s", k.Recipient(), wantRecipient)
			}
			if tt.identity == "" && !strings.HasPrefix(k.Recipient(), "age1") {
				t.Errorf("recipient = %s, want a generated age1… key", k.Recipient())
			}
			loaded, err := kr.Get("det")
			if err != nil {
				t.Fatal(err)
			}
			sameKey(t, loaded, k)
		})
	}
}

func TestImportInvalid(t *testing.T) {
	kr := openTemp(t)
	tests := []struct {
		name     string
		seed     []byte
		identity string
		want     string
	}{
		{"short seed", make([]byte, 31), "", "31 bytes"},
		{"long seed", make([]byte, 64), "", "64 bytes"},
		{"nil seed", nil, "", "0 bytes"},
		{"bad identity", make([]byte, 32), "AGE-SECRET-KEY-1XYZ", "identity"},
		{"recipient instead of identity", make([]byte, 32), "age1mrsvucv4g0ddu5wl5mpe9v53f9j4gf7ypgfymntvlg7jefgdz93qwhc9xd", "identity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := kr.Import("x", tt.seed, tt.identity)
			if err == nil {
				t.Fatal("Import succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
		})
	}
	if _, err := kr.Get("x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("failed Import left a key behind: %v", err)
	}
}

func FuzzLoadKeyFile(f *testing.F) {
	kr, err := Open(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	k, err := kr.Add("seed-key")
	if err != nil {
		f.Fatal(err)
	}
	good, err := encodeKeyFile(k, nil, 0)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	sealed, err := encodeKeyFile(k, []byte("pw"), 10)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sealed)
	f.Add(good[:len(good)/2])
	f.Add([]byte("{}"))
	f.Add([]byte(""))
	f.Add([]byte(`{"name":"a","type":"ed25519","address":"gpu1","public_key":"","private_key_seed":"AAAA","x25519_identity":""}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		key, err := decodeKeyFile(data)
		if err != nil {
			if key != nil {
				t.Fatal("returned a key along with an error")
			}
			return
		}
		// An accepted key must be self-consistent.
		if err := ValidateName(key.Name); err != nil {
			t.Fatalf("accepted invalid name: %v", err)
		}
		if key.locked() {
			if key.Address != address.FromPubKey(key.PubKey) || !strings.HasPrefix(key.Recipient(), "age1") {
				t.Fatal("locked key: address or recipient inconsistent")
			}
			if err := key.unlock([]byte("pw")); err != nil {
				if !key.locked() {
					t.Fatal("a failed unlock left the key unlocked")
				}
				return
			}
		}
		priv := key.PrivateKey()
		if len(priv) != ed25519.PrivateKeySize {
			t.Fatalf("private key is %d bytes", len(priv))
		}
		if !bytes.Equal(priv.Public().(ed25519.PublicKey), key.PubKey) {
			t.Fatal("public key does not match private key")
		}
		if key.Address != address.FromPubKey(key.PubKey) {
			t.Fatal("address does not match public key")
		}
		if !ed25519.Verify(key.PubKey, data, key.Sign(data)) {
			t.Fatal("signature does not verify")
		}
		if key.Identity() == nil || !strings.HasPrefix(key.Recipient(), "age1") {
			t.Fatal("bad identity")
		}
		// Re-encoding and decoding gives the same key.
		again, err := encodeKeyFile(key, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		key2, err := decodeKeyFile(again)
		if err != nil {
			t.Fatalf("re-encoded key does not decode: %v", err)
		}
		if key2.Name != key.Name || key2.Address != key.Address || !bytes.Equal(key2.PrivateKey(), priv) ||
			key2.Identity().String() != key.Identity().String() {
			t.Fatal("re-encoded key differs")
		}
	})
}
