// Package apiwire holds the JSON API's wire types, shared by the server
// (internal/apiserver, internal/validator) and every client (chainclient,
// jobclient, provider, dashboard, netstats, the CLI): the request and
// response bodies, the stable error codes, the page limits and the bytes a
// provider signs for its logs.
//
// It depends only on the standard library and the ledger's types, so that
// a client links none of the node's consensus machinery; an architecture
// test (internal/archtest) holds it to that.
package apiwire

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
)

// Status is a node's view of the chain, as `gpunet status` shows it.
type Status struct {
	ChainID         string      `json:"chain_id"`
	Moniker         string      `json:"moniker"`
	NodeID          string      `json:"node_id"`
	Height          int64       `json:"height"`
	AppHash         string      `json:"app_hash"`
	LatestBlockTime time.Time   `json:"latest_block_time"`
	CatchingUp      bool        `json:"catching_up"`
	Peers           int         `json:"peers"`
	Validators      []Validator `json:"validators"`
}

// Validator is one member of the validator set.
type Validator struct {
	Address     string `json:"address"`
	PubKey      string `json:"pub_key"`
	VotingPower int64  `json:"voting_power"`
}

// StatusBody is GET /v1/status.
type StatusBody struct {
	Status
	API string `json:"api"`
}

// TxResult is the outcome of a tx: rejected by CheckTx (Height 0) or
// included in a block.
type TxResult struct {
	Hash      string         `json:"tx_hash"`
	Height    int64          `json:"height"`
	Code      uint32         `json:"code"`
	Codespace string         `json:"codespace,omitempty"`
	Log       string         `json:"log,omitempty"`
	Events    []ledger.Event `json:"events,omitempty"`
}

// ErrDuplicateTx is what a node's BroadcastTx returns (wrapped) for a tx it
// has seen recently, in the mempool or just committed; the API answers it
// with CodeConflict.
var ErrDuplicateTx = errors.New("duplicate tx")

// BlockHeader is what lists of blocks show.
type BlockHeader struct {
	Height   int64     `json:"height"`
	Time     time.Time `json:"time"`
	Hash     string    `json:"hash"`
	Proposer string    `json:"proposer"`
	NumTxs   int       `json:"num_txs"`
	Size     int       `json:"size"` // bytes
	// AppHash is the header's: the state after the previous block.
	AppHash string `json:"app_hash"`
}

// BlockTx is one tx of a block, decoded, with its result.
type BlockTx struct {
	Hash     string `json:"tx_hash"`
	Index    int    `json:"index"`
	Type     string `json:"type"` // the message type: send, submit_job, …
	Sender   string `json:"sender,omitempty"`
	Sequence uint64 `json:"sequence"`
	Fee      uint64 `json:"fee"`
	Size     int    `json:"size"`
	// Msg is the message as the tx carries it (JSON), absent when the tx
	// does not decode.
	Msg       json.RawMessage `json:"msg,omitempty"`
	Code      uint32          `json:"code"`
	Codespace string          `json:"codespace,omitempty"`
	Log       string          `json:"log,omitempty"`
	Events    []ledger.Event  `json:"events,omitempty"`
}

// Block is GET /v1/blocks/{height}: a block with its txs and the ledger's
// block-level events (scheduling, challenges, deadlines, settlement).
type Block struct {
	BlockHeader
	Txs    []BlockTx      `json:"txs"`
	Events []ledger.Event `json:"events"`
}

// BlockList is GET /v1/blocks.
type BlockList struct {
	Blocks     []BlockHeader `json:"blocks"`
	NextCursor string        `json:"next_cursor"`
}

// TxEntry is a tx in a list: the tx and its block.
type TxEntry struct {
	BlockTx
	Height int64     `json:"height"`
	Time   time.Time `json:"time"`
}

// TxList is GET /v1/txs.
type TxList struct {
	Txs        []TxEntry `json:"txs"`
	NextCursor string    `json:"next_cursor"`
}
