// Package validator runs a gpunet validator: the ledger's ABCI app inside an
// in-process CometBFT node, with the node's homes, keys and genesis. It is,
// with abciapp, the only place that imports CometBFT.
package validator
