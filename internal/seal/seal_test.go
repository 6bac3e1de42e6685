package seal

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"filippo.io/age"
)

func mustKey(t testing.TB) *age.X25519Identity {
	t.Helper()
	k, err := NewJobKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestWrapUnwrapKey(t *testing.T) {
	job := mustKey(t)
	p1, p2, outsider := mustKey(t), mustKey(t), mustKey(t)
	wrapped, err := WrapKey(job, p1.Recipient().String(), p2.Recipient().String())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(wrapped, []byte(job.String())) {
		t.Fatal("wrapped key contains the job key in the clear")
	}
	for i, p := range []*age.X25519Identity{p1, p2} {
		got, err := UnwrapKey(wrapped, p)
		if err != nil {
			t.Fatalf("provider %d: %v", i+1, err)
		}
		if got.String() != job.String() {
			t.Errorf("provider %d unwrapped a different key", i+1)
		}
	}
	if _, err := UnwrapKey(wrapped, outsider); !errors.Is(err, ErrNotRecipient) {
		t.Errorf("outsider UnwrapKey = %v; want ErrNotRecipient", err)
	}
	if _, err := UnwrapKey(wrapped[:len(wrapped)-1], p1); err == nil {
		t.Error("UnwrapKey of a truncated grant succeeded")
	}
}

func TestWrapKeyValidatesRecipients(t *testing.T) {
	job := mustKey(t)
	good := mustKey(t).Recipient().String()
	tests := []struct {
		name       string
		rcpts      []string
		want       string
		mustNotSay string
	}{
		{"none", nil, "at least one provider", ""},
		{"empty", []string{""}, "empty recipient", ""},
		{"garbage second", []string{good, "age1notakey"}, `provider recipient 2: "age1notakey" is not an age X25519 public key`, ""},
		{"ssh key", []string{"ssh-ed25519 AAAA"}, "not an age X25519 public key", ""},
		{"secret key", []string{job.String()}, "secret key", job.String()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := WrapKey(job, tt.rcpts...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("WrapKey = %v; want an error containing %q", err, tt.want)
			}
			if tt.mustNotSay != "" && strings.Contains(err.Error(), tt.mustNotSay) {
				t.Errorf("error %q leaks the secret key", err)
			}
		})
	}
	if _, err := WrapKey(nil, good); err == nil {
		t.Error("WrapKey(nil) succeeded")
	}
}

func TestEncryptDecryptStream(t *testing.T) {
	job := mustKey(t)
	const size = 5<<20 + 12345 // several age chunks and a partial one
	plain := make([]byte, size)
	rand.NewChaCha8([32]byte{1}).Read(plain)

	// Encrypt through a pipe, so nothing requires the whole stream at once.
	pr, pw := io.Pipe()
	go func() {
		w, err := Encrypt(pw, job.Recipient())
		if err != nil {
			pw.CloseWithError(err)
			return
		}
		for b := plain; len(b) > 0; b = b[min(len(b), 100_000):] {
			if _, err := w.Write(b[:min(len(b), 100_000)]); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(w.Close())
	}()
	var ct bytes.Buffer
	if _, err := io.Copy(&ct, pr); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(ct.Bytes(), plain[:64]) {
		t.Fatal("ciphertext contains plaintext")
	}

	r, err := Decrypt(bytes.NewReader(ct.Bytes()), job)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if n, err := io.Copy(h, r); err != nil || n != size {
		t.Fatalf("decrypted %d bytes, %v; want %d", n, err, size)
	}
	if got, want := h.Sum(nil), sha256.Sum256(plain); !bytes.Equal(got, want[:]) {
		t.Fatal("decrypted bytes differ from the plaintext")
	}

	if _, err := Decrypt(bytes.NewReader(ct.Bytes()), mustKey(t)); !errors.Is(err, ErrNotRecipient) {
		t.Errorf("Decrypt with another key = %v; want ErrNotRecipient", err)
	}
	tampered := bytes.Clone(ct.Bytes())
	tampered[len(tampered)/2] ^= 1
	if err := readAll(tampered, job); err == nil {
		t.Error("reading a tampered stream succeeded")
	}
	// Cut at a chunk boundary (header + 64 KiB + 16-byte tag per chunk):
	// only the missing "last chunk" flag gives it away.
	hdrLen := len(ct.Bytes()) - (size/(64<<10))*(64<<10+16) - (size%(64<<10) + 16)
	if err := readAll(ct.Bytes()[:hdrLen+2*(64<<10+16)], job); err == nil {
		t.Error("reading a stream truncated at a chunk boundary succeeded")
	}
	if _, err := Encrypt(io.Discard); err == nil {
		t.Error("Encrypt with no recipients succeeded")
	}
}

func readAll(ct []byte, id age.Identity) error {
	r, err := Decrypt(bytes.NewReader(ct), id)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, r)
	return err
}
