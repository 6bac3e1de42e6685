package oci

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/gpunet/gpunet/internal/egress"
)

// An image's reference is written by whoever submits the job or service,
// and the provider pulls it: the registry it names may be on the
// provider's own network (RegistryOptions.Egress refuses that), and what
// the registry answers is the registry's to choose. A job's result reason
// and a replica's release reason go on the public ledger, so a failed pull
// says there only the reference (in the spec already) and one fixed cause
// (PullCause): never the registry's words, the addresses a name resolved
// to, or anything else the pull learned; those are in PullError.Err, for
// the provider's log.
//
// A refusal is told apart ("refused, not a public address") only when the
// reference itself names the refused address (127.0.0.1:5000/…,
// localhost:5000/…): its owner knew that already. A name that resolved to
// a private address, or a redirect to one, is "could not be reached",
// like a server that is down, so the ledger does not say what a name
// resolves to inside a provider's network.

// PullCause is why an image could not be pulled, in fixed words.
type PullCause string

// The causes of a failed pull.
const (
	PullRefused        PullCause = "refused, not a public address"
	PullNotFound       PullCause = "not found"
	PullUnauthorized   PullCause = "unauthorized"
	PullTooLarge       PullCause = "too large"
	PullDigestMismatch PullCause = "digest mismatch"
	PullWrongPlatform  PullCause = "not for this platform"
	PullInvalid        PullCause = "not a valid image"
	// PullUnreachable is everything else: no connection, a name that
	// does not resolve, a refused name or redirect, TLS, a timeout, a
	// broken transfer, any other status.
	PullUnreachable PullCause = "could not be reached"
)

// PullError is an image that could not be pulled. Its text (Error) is fit
// for the ledger: the reference and the cause, nothing else. Err says what
// happened, the registry's answer included: for the provider's log only
// (LogValue shows it).
type PullError struct {
	Ref   string
	Cause PullCause
	Err   error
}

func (e *PullError) Error() string {
	return "image " + e.Ref + " could not be pulled: " + string(e.Cause)
}

func (e *PullError) Unwrap() error { return e.Err }

// LogValue implements slog.LogValuer: logged, a PullError shows what
// happened too.
func (e *PullError) LogValue() slog.Value {
	if e.Err == nil {
		return slog.StringValue(e.Error())
	}
	return slog.StringValue(e.Error() + ": " + e.Err.Error())
}

// registryCause classifies err, from talking to the registry of a
// reference whose registry is host (host[:port]). ok is false when err
// shows no sign of the network (no status, no connection error): the
// caller then knows better what it means.
func registryCause(host string, err error) (cause PullCause, ok bool) {
	var re *egress.RefusedError
	if errors.As(err, &re) {
		if namesAddr(host, re.Addr) {
			return PullRefused, true
		}
		return PullUnreachable, true
	}
	var te *transport.Error
	if errors.As(err, &te) {
		for _, d := range te.Errors {
			switch d.Code {
			case transport.ManifestUnknownErrorCode, transport.BlobUnknownErrorCode, transport.NameUnknownErrorCode:
				return PullNotFound, true
			case transport.UnauthorizedErrorCode, transport.DeniedErrorCode:
				return PullUnauthorized, true
			}
		}
		switch te.StatusCode {
		case http.StatusNotFound:
			return PullNotFound, true
		case http.StatusUnauthorized, http.StatusForbidden:
			return PullUnauthorized, true
		}
		return PullUnreachable, true
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, egress.ErrRefused) {
		return PullUnreachable, true
	}
	return PullUnreachable, false
}

// namesAddr reports whether the registry host (host[:port]) is ip itself,
// written as an address or as localhost (a loopback address).
func namesAddr(host string, ip netip.Addr) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.Trim(h, "[]")
	ip = ip.WithZone("").Unmap()
	if strings.EqualFold(h, "localhost") {
		return ip.IsLoopback()
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.WithZone("").Unmap() == ip
}
