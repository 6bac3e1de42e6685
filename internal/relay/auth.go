package relay

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Header names of the relay's wire.
const (
	HeaderKey       = "X-Gpunet-Key"       // a service access key (or Authorization: Bearer)
	HeaderHop       = "X-Gpunet-Hop"       // set on node-to-node requests; such a request is never forwarded again
	HeaderProvider  = "X-Gpunet-Provider"  // the agent's provider address
	HeaderPubkey    = "X-Gpunet-Pubkey"    // hex ed25519 public key of that address
	HeaderNonce     = "X-Gpunet-Nonce"     // hex nonce the node issued (NoncePath), signed into the handshake
	HeaderSignature = "X-Gpunet-Signature" // hex ed25519 signature over AgentSignBytes
)

// Upgrade protocols.
const (
	ProtoAgent = "gpunet-relay/1" // an agent's session with a node
	ProtoTCP   = "gpunet-tcp"     // a raw byte tunnel to a service port
)

// KeyPrefix starts every service access key; a bearer token with it is a
// gpunet key and is never passed on to a service.
const KeyPrefix = "sk-gpunet-"

// AgentSignBytes is what a provider's agent signs to open a session with
// one node: the node's identity (its chain's ID and its advertised API URL,
// NodeURL's form) and a nonce that node issued. A node accepts a
// signature only for its own chain and URL and a nonce it issued, has not
// seen used, and issued less than its nonce lifetime ago, so a signature
// is worth nothing at another node and nothing twice at the same one.
// chainID and nodeURL never contain a newline (NewAgent and NodeURL
// refuse one), so the message has one reading.
func AgentSignBytes(chainID, nodeURL string, nonce []byte) []byte {
	return []byte("gpunet relay agent v2\n" + chainID + "\n" + normURL(nodeURL) + "\n" + hex.EncodeToString(nonce))
}

// normURL is how node URLs compare: without trailing slashes.
func normURL(u string) string { return strings.TrimRight(u, "/") }

// maxIdentity bounds a node URL and a chain ID in a handshake.
const maxIdentity = 256

// NodeURL checks that u can name a node in a handshake (an absolute http or
// https URL with a host, no user, query or fragment, at most 256 bytes)
// and returns it as handshakes carry it: without trailing slashes.
func NodeURL(u string) (string, error) {
	n := normURL(strings.TrimSpace(u))
	if n == "" || len(n) > maxIdentity {
		return "", fmt.Errorf("node URL %q: want an http or https URL of at most %d bytes", u, maxIdentity)
	}
	p, err := url.Parse(n)
	if err != nil {
		return "", fmt.Errorf("node URL %q: %w", u, err)
	}
	if (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.User != nil || p.RawQuery != "" || p.ForceQuery || p.Fragment != "" || p.Opaque != "" {
		return "", fmt.Errorf("node URL %q: want http(s)://host[:port][/path], without user, query or fragment", u)
	}
	return n, nil
}

// checkChainID checks that id can name a chain in a handshake: 1 to 256
// printable ASCII characters.
func checkChainID(id string) error {
	if id == "" || len(id) > maxIdentity {
		return fmt.Errorf("chain ID %q: want 1 to %d characters", id, maxIdentity)
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return fmt.Errorf("chain ID %q: want printable ASCII without spaces", id)
		}
	}
	return nil
}

// Authorized reports whether r may reach svc: svc is public, or r carries a
// key whose SHA-256 is one of svc.KeyHashes, as X-Gpunet-Key or as
// Authorization: Bearer. credential is that key ("" when none matched),
// what a node passes on when it forwards the request to another node.
func Authorized(svc *ledger.Service, r *http.Request) (credential string, ok bool) {
	for _, key := range requestKeys(r) {
		if keyMatches(svc, key) {
			return key, true
		}
	}
	return "", svc.Public
}

// requestKeys lists the candidate keys r carries, X-Gpunet-Key first.
func requestKeys(r *http.Request) []string {
	var keys []string
	if k := r.Header.Get(HeaderKey); k != "" {
		keys = append(keys, k)
	}
	if k, ok := bearer(r); ok {
		keys = append(keys, k)
	}
	return keys
}

// bearer returns the token of r's Authorization: Bearer header.
func bearer(r *http.Request) (string, bool) {
	a := r.Header.Get("Authorization")
	if len(a) < 7 || !strings.EqualFold(a[:7], "bearer ") {
		return "", false
	}
	t := strings.TrimSpace(a[7:])
	return t, t != ""
}

func keyMatches(svc *ledger.Service, key string) bool {
	h := ledger.Hash(sha256.Sum256([]byte(key)))
	found := 0
	for _, kh := range svc.KeyHashes {
		found |= subtle.ConstantTimeCompare(h[:], kh[:])
	}
	return found == 1
}

// isGpunetKey reports whether a bearer token is a gpunet key (of this
// service or shaped like one), which a service never sees.
func isGpunetKey(svc *ledger.Service, token string) bool {
	return strings.HasPrefix(token, KeyPrefix) || keyMatches(svc, token)
}

// agentHello is an agent's handshake as a node reads it from the upgrade
// request's headers (parseAgentHello): who signs, and what.
type agentHello struct {
	provider address.Address
	pub      ed25519.PublicKey
	nonce    []byte // NonceSize bytes
	sig      []byte
}

// parseAgentHello reads and checks the form of an agent's handshake
// headers: X-Gpunet-Provider an address, X-Gpunet-Pubkey its hex ed25519
// key, X-Gpunet-Nonce NonceSize hex bytes, X-Gpunet-Signature a hex
// ed25519 signature. It verifies nothing: that is verify's.
func parseAgentHello(h http.Header) (agentHello, error) {
	var a agentHello
	var err error
	if a.provider, err = address.Parse(h.Get(HeaderProvider)); err != nil {
		return a, fmt.Errorf("%s: %w", HeaderProvider, err)
	}
	if a.pub, err = hexField(h, HeaderPubkey, ed25519.PublicKeySize); err != nil {
		return a, err
	}
	if address.FromPubKey(a.pub) != a.provider {
		return a, fmt.Errorf("%s is not the key of %s", HeaderPubkey, a.provider)
	}
	if a.nonce, err = hexField(h, HeaderNonce, NonceSize); err != nil {
		return a, fmt.Errorf("%w (POST %s for one)", err, NoncePath)
	}
	if a.sig, err = hexField(h, HeaderSignature, ed25519.SignatureSize); err != nil {
		return a, err
	}
	return a, nil
}

// hexField decodes header name of h, which must be n bytes in hex.
func hexField(h http.Header, name string, n int) ([]byte, error) {
	v := h.Get(name)
	b, err := hex.DecodeString(v)
	if err != nil || len(b) != n || len(v) != 2*n {
		return nil, fmt.Errorf("%s must be %d hex characters", name, 2*n)
	}
	return b, nil
}

// verify reports whether a's signature is its provider's over the
// handshake for the node at nodeURL on chain chainID.
func (a agentHello) verify(chainID, nodeURL string) bool {
	return len(a.pub) == ed25519.PublicKeySize && ed25519.Verify(a.pub, AgentSignBytes(chainID, nodeURL, a.nonce), a.sig)
}
