package apiwire

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

// ServiceList is GET /v1/services (?owner=, ?model=) and GET
// /v1/providers/{addr}/services.
type ServiceList struct {
	Services   []*ledger.Service `json:"services"`
	NextCursor string            `json:"next_cursor"`
	Height     uint64            `json:"height"`
}

// ServiceQuoteRequest is POST /v1/services/quote: what deploying Spec
// with Budget (usync; 0 to leave out how long it lasts) would give now.
type ServiceQuoteRequest struct {
	Spec   ledger.ServiceSpec `json:"spec"`
	Budget uint64             `json:"budget"`
}

// ServiceLogSignBytes is what a provider signs to post chunk seq of its
// replica's log of service id (POST /v1/services/{id}/logs, header
// X-Gpunet-Signature). Its domain differs from a job log's, so that a
// signature for one cannot be replayed as the other.
func ServiceLogSignBytes(service, seq uint64, data []byte) []byte {
	sum := sha256.Sum256(data)
	b := []byte("gpunet/svclog/v1\x00")
	b = binary.BigEndian.AppendUint64(b, service)
	b = binary.BigEndian.AppendUint64(b, seq)
	return append(b, sum[:]...)
}

// ServiceProbe is GET /v1/services/{id}/probe: what the node saw when it
// reached each replica of the service just now, as a client's request
// would (through the agent's session here, or the replica's relay node),
// and asked its readiness check.
type ServiceProbe struct {
	Service  uint64         `json:"service"`
	Node     string         `json:"node"` // the node that probed (its advertised URL)
	Replicas []ReplicaProbe `json:"replicas"`
}

// ReplicaProbe is one replica's probe.
type ReplicaProbe struct {
	Provider address.Address `json:"provider"`
	Ready    bool            `json:"ready"` // what its provider last reported to the ledger
	// OK: it answered its readiness check (an HTTP 2xx on its path, or a
	// TCP connection to its port).
	OK bool `json:"ok"`
	// Route is how the node reached it: "session" (its agent is connected
	// to this node) or "relay" (through its relay node).
	Route  string  `json:"route,omitempty"`
	Millis float64 `json:"millis"` // to the answer, or to the failure
	Status int     `json:"status,omitempty"`
	Error  string  `json:"error,omitempty"`
}
