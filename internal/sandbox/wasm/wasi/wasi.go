// Package wasi is gpunet's implementation of WASI preview 1
// (wasi_snapshot_preview1) for the wasm executor: the whole view of the
// world a job's module has, independent of the engine that runs its code.
// An engine binds Funcs as the module's imports and hands each call the
// guest's linear memory; System does the rest.
//
// Why not the engine's own WASI. wasmtime's (through wasmtime-go's
// WasiConfig) cannot replace the clock or the randomness, reports the
// host's file times, inode numbers and directory order, cannot bound what
// a job writes, and lets a guest create symbolic links; shadowing single
// imports does not help with stat, which needs the file behind an fd that
// only wasmtime's WASI knows. wazero's could be bent (the previous
// executor did), but then two engines would show a job two slightly
// different worlds. Here one implementation gives every engine the same:
//
//   - Files: the host directory Config.Root, preopened as "/" (fd 3), and
//     nothing else. Paths resolve inside it through an os.Root; absolute
//     paths and paths that climb out of it fail with EPERM, as in
//     wasmtime. The guest cannot create symbolic links (path_symlink fails
//     with EPERM, POSIX's errno for a file system without them, or ENOENT
//     or EEXIST where the link's path is itself wrong), so the tree, which
//     the executor checks has none at the start, never holds one.
//   - Disk: writes that would grow the files past Config.DiskBytes fail
//     with ENOSPC, and DiskExceeded reports it.
//   - Deterministic mode (Config.Deterministic): the clocks are virtual
//     (they start at 2000-01-01T00:00:00Z and advance 1µs per reading and by
//     the whole duration of a sleep, which returns at once, up to
//     Config.SleepLimit of sleeps in all); randomness is
//     ChaCha8 from Config.Seed; file times are virtual too (files that were
//     there at the start read as the epoch, a write or a create stamps the
//     virtual clock's time, a time the guest sets reads back), inode and
//     device numbers are numbered in the order the guest first sees the
//     files, directories list in name order with a fixed size. What the
//     guest can observe is then a function of its module, args, env,
//     inputs and seed.
//   - Standard streams: stdin is empty; stdout and stderr go to the
//     writers in Config, in the order written.
//   - No sockets, no signals: sock_* fail with ENOTSOCK or EBADF,
//     proc_raise with ENOSYS.
package wasi

