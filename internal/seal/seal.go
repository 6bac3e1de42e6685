// Package seal keeps job data end-to-end encrypted, so that blob gateways
// and validators only ever hold ciphertext.
//
// Each job gets a fresh age X25519 identity, the job key (NewJobKey). The
// consumer packs the job's inputs into a deterministic tar stream
// (PackFiles), encrypts it to the job key's recipient (Encrypt) and uploads
// the ciphertext. Once providers are assigned, the consumer grants them the
// job key by wrapping it to their public keys (WrapKey); each provider
// unwraps it with its own identity (UnwrapKey), decrypts the inputs
// (Decrypt) and unpacks them under limits (UnpackDir). Outputs travel the
// other way, packed with PackDir and encrypted to the consumer.
//
// Packing is deterministic so that replicas with equal outputs produce
// equal bytes: the plaintext output manifest hash is taken over PackDir's
// stream.
package seal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"filippo.io/age"
)

// ErrNotRecipient is returned (wrapped) when data was not encrypted to any
// of the identities offered to decrypt it.
var ErrNotRecipient = errors.New("not encrypted to this key")

// NewJobKey returns a fresh per-job X25519 identity. Job inputs are
// encrypted to its Recipient, and the identity itself is granted to each
// assigned provider with WrapKey.
func NewJobKey() (*age.X25519Identity, error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return nil, fmt.Errorf("seal: generating job key: %w", err)
	}
	return id, nil
}

// maxWrappedKey bounds what UnwrapKey reads; an identity string is 74 bytes.
const maxWrappedKey = 1 << 10

// WrapKey encrypts jobKey to each of providerRecipients (age X25519
// recipients, "age1…"), so that any one of them, and nobody else, can
// recover it with UnwrapKey. Recipients are checked first; an error names
// the one that is wrong.
func WrapKey(jobKey *age.X25519Identity, providerRecipients ...string) ([]byte, error) {
	if jobKey == nil {
		return nil, errors.New("seal: wrap key: no job key")
	}
	if len(providerRecipients) == 0 {
		return nil, errors.New("seal: wrap key: no provider recipients; the key must be granted to at least one provider")
	}
	rcpts := make([]age.Recipient, 0, len(providerRecipients))
	for i, s := range providerRecipients {
		r, err := ParseRecipient(s)
		if err != nil {
			return nil, fmt.Errorf("seal: wrap key: provider recipient %d: %w", i+1, err)
		}
		rcpts = append(rcpts, r)
	}
	var buf bytes.Buffer
	w, err := age.Encrypt(&buf, rcpts...)
	if err != nil {
		return nil, fmt.Errorf("seal: wrap key: %w", err)
	}
	if _, err := io.WriteString(w, jobKey.String()); err != nil {
		return nil, fmt.Errorf("seal: wrap key: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("seal: wrap key: %w", err)
	}
	return buf.Bytes(), nil
}

// ParseRecipient parses an age X25519 recipient ("age1…" followed by its
// key), with an error that says what a recipient looks like.
func ParseRecipient(s string) (*age.X25519Recipient, error) {
	if s == "" {
		return nil, errors.New(`empty recipient; want an age X25519 public key ("age1…")`)
	}
	if strings.HasPrefix(s, "AGE-SECRET-KEY-") {
		// Never echo a secret key back into an error or a log.
		return nil, errors.New(`got a secret key (AGE-SECRET-KEY-…) where a recipient public key ("age1…") belongs`)
	}
	r, err := age.ParseX25519Recipient(s)
	if err != nil {
		return nil, fmt.Errorf(`%q is not an age X25519 public key ("age1…"): %w`, s, err)
	}
	return r, nil
}

// UnwrapKey recovers a job key wrapped by WrapKey, using the provider's
// own identity. It fails with ErrNotRecipient if the key was not wrapped
// to id.
func UnwrapKey(wrapped []byte, id *age.X25519Identity) (*age.X25519Identity, error) {
	if id == nil {
		return nil, errors.New("seal: unwrap key: no identity")
	}
	r, err := decrypt(bytes.NewReader(wrapped), id)
	if err != nil {
		return nil, fmt.Errorf("seal: unwrap key: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(r, maxWrappedKey+1))
	if err != nil {
		return nil, fmt.Errorf("seal: unwrap key: %w", err)
	}
	if len(b) > maxWrappedKey {
		return nil, errors.New("seal: unwrap key: wrapped content is too long to be a key")
	}
	key, err := age.ParseX25519Identity(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("seal: unwrap key: wrapped content is not an X25519 identity: %w", err)
	}
	return key, nil
}

// Encrypt returns a writer that encrypts what is written to it to all of
// recipients and writes the ciphertext to dst as it goes, in 64 KiB
// chunks. The caller must Close it to write the final chunk; dst is not
// closed.
func Encrypt(dst io.Writer, recipients ...age.Recipient) (io.WriteCloser, error) {
	if len(recipients) == 0 {
		return nil, errors.New("seal: encrypt: no recipients")
	}
	w, err := age.Encrypt(dst, recipients...)
	if err != nil {
		return nil, fmt.Errorf("seal: encrypt: %w", err)
	}
	return w, nil
}

// Decrypt returns a reader of the plaintext of src, decrypting as it is
// read. The header is checked at once (ErrNotRecipient if none of ids
// matches); every chunk is authenticated before any of it is returned,
// and a truncated or altered stream makes Read fail, at the latest when
// the end is reached. So a caller must read to io.EOF before trusting
// that it got everything.
func Decrypt(src io.Reader, ids ...age.Identity) (io.Reader, error) {
	if len(ids) == 0 {
		return nil, errors.New("seal: decrypt: no identities")
	}
	r, err := decrypt(src, ids...)
	if err != nil {
		return nil, fmt.Errorf("seal: decrypt: %w", err)
	}
	return r, nil
}

func decrypt(src io.Reader, ids ...age.Identity) (io.Reader, error) {
	r, err := age.Decrypt(src, ids...)
	var nomatch *age.NoIdentityMatchError
	if errors.As(err, &nomatch) {
		return nil, fmt.Errorf("%w: %w", ErrNotRecipient, err)
	}
	return r, err
}
