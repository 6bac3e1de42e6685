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

// errAllowanceUnknown is why an upload is refused when the gateway could
// not tell what its account may keep (503: the node's ledger could not be
// read).
var errAllowanceUnknown = errors.New("cannot tell what the account may store")

// An Allowance is how many bytes an account may keep in a gateway that no
// job references (Auth.Allowance), and why.
type Allowance struct {
	Bytes int64
	// Basis says what Bytes is derived from, for the message of a
	// refusal ("it holds 5 usync (…); this node asks 1 SYNC per GiB").
	Basis string
}

// uploader is who an upload is charged to, under what quota.
type uploader struct {
	acct address.Address
	// charged is false for the node's token, or when the gateway has no
	// Auth: the upload counts against no quota.
	charged bool
	// quota is the gateway's, with the account's allowance applied;
	// basis says why.
	quota Quota
	basis string
	// bound, when the ticket binds the content, is the hash the body
	// must have.
	bound *Hash
}

// authorize checks r's Authorization header and says who the upload is
// charged to.
func (h *handler) authorize(r *http.Request) (uploader, error) {
	if h.auth == nil {
		return uploader{}, nil
	}
	scheme, rest, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	switch {
	case strings.EqualFold(scheme, "Bearer") && h.auth.Token != "":
		if subtle.ConstantTimeCompare([]byte(strings.TrimSpace(rest)), []byte(h.auth.Token)) != 1 {
			return uploader{}, fmt.Errorf("%w: wrong API token", errUnauthorized)
		}
		return uploader{}, nil
	case strings.EqualFold(scheme, TicketScheme):
		t, err := ParseTicket(rest)
		if err != nil {
			return uploader{}, err
		}
		now := h.auth.Now()
		if err := t.check(r.Method, r.URL.Path, r.ContentLength, now); err != nil {
			return uploader{}, err
		}
		up := uploader{acct: t.Account, charged: true, quota: h.auth.Quota}
		if h.auth.Allowance != nil {
			al, err := h.auth.Allowance(t.Account)
			if err != nil {
				return uploader{}, fmt.Errorf("%w %s: %w", errAllowanceUnknown, t.Account, err)
			}
			if up.quota.Bytes < 0 || al.Bytes < up.quota.Bytes {
				up.quota.Bytes = max(al.Bytes, 0)
			}
			up.basis = al.Basis
		}
		if err := h.used.use(t, now); err != nil {
			return uploader{}, err
		}
		if !t.Hash.IsZero() {
			up.bound = &t.Hash
		}
		return up, nil
	}
	return uploader{}, fmt.Errorf("%w: uploads to this gateway need \"Authorization: %s …\", an upload ticket signed by the key of an account that holds SYNC "+
		"(gpunet clients sign one for each upload), or \"Authorization: Bearer TOKEN\" with the node's api_token", errUnauthorized, TicketScheme)
}

// quotaReader charges the bytes of an upload to its account as they
// arrive, failing with ErrQuota as soon as they pass the quota, so that a
// chunked upload is cut off there rather than at its end.
type quotaReader struct {
	r  io.Reader
	s  *Store
	up uploader
	n  int64
}

func (q *quotaReader) Read(p []byte) (int, error) {
	n, err := q.r.Read(p)
	if n > 0 {
		if cerr := q.s.charge(q.up.acct, int64(n), q.up.quota, q.up.basis); cerr != nil {
			return 0, cerr
		}
		q.n += int64(n)
	}
	return n, err
}

// release gives back what the upload charged while in progress (once it
// is stored, its ownership record counts it instead).
func (q *quotaReader) release() { q.s.uncharge(q.up.acct, q.n); q.n = 0 }

// Signer signs upload tickets; *keys.Key is one.
type Signer interface {
	PrivateKey() ed25519.PrivateKey
}
