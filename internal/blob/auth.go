package blob

import (
	"crypto/ed25519"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/gpunet/gpunet/internal/address"
)

// errUnauthorized is why an upload without a valid token or ticket is
// refused (401).
var errUnauthorized = errors.New("unauthorized")

// errAccountRefused is why a valid ticket of an account the node does not
// let upload is refused (403).
var errAccountRefused = errors.New("account may not store blobs")

// authorize checks r's Authorization header. It returns the account to
// charge (charged false for the node's token, or when the gateway has no
// Auth) and, when the ticket binds the content, the hash the body must
// have.
func (h *handler) authorize(r *http.Request) (acct address.Address, charged bool, bound *Hash, err error) {
	if h.auth == nil {
		return acct, false, nil, nil
	}
	scheme, rest, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	switch {
	case strings.EqualFold(scheme, "Bearer") && h.auth.Token != "":
		if subtle.ConstantTimeCompare([]byte(strings.TrimSpace(rest)), []byte(h.auth.Token)) != 1 {
			return acct, false, nil, fmt.Errorf("%w: wrong API token", errUnauthorized)
		}
		return acct, false, nil, nil
	case strings.EqualFold(scheme, TicketScheme):
		t, err := ParseTicket(rest)
		if err != nil {
			return acct, false, nil, err
		}
		now := h.auth.Now()
		if err := t.check(r.Method, r.URL.Path, r.ContentLength, now); err != nil {
			return acct, false, nil, err
		}
		if h.auth.Account != nil {
			if err := h.auth.Account(t.Account); err != nil {
				return acct, false, nil, fmt.Errorf("%w: account %s: %w", errAccountRefused, t.Account, err)
			}
		}
		if err := h.used.use(t, now); err != nil {
			return acct, false, nil, err
		}
		if !t.Hash.IsZero() {
			bound = &t.Hash
		}
		return t.Account, true, bound, nil
	}
	return acct, false, nil, fmt.Errorf("%w: uploads to this gateway need \"Authorization: %s …\", an upload ticket signed by the key of an account the chain knows "+
		"(gpunet clients sign one for each upload), or \"Authorization: Bearer TOKEN\" with the node's api_token", errUnauthorized, TicketScheme)
}

// quotaReader charges the bytes of an upload to its account as they
// arrive, failing with ErrQuota as soon as they pass the quota, so that a
// chunked upload is cut off there rather than at its end.
type quotaReader struct {
	r     io.Reader
	s     *Store
	acct  address.Address
	quota Quota
	n     int64
}

func (q *quotaReader) Read(p []byte) (int, error) {
	n, err := q.r.Read(p)
	if n > 0 {
		if cerr := q.s.charge(q.acct, int64(n), q.quota); cerr != nil {
			return 0, cerr
		}
		q.n += int64(n)
	}
	return n, err
}

// release gives back what the upload charged while in progress (once it
// is stored, its ownership record counts it instead).
func (q *quotaReader) release() { q.s.uncharge(q.acct, q.n); q.n = 0 }

// Signer signs upload tickets; *keys.Key is one.
type Signer interface {
	PrivateKey() ed25519.PrivateKey
}
