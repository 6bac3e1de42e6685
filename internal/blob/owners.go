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
// account's quota counts its records, and the gateway's bound on all
// unreferenced uploads counts the blobs that have one; the sweeper
// (sweep.go) drops the records of blobs a job references (the job keeps
// them, the uploader no longer pays for them) and deletes unreferenced
// blobs, records and all, once their grace period has passed. The records
// are loaded into memory when the store opens.

// Quota bounds what a gateway keeps that no job references: each
// account's uploads, and all accounts' together. Zero fields take the
// defaults; negative ones are unlimited.
type Quota struct {
	// Bytes and Blobs bound one account; its Allowance (Auth) may give
	// it less.
	Bytes int64
	Blobs int
	// NodeBytes bounds the blobs all accounts uploaded that no job
	// references, together: past it, uploads are refused with
	// ErrGatewayFull until jobs reference some or they are collected.
	NodeBytes int64
}

// Default quota: room for several large jobs' inputs and outputs in
// flight for one account, and for a few such accounts on one node, far
// below a node's disk.
const (
	DefaultQuotaBytes     = 16 << 30
	DefaultQuotaBlobs     = 10000
	DefaultQuotaNodeBytes = 64 << 30
)

func (q Quota) withDefaults() Quota {
	if q.Bytes == 0 {
		q.Bytes = DefaultQuotaBytes
	}
	if q.Blobs == 0 {
		q.Blobs = DefaultQuotaBlobs
	}
	if q.NodeBytes == 0 {
		q.NodeBytes = DefaultQuotaNodeBytes
	}
	return q
}

// ErrQuota is returned when an upload would take an account past its
// quota.
var ErrQuota = errors.New("account quota exceeded")

// ErrGatewayFull is returned when an upload would take the blobs no job
// references past the gateway's bound on them (Quota.NodeBytes).
var ErrGatewayFull = errors.New("gateway full of uploads no job references")

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
	// bytes is the size of the blobs with a record (each counted once,
	// however many accounts uploaded it), inFlight the bytes of charged
	// uploads in progress.
	bytes, inFlight int64
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
	if len(m) == 0 {
		o.bytes += rec.size
	}
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

// Unreferenced returns the bytes of the blobs accounts uploaded that no
// job references (each blob once), and the bytes of uploads in progress:
// what Quota.NodeBytes bounds.
func (s *Store) Unreferenced() (bytes, inFlight int64) {
	s.own.mu.Lock()
	defer s.own.mu.Unlock()
	return s.own.bytes, s.own.inFlight
}

// basisNote appends why an account may keep what it may (Allowance.Basis)
// to a quota refusal.
func basisNote(basis string) string {
	if basis == "" {
		return ""
	}
	return "; " + basis
}

// nodeFull is the refusal of an upload that would take the gateway past
// q.NodeBytes; o.mu is held.
func (o *owners) nodeFull(n int64, q Quota) error {
	if q.NodeBytes < 0 || o.bytes+o.inFlight+n <= q.NodeBytes {
		return nil
	}
	return fmt.Errorf("%w: this node keeps at most %d bytes of uploads that no job references (it holds %d, %d more arriving); "+
		"they are freed as jobs reference them or after the gateway's grace period: retry later, or upload to another node", ErrGatewayFull, q.NodeBytes, o.bytes, o.inFlight)
}

// charge counts n more bytes of an upload by a in progress, failing with
// ErrQuota when they would take a past q (basis says why a may keep what
// it may), and with ErrGatewayFull when they would take the gateway past
// its bound.
func (s *Store) charge(a address.Address, n int64, q Quota, basis string) error {
	s.own.mu.Lock()
	defer s.own.mu.Unlock()
	u := s.own.usage(a)
	if q.Bytes >= 0 && u.Bytes+u.InFlight+n > q.Bytes {
		return fmt.Errorf("%w: account %s would hold more than %d bytes that no job references (it holds %d, %d more arriving); "+
			"they are freed when a job references them or after the gateway's grace period%s", ErrQuota, a, q.Bytes, u.Bytes, u.InFlight, basisNote(basis))
	}
	if err := s.own.nodeFull(n, q); err != nil {
		return err
	}
	u.InFlight += n
	s.own.inFlight += n
	return nil
}

// uncharge gives back n bytes charged for an upload that ended.
func (s *Store) uncharge(a address.Address, n int64) {
	s.own.mu.Lock()
	defer s.own.mu.Unlock()
	u := s.own.usage(a)
	u.InFlight -= n
	s.own.inFlight -= n
	if u.Bytes == 0 && u.Blobs == 0 && u.InFlight == 0 {
		delete(s.own.byAcc, a)
	}
}

// checkQuota fails with ErrQuota when a may not start an upload of
// declared bytes (-1: unknown) under q, and with ErrGatewayFull when the
// gateway has no room for it.
func (s *Store) checkQuota(a address.Address, declared int64, q Quota, basis string) error {
	s.own.mu.Lock()
	defer s.own.mu.Unlock()
	u := s.own.usage(a)
	if q.Blobs >= 0 && u.Blobs >= q.Blobs {
		return fmt.Errorf("%w: account %s holds %d blobs that no job references, its limit on this gateway", ErrQuota, a, u.Blobs)
	}
	if q.Bytes >= 0 {
		switch held := u.Bytes + u.InFlight; {
		case held >= q.Bytes:
			return fmt.Errorf("%w: account %s may hold %d bytes that no job references on this gateway and holds %d (%d more arriving)%s",
				ErrQuota, a, q.Bytes, u.Bytes, u.InFlight, basisNote(basis))
		case declared > 0 && held+declared > q.Bytes:
			return fmt.Errorf("%w: %d bytes declared, but account %s may hold %d bytes that no job references and holds %d (%d more arriving)%s",
				ErrQuota, declared, a, q.Bytes, u.Bytes, u.InFlight, basisNote(basis))
		}
	}
	return s.own.nodeFull(max(declared, 0), q)
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

func (s *Store) ownerPath(a address.Address, h Hash) string {
	return filepath.Join(s.ownersDir(), a.String(), h.Hex())
}

// drop forgets a's record rec of h in memory; o.mu is held.
func (o *owners) drop(a address.Address, h Hash, rec ownerRec) {
	u := o.usage(a)
	u.Bytes -= rec.size
	u.Blobs--
	if u.Bytes == 0 && u.Blobs == 0 && u.InFlight == 0 {
		delete(o.byAcc, a)
	}
	delete(o.byHash[h], a)
	if len(o.byHash[h]) == 0 {
		o.bytes -= rec.size
		delete(o.byHash, h)
	}
}

// disown drops every ownership record of h. It returns the latest upload
// time among them (zero if none).
func (s *Store) disown(h Hash) time.Time {
	s.own.mu.Lock()
	defer s.own.mu.Unlock()
	var latest time.Time
	for a, rec := range s.own.byHash[h] {
		if err := os.Remove(s.ownerPath(a, h)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			continue // keep it counted; the next sweep tries again
		}
		s.own.drop(a, h, rec)
		if rec.at.After(latest) {
			latest = rec.at
		}
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
