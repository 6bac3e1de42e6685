package relay

import (
	"container/list"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/apiwire"
)

// The challenge of an agent's handshake: before it signs, an agent asks
// the node for a nonce (POST NoncePath); the node remembers the nonces it
// issued for a short time and takes each one once, in a handshake signed
// over it (AgentSignBytes). A nonce is worth nothing at another node,
// which never issued it, nor twice at this one.

// NoncePath is the route where an agent gets the nonce of its next
// handshake.
const NoncePath = AgentPath + "/nonce"

// NonceSize is the length of a handshake nonce in bytes.
const NonceSize = 32

// NonceAnswer is the node's answer on NoncePath. Node and Chain say who
// the node is, so that an agent configured with another URL or chain can
// say so instead of signing: an agent signs only for the URL and chain it
// is configured with, never for what a node says.
type NonceAnswer struct {
	Nonce     string `json:"nonce"`      // NonceSize bytes in hex
	Node      string `json:"node"`       // the node's advertised API URL
	Chain     string `json:"chain"`      // the node's chain ID
	ExpiresIn int64  `json:"expires_in"` // seconds the nonce may be used in
}

// maxNonceAnswer bounds the body an agent reads on NoncePath.
const maxNonceAnswer = 4 << 10

// parseNonceAnswer reads a node's answer on NoncePath: a NonceAnswer whose
// nonce is NonceSize bytes in hex.
func parseNonceAnswer(body []byte) (NonceAnswer, []byte, error) {
	var a NonceAnswer
	if len(body) > maxNonceAnswer {
		return a, nil, fmt.Errorf("nonce answer of %d bytes (at most %d)", len(body), maxNonceAnswer)
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return a, nil, fmt.Errorf("nonce answer is not JSON: %w", err)
	}
	nonce, err := hex.DecodeString(a.Nonce)
	if err != nil || len(nonce) != NonceSize || len(a.Nonce) != 2*NonceSize {
		return a, nil, fmt.Errorf("nonce answer: nonce %.80q is not %d hex characters", a.Nonce, 2*NonceSize)
	}
	return a, nonce, nil
}

// Defaults of the nonce book (HubOptions).
const (
	DefaultMaxNonces          = 4096
	DefaultMaxNoncesPerClient = 16
	DefaultNonceTTL           = 30 * time.Second
)

// errNoncesPerClient refuses a client holding as many nonces as it may.
var errNoncesPerClient = errors.New("too many handshake nonces outstanding from this address")

// nonceBook holds the nonces a node issued and not yet took: at most max
// in all (the oldest goes first past that, so that a flood cannot lock
// agents out for longer than it keeps flooding), at most perClient per
// client address (an IPv6 client counts per /64), each for ttl. What an
// anonymous client can make a node hold is thus bounded in count, bytes
// and time.
type nonceBook struct {
	max, perClient int
	ttl            time.Duration

	mu       sync.Mutex
	byNonce  map[[NonceSize]byte]*list.Element
	order    *list.List // of *issued, oldest first
	byClient map[netip.Prefix]int
}

type issued struct {
	nonce   [NonceSize]byte
	client  netip.Prefix
	expires time.Time
}

func newNonceBook(max, perClient int, ttl time.Duration) *nonceBook {
	return &nonceBook{max: max, perClient: perClient, ttl: ttl,
		byNonce: map[[NonceSize]byte]*list.Element{}, order: list.New(), byClient: map[netip.Prefix]int{}}
}

// issue returns a fresh nonce for client, valid until now+ttl.
func (b *nonceBook) issue(client netip.Prefix, now time.Time) ([NonceSize]byte, error) {
	var n [NonceSize]byte
	rand.Read(n[:])
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweep(now)
	if b.byClient[client] >= b.perClient {
		return n, errNoncesPerClient
	}
	for b.order.Len() >= b.max {
		b.remove(b.order.Front())
	}
	b.byNonce[n] = b.order.PushBack(&issued{nonce: n, client: client, expires: now.Add(b.ttl)})
	b.byClient[client]++
	return n, nil
}

// take reports whether nonce was issued, is unexpired and unused, and
// forgets it: it is good for one handshake.
func (b *nonceBook) take(nonce []byte, now time.Time) bool {
	if len(nonce) != NonceSize {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweep(now)
	e, ok := b.byNonce[[NonceSize]byte(nonce)]
	if !ok {
		return false
	}
	b.remove(e)
	return true
}

// len is the number of nonces held.
func (b *nonceBook) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.order.Len()
}

// sweep forgets expired nonces: they expire in the order issued.
func (b *nonceBook) sweep(now time.Time) {
	for e := b.order.Front(); e != nil && !now.Before(e.Value.(*issued).expires); e = b.order.Front() {
		b.remove(e)
	}
}

func (b *nonceBook) remove(e *list.Element) {
	it := b.order.Remove(e).(*issued)
	delete(b.byNonce, it.nonce)
	if b.byClient[it.client]--; b.byClient[it.client] <= 0 {
		delete(b.byClient, it.client)
	}
}

// clientPrefix is what a client's nonces count against: its IP address,
// or its /64 for IPv6 (one host usually holds a whole /64). Forwarded
// headers are ignored: anyone can write them.
func clientPrefix(remoteAddr string) netip.Prefix {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{}
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p
	}
	return netip.PrefixFrom(ip, 32)
}

// NonceHandler serves POST NoncePath: a nonce for an agent's next
// handshake with this node (see the package comment).
func (h *Hub) NonceHandler() http.Handler {
	return http.HandlerFunc(h.serveNonce)
}

func (h *Hub) serveNonce(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeError(w, apiwire.CodeMethodNotAllowed, "use POST")
		return
	}
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		writeError(w, apiwire.CodeUnavailable, "this node's relay is closed")
		return
	}
	n, err := h.nonces.issue(clientPrefix(r.RemoteAddr), h.now())
	if err != nil {
		w.Header().Set("Retry-After", strconv.Itoa(int(h.o.NonceTTL.Seconds()+0.5)))
		writeError(w, apiwire.CodeTooManyRequests, fmt.Sprintf("%v (at most %d, each for %v): use the nonces you have, or wait", err, h.o.MaxNoncesPerClient, h.o.NonceTTL))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(NonceAnswer{Nonce: hex.EncodeToString(n[:]), Node: h.self, Chain: h.o.ChainID, ExpiresIn: int64(h.o.NonceTTL / time.Second)})
}
