package relay

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// The gang route across nodes. When the target member's agent holds its
// session with another node, the asker's node carries the stream there
// over the node-to-node tunnel services use (TunnelPath, Upgrade:
// gpunet-tcp, X-Gpunet-Hop), with the query
//
//	?gang=J&placement=A&rank=R&provider=P&via=N
//
// P being the asker's provider and N the asker's node, and the asker's
// gang pass in X-Gpunet-Gang-Pass. The asker's agent signs a pass into
// every gang request (gangRequest.Pass): its provider key over the chain,
// the node it holds its session with, J, A, R, the time and a random
// nonce (GangPassBytes). The target's node lets the stream through when
// N is a peer of its own and not itself, the pass is P's key's signature
// over exactly that, its time within gangPassSkew of the target's clock,
// and it was not used there before; then it checks P's request against
// its OWN ledger as checkGang does (a live gang in placement A, P and
// rank R both members of the same replica gang, neither ended), takes a
// slot of its own per-member and per-gang bounds and one of N's
// (HubOptions.MaxGangHopsPerNode), and opens the stream to rank R's
// agent, which must hold its session there: the tunnel is never carried
// further. A 101 means that agent answered OK.
//
// Where the target's agent is: the ledger records it for service
// replicas only (Replica.Relay), not for gang members, so the asker's node
// asks the node where it last found that provider, then its peers
// (HubOptions.Peers), at most maxGangPeers of them per stream; a node
// without the session answers 404 at once, and the pass, good once per
// node, is shown to each.

// HeaderGangPass carries a gang pass: hex(public key) "." unix seconds
// "." hex(nonce) "." hex(signature).
const HeaderGangPass = "X-Gpunet-Gang-Pass"

// gangPassDomain separates a gang pass from every other use of a
// provider's key (the agent handshake signs AgentSignBytes).
const gangPassDomain = "gpunet/gang-hop/v1\x00"

const (
	// gangPassSkew bounds how far a pass's time may be from the target
	// node's clock (the passBook forgets passes past twice this).
	gangPassSkew = witnessPassSkew
	// gangPassNonceSize is a pass's random nonce.
	gangPassNonceSize = 16
	// maxGangPassLen bounds a pass as text.
	maxGangPassLen = 2*ed25519.PublicKeySize + 1 + 20 + 1 + 2*gangPassNonceSize + 1 + 2*ed25519.SignatureSize
	// maxGangPeers bounds the nodes asked for one stream.
	maxGangPeers = 16
	// maxGangHomes bounds the providers whose node is remembered.
	maxGangHomes = 4096
	// DefaultMaxGangHopsPerNode is HubOptions.MaxGangHopsPerNode's
	// default.
	DefaultMaxGangHopsPerNode = 1024
)

// GangPassBytes returns what a gang pass signs: the domain, the chain,
// the asker's node (via), the gang job, its placement, the target rank,
// the time and the nonce.
func GangPassBytes(chainID, via string, job, placement, rank uint64, unix int64, nonce []byte) []byte {
	b := []byte(gangPassDomain)
	b = binary.AppendUvarint(b, uint64(len(chainID)))
	b = append(b, chainID...)
	via = normURL(via)
	b = binary.AppendUvarint(b, uint64(len(via)))
	b = append(b, via...)
	b = binary.BigEndian.AppendUint64(b, job)
	b = binary.BigEndian.AppendUint64(b, placement)
	b = binary.BigEndian.AppendUint64(b, rank)
	b = binary.BigEndian.AppendUint64(b, uint64(unix))
	b = binary.AppendUvarint(b, uint64(len(nonce)))
	return append(b, nonce...)
}

// signGangPass signs a pass for a gang stream through via.
func signGangPass(key ed25519.PrivateKey, chainID, via string, job, placement, rank uint64, now time.Time) string {
	nonce := make([]byte, gangPassNonceSize)
	rand.Read(nonce)
	sig := ed25519.Sign(key, GangPassBytes(chainID, via, job, placement, rank, now.Unix(), nonce))
	return hex.EncodeToString(key.Public().(ed25519.PublicKey)) + "." + strconv.FormatInt(now.Unix(), 10) + "." +
		hex.EncodeToString(nonce) + "." + hex.EncodeToString(sig)
}