import (
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// Config is what a System gives its guest.
type Config struct {
	// Args is argv, argv[0] first.
	Args []string
	// Env is the environment, "NAME=value" each, in the order given.
	Env []string
	// Root is the host directory the guest sees as "/".
	Root string
	// Stdout and Stderr receive the guest's output (nil: discarded).
	Stdout, Stderr io.Writer
	// Deterministic fixes everything the guest could tell apart between
	// two runs (see the package comment).
	Deterministic bool
	// Seed seeds the randomness of a deterministic run.
	Seed [32]byte
	// Rand is the randomness of a non-deterministic run (nil:
	// crypto/rand).
	Rand io.Reader
	// DiskBytes bounds how much the files under Root may grow (0: no
	// bound). Growth is measured on each file written, so rewriting in
	// place is free and deleting gives nothing back.
	DiskBytes int64
	// SleepLimit bounds, in deterministic mode, how long the guest may
	// sleep in all (0: no bound). A sleep returns at once there, having
	// moved the virtual clock on, so a loop that polls with sleeps would
	// otherwise run until its real timeout as fast as it can: the sleep
	// that would pass the limit stops the guest instead (the engine sees
	// ErrnoExit, and SleptOut reports it), at the same point of its run
	// on every provider. The executor sets it to the job's timeout.
	SleepLimit time.Duration
	// ReadOnly lets the guest read the files under Root and change
	// nothing there: the preopen and every fd opened from it lack the
	// rights to write, create, truncate, link, rename, remove or set
	// times, and a path_open asking to write fails with EROFS before
	// the host file is opened. Standard output and error still work.
	// A judge of other jobs' outputs runs so (the wasm executor's
	// RunReadOnly), so that the trees it compares stay as they were.
	ReadOnly bool
}

// Epoch is the time a deterministic run's clock starts at, and the time
// its files that were there at the start read as.
var Epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// System is one guest's WASI state. Its calls come from the guest's one
// thread; the accessors (ExitCode, DiskExceeded) may be called from others.
type System struct {
	cfg      Config
	root     *os.Root
	fds      map[int32]*fdEntry
	nextFD   int32
	rand     io.Reader
	argsSize uint32
	envSize  uint32

	clock *clock
	ids   *identities // deterministic mode only
	// sizes are the sizes of the files written, as far as the disk budget
	// needs them (see fileSize).
	sizes map[fileID]int64
	dirs  map[string]*os.Root // see at

	mu           sync.Mutex
	exited       bool
	exitCode     uint32
	sleptOut     bool
	diskUsed     int64
	diskExceeded bool
}

// New returns a System for cfg. Close releases it.
func New(cfg Config) (*System, error) {
	root, err := os.OpenRoot(cfg.Root)
	if err != nil {
		return nil, err
	}
	dir, err := root.Open(".")
	if err != nil {
		root.Close()
		return nil, err
	}
	if cfg.Stdout == nil {
		cfg.Stdout = io.Discard
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	s := &System{cfg: cfg, root: root, fds: map[int32]*fdEntry{}, nextFD: 4, clock: newClock(cfg.Deterministic),
		sizes: map[fileID]int64{}, dirs: map[string]*os.Root{}}
	if cfg.Deterministic {
		s.rand = rand.NewChaCha8(cfg.Seed)
		s.ids = newIdentities()
	} else if cfg.Rand != nil {
		s.rand = cfg.Rand
	} else {
		s.rand = cryptoRand{}
	}
	for _, a := range cfg.Args {
		s.argsSize += uint32(len(a)) + 1
	}
	for _, e := range cfg.Env {
		s.envSize += uint32(len(e)) + 1
	}
	s.fds[0] = &fdEntry{kind: kindStdin, base: rightsStdio}
	s.fds[1] = &fdEntry{kind: kindOut, w: cfg.Stdout, base: rightsStdio}
	s.fds[2] = &fdEntry{kind: kindOut, w: cfg.Stderr, base: rightsStdio}
	pre := &fdEntry{kind: kindDir, rel: ".", f: dir, preopen: "/", base: rightsDir, inheriting: rightsDir | rightsFile}
	if cfg.ReadOnly {
		pre.base &^= rightsChange
		pre.inheriting &^= rightsChange
	}
	if st, err := dir.Stat(); err == nil {
		pre.id, pre.hasID = hostID(st)
	}
	s.fds[3] = pre
	return s, nil
}

// Close closes every file the guest left open.
func (s *System) Close() error {
	for fd, e := range s.fds {
		if e.f != nil {
			e.f.Close()
		}
		delete(s.fds, fd)
	}
	s.forgetDirs()
	return s.root.Close()
}

// ExitCode is the code the guest passed to proc_exit, if it called it.
func (s *System) ExitCode() (code uint32, exited bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exitCode, s.exited
}

// SleptOut reports whether the guest was stopped because its sleeps would
// have passed Config.SleepLimit.
func (s *System) SleptOut() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sleptOut
}

// DiskExceeded reports whether a write was refused for the disk budget.
func (s *System) DiskExceeded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.diskExceeded
}

// fd kinds.
const (
	kindStdin = iota
	kindOut
	kindDir
	kindFile
)

