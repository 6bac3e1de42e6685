package blob

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpunet/gpunet/internal/address"
)

// Retention: a node keeps a finished job's blobs for a retention period
// (its blob_retention), and a job's outputs only until their owner has
// fetched them and a short grace has passed. The owner says it fetched
// them with a request signed by its key; the store remembers when, as a
// file
//
//	<dir>/fetched/<64 hex>   whose modification time is when the owner fetched it
//
// and the node's sweeper (internal/daemon) decides what to delete.

func (s *Store) fetchedDir() string { return filepath.Join(s.dir, "fetched") }

// MarkFetched records that h's owner fetched it now.
func (s *Store) MarkFetched(h Hash) error {
	if err := os.MkdirAll(s.fetchedDir(), 0o700); err != nil {
		return storageError("recording a fetch", err)
	}
	p := filepath.Join(s.fetchedDir(), h.Hex())
	if _, err := os.Stat(p); err == nil {
		return nil // the first fetch starts the grace period
	}
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		return storageError("recording a fetch", err)
	}
	return nil
}

// FetchedAt returns when h's owner first said it fetched h.
func (s *Store) FetchedAt(h Hash) (time.Time, bool) {
	info, err := os.Stat(filepath.Join(s.fetchedDir(), h.Hex()))
	if err != nil {
		return time.Time{}, false
	}
	return info.ModTime(), true
}

func (s *Store) unmarkFetched(h Hash) {
	err := os.Remove(filepath.Join(s.fetchedDir(), h.Hex()))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return
	}
}

// VerifySignedRequest checks r's "Authorization: Gpunet-Ticket …" header,
// signed for r's method, path and an empty body (size 0), at now, and
// returns the account that signed it. A node uses it for small requests an
// account makes about its own data (the owner saying it fetched a job's
// outputs); replaying one within its expiry repeats the same statement, so
// tickets are not remembered here.
func VerifySignedRequest(r *http.Request, now time.Time) (address.Address, error) {
	scheme, rest, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !strings.EqualFold(scheme, TicketScheme) {
		return address.Address{}, fmt.Errorf("%w: want \"Authorization: %s …\" signed by the account's key", errUnauthorized, TicketScheme)
	}
	t, err := ParseTicket(rest)
	if err != nil {
		return address.Address{}, err
	}
	if t.Size != 0 {
		return address.Address{}, fmt.Errorf("%w: sign this request for an empty body (size 0)", errBadTicket)
	}
	if err := t.check(r.Method, r.URL.Path, 0, now); err != nil {
		return address.Address{}, err
	}
	return t.Account, nil
}

// SignRequest returns the Authorization header value for a bodiless
// request signed by s (what VerifySignedRequest checks).
func SignRequest(s Signer, method, path string) string {
	return SignTicket(s.PrivateKey(), method, path, 0, Hash{}, time.Now().Add(ticketLifetime))
}
