package validator

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/gpunet/gpunet/internal/apiwire"
)

// FuzzNetInfo feeds a join node's /v1/net/info answer, any bytes, through
// what init --join does with it: the strict decoding getNode does, then
// checkNetInfo and the address checks. Nothing may panic, and an answer
// that passes names a chain and addresses a joiner can use.
func FuzzNetInfo(f *testing.F) {
	good, err := json.Marshal(apiwire.NetInfo{
		ChainID: "gpunet-test", P2PAddress: "0123456789abcdef0123456789abcdef01234567@203.0.113.7:26656",
		RPCAddress: "203.0.113.7:26657", BlockTime: "1s", TrustHeight: 8, TrustHash: "AB" + string(bytes.Repeat([]byte("cd"), 31)),
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"chain_id":"x","p2p_address":"@:","rpc_address":"[::1]:1"}`))
	f.Add([]byte(`{"chain_id":"x","snapshots":[{}],"trust_height":-1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var info apiwire.NetInfo
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if dec.Decode(&info) != nil {
			return
		}
		if checkNetInfo(&info) != nil {
			return
		}
		if info.ChainID == "" || info.RPCAddress == "" {
			t.Fatalf("accepted %q without a chain id or an RPC address", b)
		}
		if _, err := peerAddr(info.P2PAddress); err != nil {
			t.Fatalf("accepted p2p_address %q: %v", info.P2PAddress, err)
		}
		for _, p := range info.Peers {
			peerAddr(p.P2PAddress)
		}
	})
}