// fdEntry is an open file descriptor.
type fdEntry struct {
	kind int
	// rel is the path under Root the fd was opened at ("." for Root), for
	// directories (paths are resolved from it) and files (for set_times).
	rel string
	f   *os.File // kindDir and kindFile
	// hostFD is f's descriptor (kindFile, when hasFD), for preadv and
	// pwritev; pos is the file's offset (kindFile), which every read and
	// write goes through (see rw.go).
	hostFD  int
	hasFD   bool
	pos     int64
	w       io.Writer // kindOut
	preopen string    // the guest's name for a preopened directory
	append  bool
	fdflags uint16
	read    bool // kindFile: opened for reading, writing
	write   bool

	base, inheriting uint64

	id    fileID // the host file's identity, when hasID
	hasID bool

	listing []dirent // fd_readdir's listing, from cookie 0 on
}

func (s *System) get(fd uint32) (*fdEntry, Errno) {
	e := s.fds[int32(fd)]
	if e == nil || int32(fd) < 0 {
		return nil, ErrnoBadf
	}
	return e, 0
}

// maxFDs bounds the guest's open files.
const maxFDs = 4096

func (s *System) add(e *fdEntry) (int32, Errno) {
	if len(s.fds) >= maxFDs {
		return 0, ErrnoMfile
	}
	for s.fds[s.nextFD] != nil {
		s.nextFD++
	}
	fd := s.nextFD
	s.fds[fd] = e
	s.nextFD++
	return fd, 0
}

func (s *System) remove(fd int32) {
	delete(s.fds, fd)
	if fd < s.nextFD && fd >= 3 {
		s.nextFD = fd // reuse the lowest free numbers, as POSIX does
	}
}

// resolve turns path p, relative to the directory fd, into a path under
// Root. It refuses what WASI refuses before touching the file system: a
// NUL byte (EINVAL), an empty path (ENOENT), an absolute path or one that
// climbs out of Root (EPERM).
func (s *System) resolve(fd uint32, p string) (string, Errno) {
	e, errno := s.get(fd)
	if errno != 0 {
		return "", errno
	}
	if e.kind != kindDir {
		return "", ErrnoNotdir
	}
	switch {
	case strings.IndexByte(p, 0) >= 0:
		return "", ErrnoInval
	case p == "":
		return "", ErrnoNoent
	case strings.HasPrefix(p, "/"):
		return "", ErrnoPerm
	case len(p) > 4096:
		return "", ErrnoNametoolong
	}
	// Like a capability: a path may not climb out of its directory.
	if c := path.Clean(p); c == ".." || strings.HasPrefix(c, "../") {
		return "", ErrnoPerm
	}
	rel := p
	if e.rel != "." {
		rel = e.rel + "/" + p
	}
	return rel, 0
}

// resolveFor is resolve for an operation that needs right on the
// directory fd.
func (s *System) resolveFor(fd uint32, p string, right uint64) (string, Errno) {
	if e, errno := s.get(fd); errno != 0 {
		return "", errno
	} else if e.kind == kindDir && e.base&right == 0 {
		return "", ErrnoNotcapable
	}
	return s.resolve(fd, p)
}

// getFor is get for an operation that needs right on fd: ENOTCAPABLE
// without it (rights can be dropped, never gained).
func (s *System) getFor(fd uint32, right uint64) (*fdEntry, Errno) {
	e, errno := s.get(fd)
	if errno != 0 {
		return nil, errno
	}
	if e.base&right == 0 {
		return nil, ErrnoNotcapable
	}
	return e, 0
}

// cleanRel is rel without trailing slashes or "." and ".." elements: the
// key under which its directory entry is known.
func cleanRel(rel string) string { return path.Clean(rel) }

// parentOf is the directory holding rel's entry.
func parentOf(rel string) string { return path.Dir(cleanRel(rel)) }

// chargeDisk records growth bytes against the budget; false when it would
// pass it.
func (s *System) chargeDisk(growth int64) bool {
	return s.disk(growth, true)
}

