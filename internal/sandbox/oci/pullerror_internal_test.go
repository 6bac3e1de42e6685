package oci

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/gpunet/gpunet/internal/egress"
)

// TestRegistryCause: how a registry's failure is classified, by the
// registry host the reference names.
func TestRegistryCause(t *testing.T) {
	refused := func(ip string) error {
		return &url.Error{Op: "Get", URL: "https://x/v2/", Err: &net.OpError{Op: "dial", Net: "tcp",
			Err: &egress.RefusedError{Addr: netip.MustParseAddr(ip), Why: egress.Loopback}}}
	}
	status := func(code int, codes ...transport.ErrorCode) error {
		e := &transport.Error{StatusCode: code}
		for _, c := range codes {
			e.Errors = append(e.Errors, transport.Diagnostic{Code: c, Message: "secret"})
		}
		return fmt.Errorf("GET: %w", e)
	}
	for _, c := range []struct {
		name, host string
		err        error
		want       PullCause
		network    bool
	}{
		{"refused, named by address", "127.0.0.1:5000", refused("127.0.0.1"), PullRefused, true},
		{"refused, IPv6 named", "[::1]:5000", refused("::1"), PullRefused, true},
		{"refused, mapped", "127.0.0.1:5000", refused("::ffff:127.0.0.1"), PullRefused, true},
		{"refused, localhost", "localhost:5000", refused("::1"), PullRefused, true},
		{"refused, localhost without port", "localhost", refused("127.0.0.1"), PullRefused, true},
		{"refused, a name that resolved there", "registry.example.com", refused("10.0.0.5"), PullUnreachable, true},
		{"refused, another address than named", "127.0.0.1:5000", refused("10.0.0.5"), PullUnreachable, true},
		{"refused, a public host that resolved locally", "8.8.8.8", refused("127.0.0.1"), PullUnreachable, true},
		{"refused, localhost's twin", "localhost.example.com", refused("127.0.0.1"), PullUnreachable, true},
		{"refused in a pair", "127.0.0.1:5000", errors.Join(errors.New("https"), refused("127.0.0.1")), PullRefused, true},
		{"refused without an address", "example.com", fmt.Errorf("%w: cannot list this host's own addresses", egress.ErrRefused), PullUnreachable, true},
		{"404", "r.io", status(http.StatusNotFound), PullNotFound, true},
		{"manifest unknown", "r.io", status(http.StatusBadRequest, transport.ManifestUnknownErrorCode), PullNotFound, true},
		{"name unknown", "r.io", status(http.StatusBadRequest, transport.NameUnknownErrorCode), PullNotFound, true},
		{"blob unknown", "r.io", status(http.StatusBadRequest, transport.BlobUnknownErrorCode), PullNotFound, true},
		{"401", "r.io", status(http.StatusUnauthorized), PullUnauthorized, true},
		{"403", "r.io", status(http.StatusForbidden), PullUnauthorized, true},
		{"denied", "r.io", status(http.StatusBadRequest, transport.DeniedErrorCode), PullUnauthorized, true},
		{"unauthorized code", "r.io", status(http.StatusOK, transport.UnauthorizedErrorCode), PullUnauthorized, true},
		{"500", "r.io", status(http.StatusInternalServerError), PullUnreachable, true},
		{"429", "r.io", status(http.StatusTooManyRequests, transport.TooManyRequestsErrorCode), PullUnreachable, true},
		{"connection refused", "r.io", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, PullUnreachable, true},
		{"timeout", "r.io", &url.Error{Op: "Get", URL: "https://r.io/v2/", Err: context.DeadlineExceeded}, PullUnreachable, true},
		{"no sign of the network", "r.io", errors.New("no child with platform linux/riscv64"), PullUnreachable, false},
	} {
		got, network := registryCause(c.host, c.err)
		if got != c.want || network != c.network {
			t.Errorf("%s: registryCause(%q, %v) = %s, %v; want %s, %v", c.name, c.host, c.err, got, network, c.want, c.network)
		}
	}
}
