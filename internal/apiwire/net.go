package apiwire

import "encoding/json"

// GenesisSHA256Header carries the SHA-256 (hex) of GET /v1/genesis's
// body: the genesis file byte for byte, which `gpunet init --join
// --genesis-hash` checks.
const GenesisSHA256Header = "X-Gpunet-Genesis-Sha256"

// NetInfo is GET /v1/net/info: what a node joining the network needs to
// know of the node it asks (`gpunet init --join`).
type NetInfo struct {
	ChainID string `json:"chain_id"`
	// GenesisSHA256 is the SHA-256 (hex) of the genesis file (GET
	// /v1/genesis).
	GenesisSHA256 string `json:"genesis_sha256"`
	NodeID        string `json:"node_id"`
	// P2PAddress is this node's id@host:port for persistent_peers: its
	// external_address when set, else where it listens (then the host
	// may be unspecified, 0.0.0.0, when it listens on every interface).
	P2PAddress string `json:"p2p_address"`
	// RPCAddress is CometBFT's RPC host:port (state sync's light client
	// asks it for headers); empty when off.
	RPCAddress string `json:"rpc_address"`
	APIURL     string `json:"api_url"`
	// BlockTime is the node's pause after each block ("1s"), which a
	// joining node copies.
	BlockTime string `json:"block_time"`
	// Peers are the nodes this node is connected to.
	Peers []NetPeer `json:"peers"`
	// LatestHeight and LatestHash are the latest block in its store.
	LatestHeight int64  `json:"latest_height"`
	LatestHash   string `json:"latest_hash"`
	// TrustHeight and TrustHash are a header a joining node can trust for
	// state sync: its latest snapshot's height when it has one, else the
	// latest block's.
	TrustHeight int64  `json:"trust_height"`
	TrustHash   string `json:"trust_hash"`
	// SnapshotInterval is how often this node takes state snapshots (0:
	// never); Snapshots are those it serves, newest first.
	SnapshotInterval uint64         `json:"snapshot_interval"`
	Snapshots        []SnapshotInfo `json:"snapshots"`
}

// NetPeer is a node a node is connected to.
type NetPeer struct {
	NodeID     string `json:"node_id"`
	P2PAddress string `json:"p2p_address"` // id@host:port
	RPCAddress string `json:"rpc_address,omitempty"`
	Moniker    string `json:"moniker,omitempty"`
}

// SnapshotInfo is a state snapshot a node serves.
type SnapshotInfo struct {
	Height uint64 `json:"height"`
	Format uint32 `json:"format"`
	Chunks uint32 `json:"chunks"`
}

// GenesisDoc is a sample of GET /v1/genesis's body for the API's
// documentation: CometBFT's genesis document, whose app_state is the
// ledger's genesis.
type GenesisDoc struct {
	GenesisTime     string          `json:"genesis_time"`
	ChainID         string          `json:"chain_id"`
	InitialHeight   string          `json:"initial_height"`
	ConsensusParams json.RawMessage `json:"consensus_params"`
	Validators      json.RawMessage `json:"validators"`
	AppHash         string          `json:"app_hash"`
	AppState        json.RawMessage `json:"app_state"`
}