// gangPass is a parsed pass.
type gangPass struct {
	raw             string
	asker           address.Address
	pub, sig, nonce []byte
	unix            int64
}

// parseGangPass reads a pass's form: four dot-separated fields, a key, a
// time, a nonce and a signature of their sizes.
func parseGangPass(s string) (gangPass, error) {
	var p gangPass
	if s == "" {
		return p, errors.New("no gang pass")
	}
	if len(s) > maxGangPassLen {
		return p, fmt.Errorf("gang pass: %d bytes, at most %d", len(s), maxGangPassLen)
	}
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return p, errors.New("gang pass: want key.time.nonce.signature")
	}
	var err error
	if p.pub, err = hex.DecodeString(parts[0]); err != nil || len(p.pub) != ed25519.PublicKeySize {
		return p, errors.New("gang pass: the key is not a hex ed25519 public key")
	}
	if p.unix, err = strconv.ParseInt(parts[1], 10, 64); err != nil || p.unix <= 0 {
		return p, errors.New("gang pass: the time is not positive unix seconds")
	}
	if p.nonce, err = hex.DecodeString(parts[2]); err != nil || len(p.nonce) != gangPassNonceSize {
		return p, fmt.Errorf("gang pass: the nonce is not %d bytes in hex", gangPassNonceSize)
	}
	if p.sig, err = hex.DecodeString(parts[3]); err != nil || len(p.sig) != ed25519.SignatureSize {
		return p, errors.New("gang pass: the signature is not a hex ed25519 signature")
	}
	p.raw = s
	p.asker = address.FromPubKey(p.pub)
	return p, nil
}

// Bounds of the gang passes a node remembers to refuse a replay: per
// asking provider (each asker's own, so that one member opening streams
// fast cannot crowd out the others), and askers in all.
const (
	maxGangPassesPerAsker = 4 * ledger.MaxGangNodes
	maxGangPassAskers     = 16384
)

// gangPassBook remembers the nonces of the gang passes used lately at
// this node, per asker, each for twice gangPassSkew (past which its pass
// is refused as stale anyway).
type gangPassBook struct {
	mu     sync.Mutex
	askers map[address.Address]map[[gangPassNonceSize]byte]time.Time
}

// use records asker's pass nonce, or says why it may not be used: it was
// used before, or the book holds as many live passes as it may.
func (b *gangPassBook) use(asker address.Address, nonce []byte, now time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.askers == nil {
		b.askers = map[address.Address]map[[gangPassNonceSize]byte]time.Time{}
	}
	var k [gangPassNonceSize]byte
	copy(k[:], nonce)
	live := func(t time.Time) bool { return now.Sub(t) <= 2*gangPassSkew }
	seen := b.askers[asker]
	if seen == nil {
		if len(b.askers) >= maxGangPassAskers {
			for a, m := range b.askers {
				for n, t := range m {
					if !live(t) {
						delete(m, n)
					}
				}
				if len(m) == 0 {
					delete(b.askers, a)
				}
			}
			if len(b.askers) >= maxGangPassAskers {
				return fmt.Errorf("this node holds the gang passes of %d providers used within %v; try again later", maxGangPassAskers, 2*gangPassSkew)
			}
		}
		seen = map[[gangPassNonceSize]byte]time.Time{}
		b.askers[asker] = seen
	}
	if _, ok := seen[k]; ok {
		return errors.New("the gang pass was used already at this node")
	}
	if len(seen) >= maxGangPassesPerAsker {
		for n, t := range seen {
			if !live(t) {
				delete(seen, n)
			}
		}
		if len(seen) >= maxGangPassesPerAsker {
			return fmt.Errorf("provider %s used %d gang passes at this node within %v; try again later", asker, maxGangPassesPerAsker, 2*gangPassSkew)
		}
	}
	seen[k] = now
	return nil
}