// fitsDisk is whether growth bytes would fit in the budget, without
// recording them; a refusal counts as DiskExceeded.
func (s *System) fitsDisk(growth int64) bool {
	return s.disk(growth, false)
}

func (s *System) disk(growth int64, charge bool) bool {
	if s.cfg.DiskBytes <= 0 || growth <= 0 {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if growth > s.cfg.DiskBytes-s.diskUsed {
		s.diskExceeded = true
		return false
	}
	if charge {
		s.diskUsed += growth
	}
	return true
}

// cryptoRand is crypto/rand.Read as an io.Reader that never fails.
type cryptoRand struct{}

// identities are a deterministic run's stand-ins for what the host would
// leak about its files: inode numbers, numbered in the order the guest
// first sees each file, and times, kept per file.
type identities struct {
	ino   map[fileID]uint64
	times map[fileID]*fileTimes
	nlink map[fileID]uint64 // of files the guest linked or unlinked
}

type fileTimes struct{ atim, mtim, ctim int64 }

func newIdentities() *identities {
	return &identities{ino: map[fileID]uint64{}, times: map[fileID]*fileTimes{}, nlink: map[fileID]uint64{}}
}

// links is the link count of a file: 1 unless the guest made or removed
// hard links to it (the host's count would tell how the provider placed
// the inputs).
func (ids *identities) links(id fileID) uint64 {
	if n, ok := ids.nlink[id]; ok {
		return n
	}
	return 1
}

func (ids *identities) link(id fileID) { ids.nlink[id] = ids.links(id) + 1 }

func (ids *identities) unlink(id fileID) {
	if n := ids.links(id); n > 1 {
		ids.nlink[id] = n - 1
	} else {
		delete(ids.nlink, id)
	}
}

// inode is the virtual inode number of the host file id.
func (ids *identities) inode(id fileID) uint64 {
	n, ok := ids.ino[id]
	if !ok {
		n = uint64(len(ids.ino)) + 1
		ids.ino[id] = n
	}
	return n
}

// timesOf is the virtual times of the host file id (the epoch for a file
// the guest has not touched).
func (ids *identities) timesOf(id fileID) *fileTimes {
	t, ok := ids.times[id]
	if !ok {
		e := Epoch.UnixNano()
		t = &fileTimes{e, e, e}
		ids.times[id] = t
	}
	return t
}

// modified stamps a file the guest changed with the virtual time now.
func (s *System) modified(id fileID, ok bool) {
	if s.ids == nil || !ok {
		return
	}
	now := s.clock.stamp()
	t := s.ids.timesOf(id)
	t.mtim, t.ctim = now, now
}

// modifiedPath stamps the file or directory at rel, if it exists.
func (s *System) modifiedPath(rel string) {
	if s.ids == nil {
		return
	}
	if st, err := s.root.Lstat(cleanRel(rel)); err == nil {
		s.modified(hostID(st))
	}
}

// modifiedFD stamps the file open at e, after a write.
func (s *System) modifiedFD(e *fdEntry) { s.modified(e.id, e.hasID) }

// errnoOf maps an error from the os package to an errno.
func errnoOf(err error) Errno {
	if err == nil {
		return 0
	}
	if errno, ok := hostErrno(err); ok {
		return errno
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "path escapes from parent"):
		return ErrnoPerm
	case errors.Is(err, os.ErrNotExist):
		return ErrnoNoent
	case errors.Is(err, os.ErrExist):
		return ErrnoExist
	case errors.Is(err, os.ErrPermission):
		return ErrnoAcces
	case errors.Is(err, os.ErrInvalid):
		return ErrnoInval
	}
	return ErrnoIo
}

// sortedNames sorts names, for listings.
func sortedNames(names []string) []string {
	slices.Sort(names)
	return names
}

// Version names this implementation's behaviour where a guest can see it:
// it changes whenever a deterministic run could compute something else
// (a different errno, clock step, stat field), so that replicas that
// compare outputs run the same one.
const Version = "1"
