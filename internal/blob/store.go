package blob

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Errors a Store reports; callers test them with errors.Is. The handler
// maps them to HTTP statuses and the Client maps the statuses back.
var (
	ErrNotFound     = errors.New("blob not found")
	ErrTooLarge     = errors.New("blob too large")
	ErrHashMismatch = errors.New("blob hash mismatch")
	ErrNoSpace      = errors.New("no space left for blob")
)

// copyBufSize is the unit of streaming I/O: large enough that syscalls and
// hashing dominate nothing, small enough that many concurrent transfers
// stay cheap.
const copyBufSize = 256 << 10

var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// staleTempAge is how old an abandoned temporary file must be before
// OpenStore removes it. An upload in progress keeps touching its file, so
// this never removes a live one; it only cleans up after a crash.
const staleTempAge = time.Hour

// Store keeps blobs as files named by their hash:
//
//	<dir>/objects/ab/<64 hex>   the blob whose hash starts with 0xab
//	<dir>/tmp/                  uploads in progress (same filesystem, so renames are atomic)
//	<dir>/corrupt/              objects found not to match their name, kept for inspection
//
// A blob is visible only once it has been completely written, hashed,
// checked and fsynced. A Store is safe for concurrent use; several Stores
// (even in several processes) may share a directory.
type Store struct {
	dir     string
	maxSize int64
	// locks serialises the final step of Put against Delete and
	// quarantine for hashes sharing a first byte, so that "already
	// present" answers are exact.
	locks [256]sync.Mutex
	own   owners
}

// OpenStore opens (creating if needed) the store in dir, which by
// convention is <home>/data/blobs. maxBlobBytes bounds every blob Put
// accepts and must be positive.
func OpenStore(dir string, maxBlobBytes int64) (*Store, error) {
	if maxBlobBytes <= 0 {
		return nil, fmt.Errorf("blob store: max blob size must be positive, got %d", maxBlobBytes)
	}
	s := &Store{dir: dir, maxSize: maxBlobBytes}
	for _, d := range []string{s.objectsDir(), s.tmpDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("blob store: %w", err)
		}
	}
	s.removeStaleTemps()
	if err := s.loadOwners(); err != nil {
		return nil, fmt.Errorf("blob store: reading upload records: %w", err)
	}
	return s, nil
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// MaxBlobBytes returns the largest blob Put accepts.
func (s *Store) MaxBlobBytes() int64 { return s.maxSize }

func (s *Store) objectsDir() string { return filepath.Join(s.dir, "objects") }
func (s *Store) tmpDir() string     { return filepath.Join(s.dir, "tmp") }
func (s *Store) corruptDir() string { return filepath.Join(s.dir, "corrupt") }

func (s *Store) path(h Hash) string {
	x := h.Hex()
	return filepath.Join(s.objectsDir(), x[:2], x)
}

func (s *Store) lock(h Hash) func() {
	m := &s.locks[h[0]]
	m.Lock()
	return m.Unlock
}

func (s *Store) removeStaleTemps() {
	entries, err := os.ReadDir(s.tmpDir())
	if err != nil {
		return
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > staleTempAge {
			os.Remove(filepath.Join(s.tmpDir(), e.Name()))
		}
	}
}

// Put stores the bytes read from r until EOF and returns their hash and
// length. It streams through a temporary file while hashing, so memory use
// does not depend on the blob's size. It fails with ErrTooLarge as soon as
// r yields more than MaxBlobBytes, and, when want is non-nil, with
// ErrHashMismatch if the content hashes to something else; in both cases
// nothing is stored. Only a complete, checked, fsynced blob is renamed into
// place, so readers never see a partial one. Putting a blob that is already
// present succeeds and leaves it as it was.
func (s *Store) Put(ctx context.Context, r io.Reader, want *Hash) (Hash, int64, error) {
	h, n, _, err := s.put(ctx, r, want, s.maxSize)
	return h, n, err
}

// readError marks a failure of the reader given to Put (a client that went
// away, say), as opposed to a failure of the store.
type readError struct{ err error }

