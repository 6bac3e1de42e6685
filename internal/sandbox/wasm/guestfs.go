package wasm

import (
	"io/fs"
	"slices"
	"strings"
	"sync"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/sys"
)

// guestFS is the job's root file system: wazero's directory mount of the
// work dir with three changes.
//
//   - The guest cannot create symbolic links. wazero refuses absolute link
//     targets but accepts relative ones, and the host follows them, so a
//     guest could otherwise link "../../etc/passwd" into its root and write
//     through it. (The executor also refuses a work dir that already holds
//     a link, so the tree the guest sees has none at all.)
//   - Writes count against the job's disk budget: a write or truncate that
//     would grow the files under the work dir past it is undone and fails
//     with EIO, and the executor reports the job as over its disk limit.
//   - In deterministic mode, what the host would leak is fixed: file times
//     read as the deterministic epoch and directories list in name order
//     (ext4's order depends on a per-filesystem hash seed).
type guestFS struct {
	experimentalsys.FS
	deterministic bool
	budget        *diskBudget // nil: no limit
}

func newGuestFS(dir string, deterministic bool, budget *diskBudget) *guestFS {
	return &guestFS{FS: sysfs.DirFS(dir), deterministic: deterministic, budget: budget}
}

func (g *guestFS) OpenFile(path string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	f, errno := g.FS.OpenFile(path, flag, perm)
	if errno != 0 {
		return nil, errno
	}
	return &guestFile{File: f, fs: g}, 0
}

func (g *guestFS) Symlink(oldPath, linkName string) experimentalsys.Errno {
	return experimentalsys.EPERM
}

func (g *guestFS) Lstat(path string) (sys.Stat_t, experimentalsys.Errno) {
	st, errno := g.FS.Lstat(path)
	return g.fixStat(st), errno
}

func (g *guestFS) Stat(path string) (sys.Stat_t, experimentalsys.Errno) {
	st, errno := g.FS.Stat(path)
	return g.fixStat(st), errno
}

func (g *guestFS) fixStat(st sys.Stat_t) sys.Stat_t {
	if g.deterministic {
		st.Atim, st.Mtim, st.Ctim = epochNanos, epochNanos, epochNanos
	}
	return st
}

// guestFile is a file opened through guestFS.
type guestFile struct {
	experimentalsys.File
	fs *guestFS

	// Deterministic directory listing: all entries, sorted, read on the
	// first Readdir and handed out from next on.
	dirents []experimentalsys.Dirent
	next    int
	listed  bool
}

func (f *guestFile) Stat() (sys.Stat_t, experimentalsys.Errno) {
	st, errno := f.File.Stat()
	return f.fs.fixStat(st), errno
}

func (f *guestFile) Write(buf []byte) (int, experimentalsys.Errno) {
	if f.fs.budget == nil {
		return f.File.Write(buf)
	}
	return f.fs.budget.grow(f.File, func() (int, experimentalsys.Errno) { return f.File.Write(buf) })
}

func (f *guestFile) Pwrite(buf []byte, off int64) (int, experimentalsys.Errno) {
	if f.fs.budget == nil {
		return f.File.Pwrite(buf, off)
	}
	return f.fs.budget.grow(f.File, func() (int, experimentalsys.Errno) { return f.File.Pwrite(buf, off) })
}

func (f *guestFile) Truncate(size int64) experimentalsys.Errno {
	if f.fs.budget == nil {
		return f.File.Truncate(size)
	}
	_, errno := f.fs.budget.grow(f.File, func() (int, experimentalsys.Errno) { return 0, f.File.Truncate(size) })
	return errno
}

func (f *guestFile) Readdir(n int) ([]experimentalsys.Dirent, experimentalsys.Errno) {
	if !f.fs.deterministic {
		return f.File.Readdir(n)
	}
	// The whole listing is read from the host at once and sorted. The host
	// file is then at its end, so if it yields anything again the guest has
	// rewound it (wazero seeks it to 0 for that) and the listing restarts.
	var fresh []experimentalsys.Dirent
	if !f.listed {
		all, errno := f.File.Readdir(-1)
		if errno != 0 {
			return nil, errno
		}
		fresh = all
	} else if probe, errno := f.File.Readdir(1); errno == 0 && len(probe) > 0 {
		rest, errno := f.File.Readdir(-1)
		if errno != 0 {
			return nil, errno
		}
		fresh = append(probe, rest...)
	}
	if fresh != nil || !f.listed {
		slices.SortFunc(fresh, func(a, b experimentalsys.Dirent) int { return strings.Compare(a.Name, b.Name) })
		f.dirents, f.next, f.listed = fresh, 0, true
	}
	rest := f.dirents[f.next:]
	if n > 0 && n < len(rest) {
		rest = rest[:n]
	}
	f.next += len(rest)
	return rest, 0
}

// diskBudget bounds how much the files under a work dir may grow during a
// run. Growth is measured on the file itself (size after minus size before
// each write), so rewriting a file in place costs nothing, and deleting a
// file gives nothing back.
type diskBudget struct {
	mu       sync.Mutex
	limit    int64
	used     int64
	exceeded bool
}

// grow runs op, a write or truncate of f, and undoes it when it grows f past
// the budget.
func (b *diskBudget) grow(f experimentalsys.File, op func() (int, experimentalsys.Errno)) (int, experimentalsys.Errno) {
	b.mu.Lock()
	defer b.mu.Unlock()
	before, errno := f.Stat()
	if errno != 0 {
		return 0, errno
	}
	n, errno := op()
	after, serr := f.Stat()
	if serr != 0 {
		return n, errno
	}
	growth := after.Size - before.Size
	if growth <= 0 {
		return n, errno
	}
	if b.used+growth > b.limit {
		// The bytes written past the old end are lost; what was
		// overwritten in place stays (the job fails either way).
		f.Truncate(before.Size)
		b.exceeded = true
		return 0, experimentalsys.EIO
	}
	b.used += growth
	return n, errno
}

func (b *diskBudget) wasExceeded() bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.exceeded
}
