package blob

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/address"
)

// Ownership: which account uploaded which blob that no job references yet.
// Each record is a file
//
//	<dir>/owners/<account>/<64 hex>   holding the blob's size in decimal
//
// whose modification time is when the account last uploaded the blob. An
// account's quota counts its records; the sweeper (sweep.go) drops the
// records of blobs a job references (the job keeps them, the uploader no
// longer pays for them) and deletes unreferenced blobs, records and all,
// once their grace period has passed. The records are loaded into memory
// when the store opens.

// Quota bounds what one account may keep in a gateway that no job
// references. Zero fields take the defaults; negative ones are unlimited.
type Quota struct {
	Bytes int64
	Blobs int
}

// Default quota: room for several large jobs' inputs and outputs in
// flight, far below a node's disk.
const (
	DefaultQuotaBytes = 16 << 30
	DefaultQuotaBlobs = 10000
)

func (q Quota) withDefaults() Quota {
	if q.Bytes == 0 {
		q.Bytes = DefaultQuotaBytes
	}
	if q.Blobs == 0 {
		q.Blobs = DefaultQuotaBlobs
	}
	return q
}

// ErrQuota is returned when an upload would take an account past its
// quota.
var ErrQuota = errors.New("account quota exceeded")

type ownerRec struct {
	size int64
	at   time.Time
}

// AccountUsage is what an account holds in a store that no job references.
type AccountUsage struct {
	Bytes int64 `json:"bytes"`
	Blobs int   `json:"blobs"`
	// InFlight counts bytes of uploads in progress, charged as they
	// arrive.
	InFlight int64 `json:"in_flight"`
}

type owners struct {
	mu     sync.Mutex
	dir    string
	byAcc  map[address.Address]*AccountUsage
	byHash map[Hash]map[address.Address]ownerRec
}

func (s *Store) ownersDir() string { return filepath.Join(s.dir, "owners") }

// loadOwners reads every ownership record.
func (s *Store) loadOwners() error {
	o := &s.own
	o.dir = s.ownersDir()
	o.byAcc = make(map[address.Address]*AccountUsage)
	o.byHash = make(map[Hash]map[address.Address]ownerRec)
	if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return err
	}
	accs, err := os.ReadDir(o.dir)
	if err != nil {
		return err
	}
	for _, ad := range accs {
		a, err := address.Parse(ad.Name())
		if err != nil || !ad.IsDir() {
			continue
		}
		recs, err := os.ReadDir(filepath.Join(o.dir, ad.Name()))
		if err != nil {
			return err
		}
		for _, rd := range recs {
			h, err := ParseHash(hashPrefix + rd.Name())
			if err != nil {
				continue
			}
			p := filepath.Join(o.dir, ad.Name(), rd.Name())
			b, err := os.ReadFile(p)
			info, serr := rd.Info()
			size, perr := strconv.ParseInt(string(b), 10, 64)
			if err != nil || serr != nil || perr != nil || size < 0 {
				os.Remove(p) // torn by a crash; the blob is swept without it
				continue
			}
			o.add(a, h, ownerRec{size: size, at: info.ModTime()})
		}
	}
	return nil
}

// add records rec in memory, reporting whether it is new.
func (o *owners) add(a address.Address, h Hash, rec ownerRec) bool {
	m := o.byHash[h]
	if m == nil {
		m = make(map[address.Address]ownerRec)
		o.byHash[h] = m
	}
	_, had := m[a]
	m[a] = rec
	u := o.usage(a)
	if !had {
		u.Bytes += rec.size
		u.Blobs++
	}
	return !had
}

func (o *owners) usage(a address.Address) *AccountUsage {
	u := o.byAcc[a]
	if u == nil {
		u = &AccountUsage{}
		o.byAcc[a] = u
	}
	return u
}

// UsageOf returns what account a holds in the store that no job references.
func (s *Store) UsageOf(a address.Address) AccountUsage {
	s.own.mu.Lock()
	defer s.own.mu.Unlock()
	if u := s.own.byAcc[a]; u != nil {
		return *u
	}
	return AccountUsage{}
}

