// Package blob is the blob gateway every node runs: content-addressed
// storage of opaque byte streams (in practice, age ciphertext) named by
// their SHA-256, kept on disk by a Store, served over HTTP by the handler
// from NewHandler, and fetched or uploaded by a Client.
//
// A blob's name is a promise about its bytes, so both ends check it: the
// store hashes every upload before it becomes visible, the handler re-hashes
// what it sends and cuts the response short rather than complete a corrupt
// one, and the client hashes what it receives.
package blob

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Hash is a blob's SHA-256; its text form is "sha256:<64 lowercase hex>".
// The zero Hash names no blob anyone can produce; it is never a valid
// reference.
type Hash [32]byte

const hashPrefix = "sha256:"

// ErrBadHash is wrapped by ParseHash's errors.
var ErrBadHash = errors.New("invalid blob hash")

// ParseHash parses the text form "sha256:<64 lowercase hex>". It accepts
// exactly what String produces, so a blob has one name.
func ParseHash(s string) (Hash, error) {
	var h Hash
	hexPart, ok := strings.CutPrefix(s, hashPrefix)
	if !ok {
		return h, fmt.Errorf("%w %q: want \"sha256:\" followed by 64 lowercase hex digits", ErrBadHash, truncate(s))
	}
	if len(hexPart) != 2*len(h) {
		return h, fmt.Errorf("%w %q: want 64 hex digits after \"sha256:\", got %d", ErrBadHash, truncate(s), len(hexPart))
	}
	for i := 0; i < len(hexPart); i++ {
		c := hexPart[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return h, fmt.Errorf("%w %q: character %d (%q) is not a lowercase hex digit", ErrBadHash, truncate(s), len(hashPrefix)+i+1, c)
		}
	}
	if _, err := hex.Decode(h[:], []byte(hexPart)); err != nil {
		return h, fmt.Errorf("%w %q: %v", ErrBadHash, truncate(s), err)
	}
	return h, nil
}

// String returns "sha256:" and the hash in lowercase hex.
func (h Hash) String() string { return hashPrefix + hex.EncodeToString(h[:]) }

// Hex returns the hash in lowercase hex, without the "sha256:" prefix.
func (h Hash) Hex() string { return hex.EncodeToString(h[:]) }

// IsZero reports whether h is the zero Hash, which names no blob.
func (h Hash) IsZero() bool { return h == Hash{} }

// MarshalText implements encoding.TextMarshaler (so JSON carries the text form).
func (h Hash) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseHash's rules.
func (h *Hash) UnmarshalText(b []byte) error {
	p, err := ParseHash(string(b))
	if err != nil {
		return err
	}
	*h = p
	return nil
}

// Sum returns the Hash of b.
func Sum(b []byte) Hash { return sha256.Sum256(b) }

// truncate keeps error messages about hostile input short.
func truncate(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
