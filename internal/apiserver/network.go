package apiserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"

	"github.com/gpunet/gpunet/internal/apiwire"
)

// Network is the optional ability of a Chain to tell a joining node what
// it needs (GET /v1/genesis, /v1/net/info). A Chain without it answers
// those routes 501.
type Network interface {
	// Genesis returns the network's genesis file, byte for byte.
	Genesis() ([]byte, error)
	// NetInfo returns the node's addresses, peers, latest block, a header
	// to trust and its snapshots. GenesisSHA256 may be left empty.
	NetInfo(ctx context.Context) (*apiwire.NetInfo, error)
}

func (s *Server) network(w http.ResponseWriter) (Network, bool) {
	n, ok := s.chain.(Network)
	if !ok {
		writeError(w, http.StatusNotImplemented, 0, "this node does not serve the network's genesis and addresses")
	}
	return n, ok
}

// genesis serves GET /v1/genesis: the genesis file as it is on disk, with
// its SHA-256 in a header.
func (s *Server) genesis(w http.ResponseWriter, r *http.Request) {
	n, ok := s.network(w)
	if !ok {
		return
	}
	b, err := n.Genesis()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, 0, "genesis: "+err.Error())
		return
	}
	sum := sha256.Sum256(b)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(apiwire.GenesisSHA256Header, hex.EncodeToString(sum[:]))
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(b)
	}
}

// netInfo serves GET /v1/net/info.
func (s *Server) netInfo(w http.ResponseWriter, r *http.Request) {
	n, ok := s.network(w)
	if !ok {
		return
	}
	info, err := n.NetInfo(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, 0, "net info: "+err.Error())
		return
	}
	if info.GenesisSHA256 == "" {
		if b, err := n.Genesis(); err == nil {
			sum := sha256.Sum256(b)
			info.GenesisSHA256 = hex.EncodeToString(sum[:])
		}
	}
	writeJSON(w, http.StatusOK, info)
}