// charge counts n more bytes of an upload by a in progress, failing with
// ErrQuota when they would take a past q.
func (s *Store) charge(a address.Address, n int64, q Quota) error {
	s.own.mu.Lock()
	defer s.own.mu.Unlock()
	u := s.own.usage(a)
	if q.Bytes >= 0 && u.Bytes+u.InFlight+n > q.Bytes {
		return fmt.Errorf("%w: account %s would hold more than %d bytes that no job references (it holds %d, %d more arriving); "+
			"they are freed when a job references them or after the gateway's grace period", ErrQuota, a, q.Bytes, u.Bytes, u.InFlight)
	}
	u.InFlight += n
	return nil
}

// uncharge gives back n bytes charged for an upload that ended.
func (s *Store) uncharge(a address.Address, n int64) {
	s.own.mu.Lock()
	defer s.own.mu.Unlock()
	s.own.usage(a).InFlight -= n
}

// checkQuota fails with ErrQuota when a may not start an upload of
// declared bytes (-1: unknown).
func (s *Store) checkQuota(a address.Address, declared int64, q Quota) error {
	s.own.mu.Lock()
	defer s.own.mu.Unlock()
	u := s.own.usage(a)
	if q.Blobs >= 0 && u.Blobs >= q.Blobs {
		return fmt.Errorf("%w: account %s holds %d blobs that no job references, its limit on this gateway", ErrQuota, a, u.Blobs)
	}
	if q.Bytes >= 0 && declared > 0 && u.Bytes+u.InFlight+declared > q.Bytes {
		return fmt.Errorf("%w: %d bytes declared, but account %s may hold %d bytes that no job references and holds %d (%d more arriving)",
			ErrQuota, declared, a, q.Bytes, u.Bytes, u.InFlight)
	}
	return nil
}

// ownBlob records that a uploaded h (size bytes) now.
func (s *Store) ownBlob(a address.Address, h Hash, size int64) error {
	dir := filepath.Join(s.ownersDir(), a.String())
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return storageError("recording the blob's uploader", err)
	}
	p := filepath.Join(dir, h.Hex())
	if err := os.WriteFile(p, []byte(strconv.FormatInt(size, 10)), 0o600); err != nil {
		return storageError("recording the blob's uploader", err)
	}
	info, err := os.Stat(p)
	at := time.Now()
	if err == nil {
		at = info.ModTime()
	}
	s.own.mu.Lock()
	defer s.own.mu.Unlock()
	s.own.add(a, h, ownerRec{size: size, at: at})
	return nil
}

// disown drops every ownership record of h. It returns the latest upload
// time among them (zero if none).
func (s *Store) disown(h Hash) time.Time {
	s.own.mu.Lock()
	defer s.own.mu.Unlock()
	var latest time.Time
	for a, rec := range s.own.byHash[h] {
		if err := os.Remove(filepath.Join(s.ownersDir(), a.String(), h.Hex())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			continue // keep it counted; the next sweep tries again
		}
		u := s.own.usage(a)
		u.Bytes -= rec.size
		u.Blobs--
		if u.Bytes == 0 && u.Blobs == 0 && u.InFlight == 0 {
			delete(s.own.byAcc, a)
		}
		delete(s.own.byHash[h], a)
		if rec.at.After(latest) {
			latest = rec.at
		}
	}
	if len(s.own.byHash[h]) == 0 {
		delete(s.own.byHash, h)
	}
	return latest
}

// lastUpload returns the latest time an account uploaded h (zero if no
// record).
func (s *Store) lastUpload(h Hash) time.Time {
	s.own.mu.Lock()
	defer s.own.mu.Unlock()
	var latest time.Time
	for _, rec := range s.own.byHash[h] {
		if rec.at.After(latest) {
			latest = rec.at
		}
	}
	return latest
}