// checkGangPass reports what is wrong with p as a pass of asker for rank of job's
// placement through via, at this hub's chain and time; nil when it is
// good. It does not record the pass.
func (h *Hub) checkGangPass(p gangPass, asker address.Address, via string, job, placement, rank uint64) error {
	if p.asker != asker {
		return fmt.Errorf("the gang pass is signed by %s, not by the asker %s", p.asker, asker)
	}
	if d := h.now().Sub(time.Unix(p.unix, 0)); d > gangPassSkew || d < -gangPassSkew {
		return fmt.Errorf("the gang pass is %v from this node's clock; at most %v", d.Round(time.Second), gangPassSkew)
	}
	if !ed25519.Verify(p.pub, GangPassBytes(h.o.ChainID, via, job, placement, rank, p.unix, p.nonce), p.sig) {
		return fmt.Errorf("bad gang pass signature: it must sign relay.GangPassBytes(%q, %q, job, placement, rank, time, nonce)", h.o.ChainID, normURL(via))
	}
	return nil
}

// hopGang carries a gang stream of rt, checked here, to the node that
// holds the target's session, showing the asker's pass. Its error wraps
// ErrNoRoute when no node asked holds the target's session, or says the
// target node's reason.
func (h *Hub) hopGang(ctx context.Context, asker address.Address, rt gangRoute, pass string) (net.Conn, error) {
	noSession := fmt.Errorf("the member of rank %d of job %d (provider %s) holds no relay session with this node: %w", rt.stream.Rank, rt.stream.Job, rt.target, ErrNoRoute)
	if pass == "" || h.o.Peers == nil {
		return nil, noSession
	}
	var nodes []string
	seen := map[string]bool{h.self: true}
	add := func(u string) {
		u = normURL(u)
		if len(nodes) < maxGangPeers && !seen[u] && h.mayForward(u) {
			seen[u] = true
			nodes = append(nodes, u)
		}
	}
	h.mu.Lock()
	home := h.gangHomes[rt.target]
	h.mu.Unlock()
	add(home)
	for _, u := range h.o.Peers() {
		add(u)
	}
	q := url.Values{
		"gang":      {strconv.FormatUint(rt.stream.Job, 10)},
		"placement": {strconv.FormatUint(rt.stream.Placement, 10)},
		"rank":      {strconv.FormatUint(uint64(rt.stream.Rank), 10)},
		"provider":  {asker.String()},
		"via":       {h.self},
	}.Encode()
	hdr := http.Header{HeaderHop: {"1"}, HeaderGangPass: {pass}}
	var refusal error
	for _, node := range nodes {
		release, err := h.takeGangHop(node)
		if err != nil {
			return nil, err
		}
		c, _, err := dialUpgrade(ctx, node+TunnelPath+"?"+q, ProtoTCP, hdr, h.o.HandshakeTimeout)
		if err == nil {
			h.mu.Lock()
			if len(h.gangHomes) >= maxGangHomes {
				clear(h.gangHomes) // hints only: found again by asking
			}
			h.gangHomes[rt.target] = node
			h.mu.Unlock()
			return &onClose{Conn: c, fn: release}, nil
		}
		release()
		var ue *UpgradeError
		if errors.As(err, &ue) && ue.Status == http.StatusNotFound {
			continue // not there
		}
		if refusal == nil {
			refusal = fmt.Errorf("node %s: %s", node, upgradeReason(err))
		}
		if ctx.Err() != nil {
			break
		}
	}
	if home != "" {
		h.mu.Lock()
		if h.gangHomes[rt.target] == home {
			delete(h.gangHomes, rt.target)
		}
		h.mu.Unlock()
	}
	if refusal != nil {
		return nil, fmt.Errorf("the member of rank %d of job %d is not reachable through another node: %w: %w", rt.stream.Rank, rt.stream.Job, refusal, ErrRefused)
	}
	return nil, fmt.Errorf("the member of rank %d of job %d (provider %s) holds no relay session with this node or the %d other nodes asked: %w", rt.stream.Rank, rt.stream.Job, rt.target, len(nodes), ErrNoRoute)
}

// upgradeReason is a refused upgrade's message: the ErrorBody's when the
// body is one.
func upgradeReason(err error) string {
	var ue *UpgradeError
	if errors.As(err, &ue) {
		var b apiwire.ErrorBody
		if json.Unmarshal([]byte(ue.Body), &b) == nil && b.Message != "" {
			return fmt.Sprintf("%d %s", ue.Status, b.Message)
		}
	}
	return err.Error()
}

