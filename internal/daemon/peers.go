package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/apiserver"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Nodes know each other's API URLs: a node starts from its config's
// peer_apis and learns more from what those nodes list at GET
// /v1/net/peers, keeping at most maxLearnedPeers that answered as nodes of
// the same chain. Its blob gateway fetches missing blobs only from these
// (fetchsrc.go), and its log relay passes live logs on to them.

// Bounds of the peer book.
const (
	maxLearnedPeers = 64
	learnEvery      = 30 * time.Second
	maxProbes       = 8 // new URLs tried per round
	peerTimeout     = 5 * time.Second
	maxPeersBody    = 64 << 10
)

// peerBook is the API URLs a node knows.
type peerBook struct {
	self    string
	chainID string
	static  []string
	hc      *http.Client
	log     *slog.Logger

	mu      sync.Mutex
	learned []string
}

func newPeerBook(self, chainID string, static []string, log *slog.Logger) *peerBook {
	b := &peerBook{self: canonURL(self), chainID: chainID, log: log,
		hc: &http.Client{Timeout: peerTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	for _, s := range static {
		if u := canonURL(s); u != b.self && !slices.Contains(b.static, u) {
			b.static = append(b.static, u)
		}
	}
	return b
}

func canonURL(s string) string { return strings.TrimRight(s, "/") }

// List returns the known API URLs: the configured ones, then the learned.
func (b *peerBook) List() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append(slices.Clone(b.static), b.learned...)
}

// Known reports whether u is a known node's API URL (this node's own
// included).
func (b *peerBook) Known(u string) bool {
	u = canonURL(u)
	if u == b.self || slices.Contains(b.static, u) {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Contains(b.learned, u)
}

// routes serves GET /v1/net/peers.
func (b *peerBook) routes() []apiserver.Route {
	return []apiserver.Route{{Method: "GET", Path: "/v1/net/peers", ID: "getNetPeers", Tag: "net",
		Summary: "The API URL this node advertises (api_url) and the other nodes' API URLs it knows; its blob gateway fetches missing blobs only from these",
		Resp:    apiwire.NetPeers{}, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			apiserver.WriteJSON(w, http.StatusOK, apiwire.NetPeers{ChainID: b.chainID, APIURL: b.self, Peers: b.List()})
		})}}
}

// ask reads a node's GET /v1/net/peers.
func (b *peerBook) ask(ctx context.Context, u string) (*apiwire.NetPeers, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"/v1/net/peers", nil)
	if err != nil {
		return nil, err
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/v1/net/peers: %s", u, resp.Status)
	}
	var p apiwire.NetPeers
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxPeersBody)).Decode(&p); err != nil {
		return nil, fmt.Errorf("GET %s/v1/net/peers: %w", u, err)
	}
	if p.ChainID != b.chainID {
		return nil, fmt.Errorf("%s is a node of chain %q, not %q", u, p.ChainID, b.chainID)
	}
	return &p, nil
}

// learnOnce asks every known node for the nodes it knows and adds those
// that answer as nodes of this chain, up to maxLearnedPeers.
func (b *peerBook) learnOnce(ctx context.Context) {
	var candidates []string
	for _, u := range b.List() {
		p, err := b.ask(ctx, u)
		if err != nil {
			b.log.Debug("asking a node for its peers", "node", u, "err", err)
			continue
		}
		for _, c := range append([]string{p.APIURL}, p.Peers...) {
			c = canonURL(c)
			if c != "" && ledger.ValidDataAt(c) && !b.Known(c) && !slices.Contains(candidates, c) {
				candidates = append(candidates, c)
			}
		}
	}
	for i, c := range candidates {
		b.mu.Lock()
		full := len(b.learned) >= maxLearnedPeers
		b.mu.Unlock()
		if full || i >= maxProbes {
			return
		}
		// A URL another node lists is dialled only once it answers as a
		// node of this chain: a stranger cannot point this node's
		// fetches at an arbitrary address by listing it.
		if _, err := b.ask(ctx, c); err != nil {
			b.log.Debug("a listed node did not answer as one of this chain", "node", c, "err", err)
			continue
		}
		b.mu.Lock()
		if len(b.learned) < maxLearnedPeers && !slices.Contains(b.learned, c) {
			b.learned = append(b.learned, c)
			b.log.Info("learned a node's API", "node", c)
		}
		b.mu.Unlock()
	}
}

// learn runs learnOnce every learnEvery until ctx ends.
func (b *peerBook) learn(ctx context.Context) {
	t := time.NewTicker(learnEvery)
	defer t.Stop()
	for {
		b.learnOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
