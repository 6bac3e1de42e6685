package apiwire

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

// JobList is GET /v1/jobs and GET /v1/providers/{addr}/jobs.
type JobList struct {
	Jobs       []*ledger.Job `json:"jobs"`
	NextCursor string        `json:"next_cursor"`
	Height     uint64        `json:"height"`
}

// LogChunk is one piece of a job's live log.
type LogChunk struct {
	Seq      uint64          `json:"seq"`
	Provider address.Address `json:"provider"`
	Data     []byte          `json:"data"` // age-encrypted to the job's owner
}

// LogPage is GET /v1/jobs/{id}/logs.
type LogPage struct {
	Chunks []LogChunk `json:"chunks"`
	// Next is the seq to ask from next time.
	Next uint64 `json:"next"`
	// Dropped counts chunks no longer held (the relay keeps the latest).
	Dropped uint64 `json:"dropped"`
}

// LogPosted is the answer to a posted chunk.
type LogPosted struct {
	Next uint64 `json:"next"` // the seq the next chunk of the job gets
}

// LogSignBytes is what a provider signs to post chunk seq of job id
// (POST /v1/jobs/{id}/logs, header X-Gpunet-Signature).
func LogSignBytes(job, seq uint64, data []byte) []byte {
	sum := sha256.Sum256(data)
	b := []byte("gpunet/log/v1\x00")
	b = binary.BigEndian.AppendUint64(b, job)
	b = binary.BigEndian.AppendUint64(b, seq)
	return append(b, sum[:]...)
}
