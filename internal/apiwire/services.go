package apiwire

import (
	"crypto/sha256"
	"encoding/binary"

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
