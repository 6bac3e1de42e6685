package chainclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Service returns a service; IsNotFound(err) when there is none.
func (c *Client) Service(ctx context.Context, id uint64) (*ledger.Service, error) {
	var s ledger.Service
	if _, err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v1/services/%d", id), nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// QuoteService asks what deploying spec with budget would give now.
func (c *Client) QuoteService(ctx context.Context, spec *ledger.ServiceSpec, budget uint64) (*ledger.ServiceQuote, error) {
	b, err := json.Marshal(apiwire.ServiceQuoteRequest{Spec: *spec, Budget: budget})
	if err != nil {
		return nil, err
	}
	var q ledger.ServiceQuote
	if _, err := c.do(ctx, http.MethodPost, "/v1/services/quote", b, &q); err != nil {
		return nil, err
	}
	return &q, nil
}

// ProbeService asks the node to reach each replica of service id and run
// its readiness check (GET /v1/services/{id}/probe); key is an access key,
// "" for a public service.
func (c *Client) ProbeService(ctx context.Context, id uint64, key string) (*apiwire.ServiceProbe, error) {
	var hdr http.Header
	if key != "" {
		hdr = http.Header{HeaderServiceKey: {key}}
	}
	var p apiwire.ServiceProbe
	if _, err := c.doWith(ctx, http.MethodGet, fmt.Sprintf("/v1/services/%d/probe", id), nil, hdr, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Services returns the newest services of owner (nil: anyone's active
// ones), newest first, at most limit of them (up to apiwire.MaxPageLimit).
func (c *Client) Services(ctx context.Context, owner *address.Address, limit int) (*apiwire.ServiceList, error) {
	q := url.Values{"limit": {fmt.Sprint(limit)}}
	if owner != nil {
		q.Set("owner", owner.String())
	}
	var out apiwire.ServiceList
	_, err := c.do(ctx, http.MethodGet, "/v1/services?"+q.Encode(), nil, &out)
	return &out, err
}

// ProviderServices returns the active services with a replica on provider.
func (c *Client) ProviderServices(ctx context.Context, provider address.Address) (*apiwire.ServiceList, error) {
	var out apiwire.ServiceList
	if _, err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v1/providers/%s/services", provider), nil, &out); err != nil {
		return nil, err
	}
	if out.Services == nil {
		out.Services = []*ledger.Service{}
	}
	return &out, nil
}

// PostServiceLog sends chunk seq of the provider's replica log of a
// service, signed by the provider's key.
func (c *Client) PostServiceLog(ctx context.Context, key Signer, service, seq uint64, data []byte) error {
	return c.postSignedLog(ctx, key, fmt.Sprintf("/v1/services/%d/logs", service), seq, data, apiwire.ServiceLogSignBytes(service, seq, data))
}

// ServiceLogs returns a service's live log chunks (every replica's, each
// sealed to the owner) from seq from.
func (c *Client) ServiceLogs(ctx context.Context, service, from uint64) (*apiwire.LogPage, error) {
	var p apiwire.LogPage
	_, err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v1/services/%d/logs?from=%d", service, from), nil, &p)
	return &p, err
}

// Service access headers and the tunnel's protocol (the relay's:
// internal/relay, docs/architecture.md).
const (
	HeaderServiceKey = "X-Gpunet-Key" // an access key, sk-gpunet-…
	ProtoServiceTCP  = "gpunet-tcp"   // Upgrade: a raw byte stream to a service's port
)

// DialService opens a byte stream to port of service id through the node
// (GET /svc/{id}/{port} with Upgrade: gpunet-tcp): the node's relay joins
// it to that port of a ready replica, and what is written is what the
// container reads. key is an access key; "" for a public service. The
// stream lasts until either side closes it or ctx ends; only the wait for
// the node's answer is bounded (a minute).
func (c *Client) DialService(ctx context.Context, id, port uint64, key string) (io.ReadWriteCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/svc/%d/%d", c.Base(), id, port), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", ProtoServiceTCP)
	if key != "" {
		req.Header.Set(HeaderServiceKey, key)
	}
	// Not c.http: its timeout would cut the stream. The connection is
	// kept to half-close it (CloseWrite) over plain http.
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = time.Minute
	t.DisableKeepAlives = true
	var conn net.Conn
	dial := t.DialContext
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		conn = c
		return c, err
	}
	resp, err := (&http.Client{Transport: t}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w at %s: %v", ErrUnreachable, c.where(), err)
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		if rw, ok := resp.Body.(io.ReadWriteCloser); ok {
			if tc, ok := conn.(*net.TCPConn); ok && req.URL.Scheme == "http" {
				return &serviceStream{ReadWriteCloser: rw, tcp: tc}, nil
			}
			return rw, nil
		}
		resp.Body.Close()
		return nil, fmt.Errorf("service %d port %d: the node switched protocols but gave no stream", id, port)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	var eb apiwire.ErrorBody
	if json.Unmarshal(b, &eb) == nil && eb.Message != "" {
		return nil, &APIError{Status: resp.StatusCode, Code: eb.Code, LedgerCode: eb.LedgerCode, Msg: eb.Message}
	}
	return nil, &APIError{Status: resp.StatusCode, Msg: fmt.Sprintf("GET /svc/%d/%d: HTTP %d, not 101 Switching Protocols: %s", id, port, resp.StatusCode, bytes.TrimSpace(b))}
}

// serviceStream is a tunnel over plain http that can be half-closed.
type serviceStream struct {
	io.ReadWriteCloser
	tcp *net.TCPConn
}

// CloseWrite tells the service that no more bytes come, keeping the
// stream open for its answer.
func (s *serviceStream) CloseWrite() error { return s.tcp.CloseWrite() }
