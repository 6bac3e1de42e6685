package ledger

import (
	"encoding/hex"
	"fmt"
)

// Hash, the 32-byte digest the ledger's records and messages carry.

// Hash is a 32-byte digest, hex in JSON.
type Hash [32]byte

// MarshalText implements encoding.TextMarshaler.
func (h Hash) MarshalText() ([]byte, error) { return []byte(hex.EncodeToString(h[:])), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (h *Hash) UnmarshalText(b []byte) error {
	if len(b) != 64 {
		return fmt.Errorf("hash must be 64 hex characters, got %d", len(b))
	}
	_, err := hex.Decode(h[:], b)
	return err
}
