package relay

import (
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/address"
)

// Witness passes (issue 29): a node's service witness probes every ready
// replica, private services' included, whose keys it does not hold. When
// the replica's agent holds its session on another node, the witness's
// node-to-node tunnel carries a pass instead of a key: the witness's
// consensus key signs the target node, the replica, the port and the
// time. The target node lets it through when the key is a witness in its
// own ledger (HubOptions.IsWitness), the time is within witnessPassSkew
// of its clock, and the pass was not used before. A pass opens one tunnel
// for a readiness check; it never travels to a replica.

// HeaderWitness carries a witness pass: hex(public key) "." unix seconds
// "." hex(signature).
const HeaderWitness = "X-Gpunet-Witness"

// witnessPassDomain separates a pass from every other use of a
// consensus key (see ledger's validator PoP for the others).
const witnessPassDomain = "gpunet/witness-tunnel/v1\x00"

// witnessPassSkew bounds how far a pass's time may be from the target's
// clock; maxWitnessPasses bounds the passes remembered to refuse a reuse.
const (
	witnessPassSkew  = time.Minute
	maxWitnessPasses = 4096
)

// WitnessPassBytes returns what a pass signs: the domain, the chain, the
// target node's URL, the service, the provider, the port and the time.
func WitnessPassBytes(chainID, node string, service uint64, provider address.Address, port uint64, unix int64) []byte {
	b := []byte(witnessPassDomain)
	b = binary.AppendUvarint(b, uint64(len(chainID)))
	b = append(b, chainID...)
	node = normURL(node)
	b = binary.AppendUvarint(b, uint64(len(node)))
	b = append(b, node...)
	b = binary.BigEndian.AppendUint64(b, service)
	b = append(b, provider[:]...)
	b = binary.BigEndian.AppendUint64(b, port)
	return binary.BigEndian.AppendUint64(b, uint64(unix))
}

func signWitnessPass(key ed25519.PrivateKey, chainID, node string, service uint64, provider address.Address, port uint64, now time.Time) string {
	sig := ed25519.Sign(key, WitnessPassBytes(chainID, node, service, provider, port, now.Unix()))
	return hex.EncodeToString(key.Public().(ed25519.PublicKey)) + "." + strconv.FormatInt(now.Unix(), 10) + "." + hex.EncodeToString(sig)
}

// witnessProbeKey marks a context whose dials are a witness's probe.
type witnessProbeKey struct{}

func isWitnessProbe(ctx context.Context) bool { return ctx.Value(witnessProbeKey{}) != nil }

// passBook remembers the passes used lately.
type passBook struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

// use reports whether pass was not used before, and records it; at most
// maxWitnessPasses are kept, the expired forgotten first.
func (b *passBook) use(pass string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen == nil {
		b.seen = map[string]time.Time{}
	}
	if _, ok := b.seen[pass]; ok {
		return false
	}
	if len(b.seen) >= maxWitnessPasses {
		for k, t := range b.seen {
			if now.Sub(t) > 2*witnessPassSkew {
				delete(b.seen, k)
			}
		}
		if len(b.seen) >= maxWitnessPasses {
			return false // full of live passes: refuse rather than grow
		}
	}
	b.seen[pass] = now
	return true
}

// witnessPass reports whether r carries a valid, unused witness pass for
// the tunnel to provider's replica of service on port at this node.
func (h *Hub) witnessPass(r *http.Request, service uint64, provider address.Address, port uint64) bool {
	pass := r.Header.Get(HeaderWitness)
	if pass == "" || h.o.IsWitness == nil || len(pass) > 256 {
		return false
	}
	parts := strings.Split(pass, ".")
	if len(parts) != 3 {
		return false
	}
	pub, err1 := hex.DecodeString(parts[0])
	unix, err2 := strconv.ParseInt(parts[1], 10, 64)
	sig, err3 := hex.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || len(pub) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize {
		return false
	}
	now := h.now()
	if d := now.Sub(time.Unix(unix, 0)); d > witnessPassSkew || d < -witnessPassSkew {
		return false
	}
	if !ed25519.Verify(pub, WitnessPassBytes(h.o.ChainID, h.o.Self, service, provider, port, unix), sig) || !h.o.IsWitness(pub) {
		return false
	}
	return h.passes.use(pass, now)
}
