package keys

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	"filippo.io/age/armor"
)

// openEncrypted opens a keyring in dir that encrypts with pass (a cheap
// scrypt work factor, for speed) and counts how often it is asked.
func openEncrypted(t *testing.T, dir, pass string, asked *int) *Keyring {
	t.Helper()
	kr, err := Open(dir, WithPassphrase(func(string, bool) ([]byte, error) {
		*asked++
		return []byte(pass), nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	kr.workFactor = 10
	return kr
}

// TestKeyFileNotPlaintext is the at-rest finding of issue 19: key files
// held the private key in the clear.
func TestKeyFileNotPlaintext(t *testing.T) {
	dir := t.TempDir()
	var asked int
	kr := openEncrypted(t, dir, "correct horse", &asked)
	k, err := kr.Add("carol")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "carol.json"))
	if err != nil {
		t.Fatal(err)
	}
	seed := b64.EncodeToString(k.PrivateKey().Seed())
	for _, secret := range []string{seed, k.Identity().String(), "private_key_seed", "AGE-SECRET-KEY-"} {
		if bytes.Contains(data, []byte(secret)) {
			t.Errorf("key file holds %q in the clear:\n%s", secret, data)
		}
	}
	if !bytes.Contains(data, []byte("BEGIN AGE ENCRYPTED FILE")) || !k.Encrypted() || !kr.Encrypts() {
		t.Errorf("key file is not an encrypted key:\n%s", data)
	}

	got, err := kr.Get("carol")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.PrivateKey(), k.PrivateKey()) || got.Identity().String() != k.Identity().String() || !got.Encrypted() {
		t.Error("decrypted key differs from the one created")
	}
	if !ed25519.Verify(k.PubKey, []byte("m"), got.Sign([]byte("m"))) {
		t.Error("decrypted key's signature does not verify")
	}
}

func TestEncryptedKeyPassphrases(t *testing.T) {
	dir := t.TempDir()
	var asked int
	k, err := openEncrypted(t, dir, "right", &asked).Add("carol")
	if err != nil {
		t.Fatal(err)
	}

	if _, err := openEncrypted(t, dir, "wrong", &asked).Get("carol"); !errors.Is(err, ErrWrongPassphrase) || !strings.Contains(err.Error(), "carol.json") {
		t.Errorf("wrong passphrase: %v, want ErrWrongPassphrase naming the file", err)
	}

	// Without WithPassphrase the environment supplies it.
	plain, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(PassphraseEnv, "")
	if _, err := plain.Get("carol"); !errors.Is(err, ErrNoPassphrase) || !strings.Contains(err.Error(), PassphraseEnv) {
		t.Errorf("no passphrase: %v, want ErrNoPassphrase naming %s", err, PassphraseEnv)
	}
	t.Setenv(PassphraseEnv, "right")
	if got, err := plain.Get("carol"); err != nil || got.Address != k.Address {
		t.Errorf("passphrase from the environment: %v", err)
	}

	// Lookup and List never ask; what they return is locked.
	asked = 0
	kr := openEncrypted(t, dir, "right", &asked)
	pub, err := kr.Lookup("carol")
	if err != nil {
		t.Fatal(err)
	}
	list, err := kr.List()
	if err != nil || len(list) != 1 {
		t.Fatalf("List: %v %v", list, err)
	}
	if asked != 0 {
		t.Errorf("Lookup and List asked for a passphrase %d times", asked)
	}
	for _, l := range []*Key{pub, list[0]} {
		if l.Address != k.Address || l.Recipient() != k.Recipient() || !l.Encrypted() {
			t.Errorf("looked-up key %+v, want the public half of %+v", l, k)
		}
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "Keyring.Get") {
			t.Errorf("Sign on a locked key: recovered %v, want a panic saying to use Keyring.Get", r)
		}
	}()
	pub.Sign([]byte("m"))
}

func TestAddUnencrypted(t *testing.T) {
	dir := t.TempDir()
	var asked int
	k, err := openEncrypted(t, dir, "pw", &asked).AddUnencrypted("alice")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "alice.json"))
	if asked != 0 || k.Encrypted() || !bytes.Contains(data, []byte("private_key_seed")) {
		t.Errorf("AddUnencrypted asked %d times, encrypted %v:\n%s", asked, k.Encrypted(), data)
	}
}

// TestEncryptedSecretSwapped: an encrypted secret moved into another key's
// file is refused, not taken for that key.
func TestEncryptedSecretSwapped(t *testing.T) {
	dir := t.TempDir()
	var asked int
	kr := openEncrypted(t, dir, "pw", &asked)
	for _, n := range []string{"a", "b"} {
		if _, err := kr.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	read := func(n string) map[string]string {
		var m map[string]string
		data, _ := os.ReadFile(filepath.Join(dir, n+".json"))
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	a, b := read("a"), read("b")
	a["encrypted_secret"] = b["encrypted_secret"]
	data, _ := json.Marshal(a)
	if err := os.WriteFile(filepath.Join(dir, "a.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Get("a"); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("swapped secret: %v, want a mismatch error", err)
	}
}

// TestInsecureTestKeyring: with InsecureTestKeyringEnv=1 new encrypted keys
// get the test work factor (a decrypt that allows no more than it
// succeeds) and still need their passphrase; any other value is refused.
func TestInsecureTestKeyring(t *testing.T) {
	t.Setenv(InsecureTestKeyringEnv, "1")
	dir := t.TempDir()
	kr, err := Open(dir, WithPassphrase(func(string, bool) ([]byte, error) { return []byte("test pass"), nil }))
	if err != nil {
		t.Fatal(err)
	}
	k, err := kr.Add("carol")
	if err != nil {
		t.Fatal(err)
	}
	if !k.Encrypted() {
		t.Fatal("key not encrypted under the test keyring")
	}
	id, err := age.NewScryptIdentity("test pass")
	if err != nil {
		t.Fatal(err)
	}
	id.SetMaxWorkFactor(TestWorkFactor)
	if _, err := age.Decrypt(armor.NewReader(strings.NewReader(k.sealed)), id); err != nil {
		t.Errorf("decrypt allowing work factor %d: %v", TestWorkFactor, err)
	}
	t.Setenv(PassphraseEnv, "wrong")
	plain, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Get("carol"); !errors.Is(err, ErrWrongPassphrase) {
		t.Errorf("wrong passphrase: %v, want ErrWrongPassphrase", err)
	}

	t.Setenv(InsecureTestKeyringEnv, "yes")
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), InsecureTestKeyringEnv) {
		t.Errorf("Open with %s=yes: %v, want an error naming it", InsecureTestKeyringEnv, err)
	}
}
