package blob

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// DefaultSweepGrace is how long a blob no job references is kept after its
// last upload. A consumer uploads a job's inputs just before submitting
// it, and a provider its outputs just before committing its result; both
// reach the chain within minutes, and a checked job's outputs are named on
// chain only at the reveal, after every replica has committed. Six hours
// leaves room for all of that and for a node that was down a while.
const DefaultSweepGrace = 6 * time.Hour

// SweepResult counts what a Sweep did.
type SweepResult struct {
	Kept       int   // blobs a job references, or still in their grace period
	Released   int   // referenced blobs whose uploaders' quotas were freed
	Deleted    int   // unreferenced blobs past their grace period
	FreedBytes int64 // bytes of the deleted blobs
}

// Sweep collects blobs no job references. A blob referenced reports true
// from referenced: it is kept, and stops counting against its uploaders'
// quotas (the job keeps it now). Any other blob whose object and every
// upload record are older than cutoff is deleted. Uploading a blob again
// restarts its grace period.
func (s *Store) Sweep(referenced func(Hash) bool, cutoff time.Time) (SweepResult, error) {
	var res SweepResult
	err := filepath.WalkDir(s.objectsDir(), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() || !isHex64(d.Name()) {
			return nil
		}
		h, err := ParseHash(hashPrefix + d.Name())
		if err != nil {
			return nil
		}
		if referenced(h) {
			res.Kept++
			if !s.lastUpload(h).IsZero() {
				s.disown(h)
				res.Released++
			}
			return nil
		}
		if n, ok := s.collect(h, cutoff); ok {
			res.Deleted++
			res.FreedBytes += n
		} else {
			res.Kept++
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("blob store: sweep: %w", err)
	}
	return res, nil
}

// collect deletes h if it and its upload records are older than cutoff.
func (s *Store) collect(h Hash, cutoff time.Time) (int64, bool) {
	unlock := s.lock(h)
	defer unlock()
	info, err := os.Stat(s.path(h))
	if err != nil || info.ModTime().After(cutoff) || s.lastUpload(h).After(cutoff) {
		return 0, false
	}
	if err := os.Remove(s.path(h)); err != nil {
		return 0, false
	}
	s.disown(h)
	s.unmarkFetched(h)
	return info.Size(), true
}
