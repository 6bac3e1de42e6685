package provider

import (
	"context"
	"crypto/ed25519"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/relay"
)

// flakyStatus fails its first call, then reports chain.
type flakyStatus struct {
	chain string
	calls atomic.Int64
}

func (s *flakyStatus) Status(context.Context) (*apiwire.StatusBody, error) {
	if s.calls.Add(1) == 1 {
		return nil, errors.New("node down")
	}
	return &apiwire.StatusBody{Status: apiwire.Status{ChainID: s.chain}}, nil
}

// everyProvider is a relay.Directory in which every address is a
// provider and there are no services.
type everyProvider struct{}

func (everyProvider) Service(uint64) (*ledger.Service, bool, error) { return nil, false, nil }
func (everyProvider) IsProvider(address.Address) bool               { return true }

// TestRelayLinkSignsForItsChain: the relay link of an agent run from a
// home reads its chain from its node (again, while the node does not
// answer) and holds a session with that node, which checks the handshake
// against its own URL and chain.
func TestRelayLinkSignsForItsChain(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	hub := relay.NewHub(relay.HubOptions{Directory: everyProvider{}, Self: url, ChainID: "link-chain"})
	mux := http.NewServeMux()
	mux.Handle("GET "+relay.AgentPath, hub.AgentHandler())
	mux.Handle("POST "+relay.NoncePath, hub.NonceHandler())
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: mux}}
	srv.Start()
	defer srv.Close()
	defer hub.Close()

	var seed [ed25519.SeedSize]byte
	key := ed25519.NewKeyFromSeed(seed[:])
	st := &flakyStatus{chain: "link-chain"}
	link := &relayLink{status: st, o: relay.AgentOptions{Nodes: []string{url + "/"}, Key: key,
		Dial: func(context.Context, uint64, uint64) (net.Conn, error) { return nil, errors.New("no replicas") }}}
	if link.Relay() != "" {
		t.Error("a relay before Run")
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- link.Run(ctx) }()
	prov := address.FromPubKey(key.Public().(ed25519.PublicKey))
	for end := time.Now().Add(10 * time.Second); !hub.Connected(prov) || link.Relay() != url; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("not connected (status read %d times, relay %q)", st.calls.Load(), link.Relay())
		}
	}
	if st.calls.Load() != 2 {
		t.Errorf("status read %d times, want 2 (one failure, one answer)", st.calls.Load())
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil when ctx ends", err)
	}
}
