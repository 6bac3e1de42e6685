package blob

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/address"
)

// An upload ticket lets an account store one blob: the account's key signs
// the method, the path, the body's size (-1 when it streams with no
// declared length), the content hash when known (zero otherwise), an
// expiry and a random nonce. It travels in the Authorization header:
//
//	Authorization: Gpunet-Ticket v1.<pubkey>.<size>.<hash hex or ->.<expiry unix>.<nonce>.<signature>
//
// with the public key, nonce and signature in unpadded base64url. The gateway
// checks the signature, that the ticket has not expired and does not run
// further than MaxTicketLifetime ahead, that the request matches what was
// signed, and that the ticket was not used before; then it charges the
// upload to the key's address.
const TicketScheme = "Gpunet-Ticket"

// MaxTicketLifetime is how far ahead of the gateway's clock a ticket's
// expiry may be. A short life bounds what a ticket seen by someone else
// is worth; the gateway remembers used tickets until they expire.
const MaxTicketLifetime = 15 * time.Minute

// ticketLifetime is how long the tickets a Client signs live.
const ticketLifetime = 5 * time.Minute

// Ticket is a parsed upload ticket.
type Ticket struct {
	PubKey  ed25519.PublicKey
	Size    int64 // -1: not declared
	Hash    Hash  // zero: not bound
	Expiry  int64 // unix seconds
	Nonce   []byte
	Sig     []byte
	Account address.Address
}

// TicketSignBytes is what an account signs to upload to path with method.
func TicketSignBytes(method, path string, size int64, h Hash, expiry int64, nonce []byte) []byte {
	b := []byte("gpunet/blob-ticket/v1\x00")
	b = append(b, method...)
	b = append(b, 0)
	b = append(b, path...)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(size))
	b = append(b, h[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(expiry))
	return append(b, nonce...)
}

// nonceLen is the length of a ticket's nonce: two uploads of the same
// size in the same second need different tickets.
const nonceLen = 12

// SignTicket returns the Authorization header value of a ticket signed by
// priv for an upload of size bytes (-1: undeclared) with content hash h
// (zero: not bound) to path, valid until expiry.
func SignTicket(priv ed25519.PrivateKey, method, path string, size int64, h Hash, expiry time.Time) string {
	exp := expiry.Unix()
	nonce := make([]byte, nonceLen)
	rand.Read(nonce)
	sig := ed25519.Sign(priv, TicketSignBytes(method, path, size, h, exp, nonce))
	hashPart := "-"
	if !h.IsZero() {
		hashPart = h.Hex()
	}
	b64 := base64.RawURLEncoding
	return fmt.Sprintf("%s v1.%s.%d.%s.%d.%s.%s", TicketScheme, b64.EncodeToString(priv.Public().(ed25519.PublicKey)),
		size, hashPart, exp, b64.EncodeToString(nonce), b64.EncodeToString(sig))
}

// errBadTicket marks every reason a ticket is refused.
var errBadTicket = errors.New("bad upload ticket")

// errTicketsFull is returned when the gateway cannot remember one more
// used ticket.
var errTicketsFull = errors.New("too many upload tickets")

// ParseTicket parses the part of the header after "Gpunet-Ticket ".
func ParseTicket(s string) (Ticket, error) {
	var t Ticket
	parts := strings.Split(strings.TrimSpace(s), ".")
	if len(parts) != 7 || parts[0] != "v1" {
		return t, fmt.Errorf("%w: want v1.<pubkey>.<size>.<hash or ->.<expiry>.<nonce>.<signature>", errBadTicket)
	}
	b64 := base64.RawURLEncoding
	pub, err := b64.DecodeString(parts[1])
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return t, fmt.Errorf("%w: public key: want %d bytes in base64url", errBadTicket, ed25519.PublicKeySize)
	}
	t.PubKey = pub
	if t.Size, err = strconv.ParseInt(parts[2], 10, 64); err != nil || t.Size < -1 {
		return t, fmt.Errorf("%w: size %q: want a byte count, or -1", errBadTicket, parts[2])
	}
	if parts[3] != "-" {
		b, err := hex.DecodeString(parts[3])
		if err != nil || len(b) != len(t.Hash) {
			return t, fmt.Errorf("%w: hash %q: want 64 hex digits, or -", errBadTicket, parts[3])
		}
		copy(t.Hash[:], b)
	}
	if t.Expiry, err = strconv.ParseInt(parts[4], 10, 64); err != nil {
		return t, fmt.Errorf("%w: expiry %q: want unix seconds", errBadTicket, parts[4])
	}
	if t.Nonce, err = b64.DecodeString(parts[5]); err != nil || len(t.Nonce) > 64 {
		return t, fmt.Errorf("%w: nonce: want at most 64 bytes in base64url", errBadTicket)
	}
	if t.Sig, err = b64.DecodeString(parts[6]); err != nil || len(t.Sig) != ed25519.SignatureSize {
		return t, fmt.Errorf("%w: signature: want %d bytes in base64url", errBadTicket, ed25519.SignatureSize)
	}
	t.Account = address.FromPubKey(t.PubKey)
	return t, nil
}

// check verifies t for a request with method, path and declared length
// (-1: none) at now.
func (t Ticket) check(method, path string, length int64, now time.Time) error {
	if !ed25519.Verify(t.PubKey, TicketSignBytes(method, path, t.Size, t.Hash, t.Expiry, t.Nonce), t.Sig) {
		return fmt.Errorf("%w: the signature does not match %s %s with this size, hash and expiry", errBadTicket, method, path)
	}
	exp := time.Unix(t.Expiry, 0)
	if now.After(exp) {
		return fmt.Errorf("%w: expired at %s (gateway time %s)", errBadTicket, exp.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if exp.Sub(now) > MaxTicketLifetime {
		return fmt.Errorf("%w: expires %s, more than %v ahead of the gateway's clock", errBadTicket, exp.UTC().Format(time.RFC3339), MaxTicketLifetime)
	}
	if t.Size >= 0 && t.Size != length {
		return fmt.Errorf("%w: signed for a body of %d bytes, the request declares %d (-1: none)", errBadTicket, t.Size, length)
	}
	return nil
}

// usedTickets remembers the signatures of tickets already used, until
// they expire, so that a ticket stores one blob.
type usedTickets struct {
	mu   sync.Mutex
	seen map[string]int64 // signature → expiry
	max  int
}

// use records t, failing if it was used before or too many live tickets
// are remembered.
func (u *usedTickets) use(t Ticket, now time.Time) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.seen == nil {
		u.seen = make(map[string]int64)
	}
	key := string(t.Sig)
	if _, ok := u.seen[key]; ok {
		return fmt.Errorf("%w: this ticket was already used; sign one for each upload", errBadTicket)
	}
	if len(u.seen) >= u.max {
		for k, exp := range u.seen {
			if exp < now.Unix() {
				delete(u.seen, k)
			}
		}
		if len(u.seen) >= u.max {
			return fmt.Errorf("%w: the gateway remembers %d unexpired tickets, its limit; retry in a few minutes", errTicketsFull, u.max)
		}
	}
	u.seen[key] = t.Expiry
	return nil
}