// takeGangHop takes one of node's MaxGangHopsPerNode slots: the gang
// streams open at once between this node and node, either way.
func (h *Hub) takeGangHop(node string) (release func(), err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if h.gangHops[node] >= h.o.MaxGangHopsPerNode {
		return nil, fmt.Errorf("%d gang streams are open between this node and %s: %w", h.o.MaxGangHopsPerNode, node, ErrBusy)
	}
	h.gangHops[node]++
	return func() {
		h.mu.Lock()
		if h.gangHops[node]--; h.gangHops[node] <= 0 {
			delete(h.gangHops, node)
		}
		h.mu.Unlock()
	}, nil
}

// serveGangTunnel serves a node-to-node gang tunnel (TunnelPath with
// gang=): see the comment at the top of this file. It answers 400 for a
// malformed request, 403 for a bad pass, a caller that is not a peer or a
// request the ledger refuses, 404 when the target's agent holds no
// session here, 429 past a bound, 503 when the target's agent does not
// answer; 101 once it answered OK.
func (h *Hub) serveGangTunnel(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	job, err1 := strconv.ParseUint(q.Get("gang"), 10, 64)
	placement, err2 := strconv.ParseUint(q.Get("placement"), 10, 64)
	rank, err3 := strconv.ParseUint(q.Get("rank"), 10, 64)
	asker, err4 := address.Parse(q.Get("provider"))
	via, err5 := NodeURL(q.Get("via"))
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
		writeError(w, apiwire.CodeInvalidArgument, "a gang tunnel needs gang, placement, rank, provider and via: "+err.Error())
		return
	}
	if len(q) != 5 || len(q["gang"])+len(q["placement"])+len(q["rank"])+len(q["provider"])+len(q["via"]) != 5 {
		writeError(w, apiwire.CodeInvalidArgument, "a gang tunnel takes gang, placement, rank, provider and via, once each, only")
		return
	}
	gq := gangRequest{Gang: job, Placement: placement, Rank: rank}
	if gq.Gang == 0 || gq.Rank >= ledger.MaxGangNodes {
		writeError(w, apiwire.CodeInvalidArgument, fmt.Sprintf("gang %d rank %d: want a job and a rank below %d", job, rank, ledger.MaxGangNodes))
		return
	}
	if via == h.self || h.o.IsPeer == nil || !h.o.IsPeer(via) {
		writeError(w, apiwire.CodeForbidden, fmt.Sprintf("%s is not a peer of this node", via))
		return
	}
	pass, err := parseGangPass(r.Header.Get(HeaderGangPass))
	if err == nil {
		err = h.checkGangPass(pass, asker, via, job, placement, rank)
	}
	if err != nil {
		writeError(w, apiwire.CodeForbidden, err.Error())
		return
	}
	rt, err := h.checkGang(asker, gq)
	if err != nil {
		code := apiwire.CodeForbidden
		if strings.HasPrefix(err.Error(), "cannot read") {
			code = apiwire.CodeUnavailable
		}
		writeError(w, code, err.Error())
		return
	}
	h.mu.Lock()
	ts := h.sessions[rt.target]
	h.mu.Unlock()
	if ts == nil || ts.mux.IsClosed() {
		writeError(w, apiwire.CodeNotFound, fmt.Sprintf("the member of rank %d of job %d (provider %s) holds no relay session with this node", rank, job, rt.target))
		return
	}
	if err := h.gangPasses.use(asker, pass.nonce, h.now()); err != nil {
		writeError(w, apiwire.CodeForbidden, err.Error())
		return
	}
	releaseGang, err := h.takeGang(asker, rt)
	if err != nil {
		w.Header().Set("Retry-After", "10")
		writeError(w, apiwire.CodeTooManyRequests, err.Error())
		return
	}
	defer releaseGang()
	releaseHop, err := h.takeGangHop(via)
	if err != nil {
		w.Header().Set("Retry-After", "10")
		writeError(w, apiwire.CodeTooManyRequests, err.Error())
		return
	}
	defer releaseHop()
	line, _ := json.Marshal(gangHeader{Gang: job, Placement: placement, Rank: rank, From: uint64(rt.stream.From)})
	back, err := h.openStreamWith(r.Context(), ts, line)
	if err != nil {
		if errors.Is(err, ErrBusy) {
			w.Header().Set("Retry-After", "10")
			writeError(w, apiwire.CodeTooManyRequests, err.Error())
			return
		}
		writeError(w, apiwire.CodeUnavailable, err.Error())
		return
	}
	h.spliceTunnel(w, back)
}
