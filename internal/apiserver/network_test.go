package apiserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/gpunet/gpunet/internal/apiwire"
)

// networkChain is a fake chain with the Network ability.
type networkChain struct {
	*fakeChain
	genesis []byte
}

func (n networkChain) Genesis() ([]byte, error) { return n.genesis, nil }

func (n networkChain) NetInfo(context.Context) (*apiwire.NetInfo, error) {
	return &apiwire.NetInfo{ChainID: "c", NodeID: "ab", P2PAddress: "ab@127.0.0.1:1", Peers: []apiwire.NetPeer{}, Snapshots: []apiwire.SnapshotInfo{{Height: 20, Format: 1, Chunks: 3}}}, nil
}

func TestNetworkRoutes(t *testing.T) {
	gen := []byte(`{"chain_id":"c",  "app_state":{}}` + "\n")
	sum := sha256.Sum256(gen)
	s := New(networkChain{newFakeChain(t), gen}, Options{})
	rec := do(t, s, "GET", "/v1/genesis", nil, nil, nil)
	if rec.Code != 200 || rec.Body.String() != string(gen) || rec.Header().Get(apiwire.GenesisSHA256Header) != hex.EncodeToString(sum[:]) ||
		rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/genesis = %d %q, header %q", rec.Code, rec.Body, rec.Header())
	}
	var info apiwire.NetInfo
	if rec := do(t, s, "GET", "/v1/net/info", nil, nil, &info); rec.Code != 200 || info.GenesisSHA256 != hex.EncodeToString(sum[:]) || len(info.Snapshots) != 1 {
		t.Fatalf("GET /v1/net/info = %d %+v", rec.Code, info)
	}
	// A chain without the ability says so.
	plain := New(newFakeChain(t), Options{})
	var eb apiwire.ErrorBody
	if rec := do(t, plain, "GET", "/v1/net/info", nil, nil, &eb); rec.Code != 501 || eb.Message == "" {
		t.Fatalf("without Network: %d %+v", rec.Code, eb)
	}
}