func (e *readError) Error() string { return "reading blob: " + e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// put is Put, with limit (at most MaxBlobBytes) in its place, also
// reporting whether the blob was newly created.
func (s *Store) put(ctx context.Context, r io.Reader, want *Hash, limit int64) (h Hash, n int64, created bool, err error) {
	tmp, err := os.CreateTemp(s.tmpDir(), "put-*")
	if err != nil {
		return h, 0, false, storageError("creating temporary file", err)
	}
	tmpName := tmp.Name()
	defer func() {
		if tmp != nil {
			tmp.Close()
		}
		if tmpName != "" {
			os.Remove(tmpName)
		}
	}()

	bufp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bufp)
	buf := *bufp
	hasher := sha256.New()
	for {
		if err := ctx.Err(); err != nil {
			return h, n, false, err
		}
		m, rerr := r.Read(buf)
		if m > 0 {
			if n+int64(m) > limit {
				return h, n, false, fmt.Errorf("%w: more than %d bytes, the limit of this gateway", ErrTooLarge, limit)
			}
			hasher.Write(buf[:m])
			if _, err := tmp.Write(buf[:m]); err != nil {
				return h, n, false, storageError("writing temporary file", err)
			}
			n += int64(m)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return h, n, false, &readError{rerr}
		}
	}
	hasher.Sum(h[:0])
	if want != nil && *want != h {
		return h, n, false, fmt.Errorf("%w: content hashes to %s, not %s", ErrHashMismatch, h, *want)
	}
	if err := tmp.Sync(); err != nil {
		return h, n, false, storageError("syncing temporary file", err)
	}
	if err := tmp.Close(); err != nil {
		tmp = nil
		return h, n, false, storageError("closing temporary file", err)
	}
	tmp = nil

	unlock := s.lock(h)
	defer unlock()
	final := s.path(h)
	if info, err := os.Stat(final); err == nil && info.Size() == n {
		// Already present. (A copy of the wrong size is corrupt and
		// is replaced below.) Uploading it again restarts its grace
		// period before the sweeper may collect it.
		now := time.Now()
		os.Chtimes(final, now, now)
		return h, n, false, nil
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		return h, n, false, storageError("creating object directory", err)
	}
	if err := os.Rename(tmpName, final); err != nil {
		return h, n, false, storageError("moving blob into place", err)
	}
	tmpName = ""
	if err := syncDir(filepath.Dir(final)); err != nil {
		return h, n, false, storageError("syncing object directory", err)
	}
	return h, n, true, nil
}

// storageError wraps a failure of the disk, recognising a full one.
func storageError(what string, err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("blob store: %s: %w: %w", what, ErrNoSpace, err)
	}
	return fmt.Errorf("blob store: %s: %w", what, err)
}

// syncDir makes a rename in dir durable. Windows cannot sync directories
// and does not need to.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Open returns the stored blob h for reading, and its size, or
// ErrNotFound. The bytes are as they are on disk: a caller that needs to
// trust them must hash them (the handler does).
func (s *Store) Open(h Hash) (io.ReadSeekCloser, int64, error) {
	f, size, err := s.open(h)
	if err != nil {
		return nil, 0, err
	}
	return f, size, nil
}

func (s *Store) open(h Hash) (*os.File, int64, error) {
	f, err := os.Open(s.path(h))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, fmt.Errorf("%w: %s", ErrNotFound, h)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("blob store: %w", err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("blob store: %w", err)
	}
	return f, info.Size(), nil
}

// Stat returns the size of the stored blob h, or ErrNotFound.
func (s *Store) Stat(h Hash) (int64, error) {
	info, err := os.Stat(s.path(h))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("%w: %s", ErrNotFound, h)
	}
	if err != nil {
		return 0, fmt.Errorf("blob store: %w", err)
	}
	return info.Size(), nil
}

// Delete removes the blob h, or returns ErrNotFound. Readers that already
// opened it keep reading the old copy.
func (s *Store) Delete(h Hash) error {
	defer s.lock(h)()
	err := os.Remove(s.path(h))
	s.disown(h)
	s.unmarkFetched(h)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s", ErrNotFound, h)
	}
	if err != nil {
		return fmt.Errorf("blob store: %w", err)
	}
	return nil
}

// Usage counts the stored blobs and their bytes.
func (s *Store) Usage() (blobs int, bytes int64, err error) {
	err = filepath.WalkDir(s.objectsDir(), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && isHex64(d.Name()) {
			info, err := d.Info()
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil // deleted while we walked
				}
				return err
			}
			blobs++
			bytes += info.Size()
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("blob store: usage: %w", err)
	}
	return blobs, bytes, nil
}

// quarantine moves the object h out of the way after f, opened from it,
// was found not to hash to h, so that a good copy can be put again. It
// does nothing if the object was replaced since f was opened.
func (s *Store) quarantine(h Hash, f *os.File) (string, error) {
	defer s.lock(h)()
	opened, err := f.Stat()
	if err != nil {
		return "", err
	}
	current, err := os.Lstat(s.path(h))
	if err != nil || !os.SameFile(opened, current) {
		return "", err
	}
	if err := os.MkdirAll(s.corruptDir(), 0o700); err != nil {
		return "", err
	}
	dst := filepath.Join(s.corruptDir(), fmt.Sprintf("%s.%d", h.Hex(), time.Now().UnixNano()))
	if err := os.Rename(s.path(h), dst); err != nil {
		return "", err
	}
	return dst, nil
}

// isHex64 reports whether name looks like an object file's name.
func isHex64(name string) bool {
	if len(name) != 64 {
		return false
	}
	return strings.Trim(name, "0123456789abcdef") == ""
}
