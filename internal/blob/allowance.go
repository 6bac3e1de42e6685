package blob

import (
	"cmp"
	"errors"
	"io/fs"
	"math"
	"math/bits"
	"os"
	"slices"

	"github.com/gpunet/gpunet/internal/address"
)

// What an account may keep, and taking back what it no longer pays for.
// Room in a gateway for uploads no job references yet is priced in what
// the account holds on the ledger: AllowanceFor turns that into bytes. A
// node re-reads it for every account with such uploads (internal/daemon),
// Releases the blobs jobs now reference, and Evicts what an account keeps
// beyond its allowance, so that the same tokens cannot be moved from
// account to account to buy room twice.

// DefaultUSyncPerGiB is what an account must hold, in usync, for each GiB
// of uploads no job references that a node keeps for it: 1 SYNC.
const DefaultUSyncPerGiB = 1_000_000

// AllowanceFor returns how many bytes an account that holds held usync
// may keep at usyncPerGiB usync a GiB (0: DefaultUSyncPerGiB), rounded
// down to a whole MiB: an account holding less than the price of a MiB
// gets nothing, so that dust accounts bring no room, and N accounts get
// what one account holding the same tokens gets.
func AllowanceFor(held, usyncPerGiB uint64) int64 {
	if usyncPerGiB == 0 {
		usyncPerGiB = DefaultUSyncPerGiB
	}
	const maxMiB = math.MaxInt64 >> 20
	hi, lo := bits.Mul64(held, 1024) // MiB a GiB
	if hi >= usyncPerGiB {
		return maxMiB << 20
	}
	mib, _ := bits.Div64(hi, lo, usyncPerGiB)
	return int64(min(mib, maxMiB)) << 20
}

// Accounts lists the accounts that hold uploads no job references, or
// have uploads in progress.
func (s *Store) Accounts() []address.Address {
	s.own.mu.Lock()
	defer s.own.mu.Unlock()
	out := make([]address.Address, 0, len(s.own.byAcc))
	for a := range s.own.byAcc {
		out = append(out, a)
	}
	return out
}

// Release drops the upload records of every blob referenced reports true
// for: a job keeps it now, and it no longer counts against its uploaders'
// quotas. It returns how many blobs it released. Sweep does the same for
// the blobs it walks; Release reads only the records.
func (s *Store) Release(referenced func(Hash) bool) int {
	s.own.mu.Lock()
	var hs []Hash
	for h := range s.own.byHash {
		if referenced(h) {
			hs = append(hs, h)
		}
	}
	s.own.mu.Unlock()
	for _, h := range hs {
		s.disown(h)
	}
	return len(hs)
}

// EvictResult counts what an Evict did.
type EvictResult struct {
	Dropped    int   // upload records dropped
	Deleted    int   // blobs deleted with them
	FreedBytes int64 // bytes of the deleted blobs
}

// Evict drops account a's upload records, oldest first, until what it
// holds that no job references is at most keep bytes. A blob whose last
// record goes is deleted unless referenced reports true for it or it was
// uploaded again since (by the node's token, say): nothing an account no
// longer pays for stays on disk uncounted.
func (s *Store) Evict(a address.Address, keep int64, referenced func(Hash) bool) EvictResult {
	type rec struct {
		h Hash
		ownerRec
	}
	s.own.mu.Lock()
	var recs []rec
	for h, m := range s.own.byHash {
		if r, ok := m[a]; ok {
			recs = append(recs, rec{h, r})
		}
	}
	s.own.mu.Unlock()
	slices.SortFunc(recs, func(x, y rec) int {
		if c := x.at.Compare(y.at); c != 0 {
			return c
		}
		return cmp.Compare(x.h.Hex(), y.h.Hex())
	})
	var res EvictResult
	for _, r := range recs {
		if s.UsageOf(a).Bytes <= keep {
			break
		}
		if n, deleted, ok := s.evictOne(a, r.h, referenced); ok {
			res.Dropped++
			if deleted {
				res.Deleted++
				res.FreedBytes += n
			}
		}
	}
	return res
}

// evictOne drops a's record of h, and deletes h if no record is left and
// nothing keeps it.
func (s *Store) evictOne(a address.Address, h Hash, referenced func(Hash) bool) (size int64, deleted, dropped bool) {
	unlock := s.lock(h)
	defer unlock()
	s.own.mu.Lock()
	r, ok := s.own.byHash[h][a]
	if !ok {
		s.own.mu.Unlock()
		return 0, false, false
	}
	if err := os.Remove(s.ownerPath(a, h)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.own.mu.Unlock()
		return 0, false, false // still counted; tried again next time
	}
	s.own.drop(a, h, r)
	left := len(s.own.byHash[h])
	s.own.mu.Unlock()
	if left > 0 || referenced(h) {
		return 0, false, true
	}
	info, err := os.Stat(s.path(h))
	if err != nil || info.ModTime().After(r.at) {
		// Gone already, or put again since this account's upload (its
		// record is written after the object): whoever did keeps it.
		return 0, false, true
	}
	if err := os.Remove(s.path(h)); err != nil {
		return 0, false, true
	}
	s.unmarkFetched(h)
	return info.Size(), true, true
}
