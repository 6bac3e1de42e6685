package relay

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strconv"
	"strings"

	"github.com/gpunet/gpunet/internal/ledger"
)

// Header names of the relay's wire.
const (
	HeaderKey       = "X-Gpunet-Key"       // a service access key (or Authorization: Bearer)
	HeaderHop       = "X-Gpunet-Hop"       // set on node-to-node requests; such a request is never forwarded again
	HeaderRelay     = "X-Gpunet-Relay"     // the node's advertised API URL, in its answer to an agent
	HeaderChain     = "X-Gpunet-Chain"     // the node's chain ID, in its answer to an agent
	HeaderProvider  = "X-Gpunet-Provider"  // the agent's provider address
	HeaderPubkey    = "X-Gpunet-Pubkey"    // hex ed25519 public key of that address
	HeaderTime      = "X-Gpunet-Time"      // unix seconds of the signature
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
// the node whose advertised API URL is nodeURL on chain chainID at unix
// time t. Binding the node and chain keeps a captured handshake from being
// replayed at another node; the time (within MaxSkew of the node's clock)
// and the node's replay cache keep it from being replayed at the same one.
func AgentSignBytes(chainID, nodeURL string, t int64) []byte {
	return []byte("gpunet relay agent v1\n" + chainID + "\n" + normURL(nodeURL) + "\n" + strconv.FormatInt(t, 10))
}

// normURL is how node URLs compare: without trailing slashes.
func normURL(u string) string { return strings.TrimRight(u, "/") }

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

// verifyAgent checks an agent's signature.
func verifyAgent(pub ed25519.PublicKey, chainID, nodeURL string, t int64, sig []byte) bool {
	return len(pub) == ed25519.PublicKeySize && ed25519.Verify(pub, AgentSignBytes(chainID, nodeURL, t), sig)
}
