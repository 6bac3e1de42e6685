package wasi

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"
)

func filetypeOf(mode fs.FileMode) uint8 {
	switch {
	case mode.IsDir():
		return filetypeDirectory
	case mode.IsRegular():
		return filetypeRegularFile
	case mode&fs.ModeSymlink != 0:
		return filetypeSymbolicLink
	case mode&fs.ModeCharDevice != 0:
		return filetypeCharacterDevice
	case mode&fs.ModeDevice != 0:
		return 1 // block device
	case mode&fs.ModeSocket != 0:
		return 6 // stream socket
	}
	return filetypeUnknown
}

// deterministicDirSize is the size a deterministic run reports for every
// directory (file systems differ: ext4 says 4096, btrfs the names' length).
const deterministicDirSize = 4096

// putFilestat writes fi as a filestat at p.
func (s *System) putFilestat(m Memory, p uint32, fi os.FileInfo) {
	ft := filetypeOf(fi.Mode())
	size := uint64(fi.Size())
	var dev, ino, nlink uint64
	var atim, mtim, ctim int64
	if s.ids != nil {
		dev, nlink = 1, 1
		if id, ok := hostID(fi); ok {
			ino = s.ids.inode(id)
			t := s.ids.timesOf(id)
			atim, mtim, ctim = t.atim, t.mtim, t.ctim
			if ft != filetypeDirectory {
				nlink = s.ids.links(id)
			}
		} else {
			atim, mtim, ctim = Epoch.UnixNano(), Epoch.UnixNano(), Epoch.UnixNano()
		}
		if ft == filetypeDirectory {
			size = deterministicDirSize
		}
	} else {
		dev, ino, nlink, atim, mtim, ctim = hostStat(fi)
	}
	b := m.slice(p, sizeofFilestat)
	clear(b)
	m.putU64(p, dev)
	m.putU64(p+8, ino)
	m.putU8(p+16, ft)
	m.putU64(p+24, nlink)
	m.putU64(p+32, size)
	m.putU64(p+40, uint64(atim))
	m.putU64(p+48, uint64(mtim))
	m.putU64(p+56, uint64(ctim))
}

func (s *System) fdFdstatGet(m Memory, fd, p uint32) Errno {
	e, errno := s.get(fd)
	if errno != 0 {
		return errno
	}
	var ft uint8
	switch e.kind {
	case kindStdin, kindOut:
		// Like a terminal to isatty, so that C's stdio flushes each line
		// and the job's log streams as it is written.
		ft = filetypeCharacterDevice
	case kindDir:
		ft = filetypeDirectory
	default:
		ft = filetypeRegularFile
	}
	clear(m.slice(p, sizeofFdstat))
	m.putU8(p, ft)
	m.putU16(p+2, e.fdflags)
	m.putU64(p+8, e.base)
	m.putU64(p+16, e.inheriting)
	return 0
}

func (s *System) fdFdstatSetFlags(fd, flags uint32) Errno {
	e, errno := s.getFor(fd, rightFdFdstatSetFlags)
	if errno != 0 {
		return errno
	}
	if flags&^(fdflagAppend|fdflagDsync|fdflagNonblock|fdflagRsync|fdflagSync) != 0 {
		return ErrnoInval
	}
	e.fdflags = uint16(flags)
	e.append = flags&fdflagAppend != 0
	return 0
}

func (s *System) fdFdstatSetRights(fd uint32, base, inheriting uint64) Errno {
	e, errno := s.get(fd)
	if errno != 0 {
		return errno
	}
	if base&^e.base != 0 || inheriting&^e.inheriting != 0 {
		return ErrnoNotcapable // rights can only be dropped
	}
	e.base, e.inheriting = base, inheriting
	return 0
}

func (s *System) fdFilestatGet(m Memory, fd, p uint32) Errno {
	e, errno := s.getFor(fd, rightFdFilestatGet)
	if errno != 0 {
		return errno
	}
	if e.f == nil {
		clear(m.slice(p, sizeofFilestat))
		m.putU8(p+16, filetypeCharacterDevice)
		return 0
	}
	fi, err := e.f.Stat()
	if err != nil {
		return errnoOf(err)
	}
	s.putFilestat(m, p, fi)
	return 0
}

// file is e as an open regular file; EBADF for anything else (stdio, a
// directory), or EISDIR where POSIX says so.
func file(e *fdEntry) (*os.File, Errno) {
	if e.kind != kindFile {
		return nil, ErrnoBadf
	}
	return e.f, 0
}

// grow runs op, which may grow f, and keeps the growth within the disk
// budget: over it, f is cut back to its old size and op fails with ENOSPC.
func (s *System) grow(e *fdEntry, op func() (int, error)) (int, Errno) {
	if s.cfg.DiskBytes <= 0 {
		n, err := op()
		return n, errnoOf(err)
	}
	before, err := e.f.Stat()
	if err != nil {
		return 0, errnoOf(err)
	}
	n, err := op()
	after, serr := e.f.Stat()
	if serr != nil {
		delete(s.sizes, e.id)
		return n, errnoOf(err)
	}
	if !s.chargeDisk(after.Size() - before.Size()) {
		e.f.Truncate(before.Size())
		s.noteSize(e, before.Size())
		return 0, ErrnoNospc
	}
	s.noteSize(e, after.Size())
	return n, errnoOf(err)
}

func (s *System) fdFilestatSetSize(fd uint32, size uint64) Errno {
	e, errno := s.getFor(fd, rightFdFilestatSetSize)
	if errno != 0 {
		return errno
	}
	f, errno := file(e)
	if errno != 0 {
		return errno
	}
	if int64(size) < 0 {
		return ErrnoInval
	}
	if !e.write {
		return ErrnoBadf
	}
	_, errno = s.grow(e, func() (int, error) { return 0, f.Truncate(int64(size)) })
	if errno == 0 {
		s.modifiedFD(e)
	}
	return errno
}

func (s *System) fdAllocate(fd uint32, off, n uint64) Errno {
	e, errno := s.getFor(fd, rightFdAllocate)
	if errno != 0 {
		return errno
	}
	f, errno := file(e)
	if errno != 0 {
		return errno
	}
	end := off + n
	if int64(off) < 0 || int64(n) < 0 || int64(end) < 0 {
		return ErrnoInval
	}
	if !e.write {
		return ErrnoBadf
	}
	fi, err := f.Stat()
	if err != nil {
		return errnoOf(err)
	}
	if int64(end) <= fi.Size() {
		return 0
	}
	_, errno = s.grow(e, func() (int, error) { return 0, f.Truncate(int64(end)) })
	if errno == 0 {
		s.modifiedFD(e)
	}
	return errno
}

func (s *System) fdAdvise(fd, advice uint32) Errno {
	e, errno := s.getFor(fd, rightFdAdvise)
	if errno != 0 {
		return errno
	}
	if advice > 5 {
		return ErrnoInval
	}
	if e.kind == kindDir {
		return ErrnoBadf
	}
	return 0
}

// fdSync is fd_sync and fd_datasync: nothing to do, as a job's files live
// only as long as the job.
func (s *System) fdSync(fd uint32) Errno {
	_, errno := s.get(fd)
	return errno
}

func (s *System) fdClose(fd uint32) Errno {
	e, errno := s.get(fd)
	if errno != 0 {
		return errno
	}
	if e.f != nil {
		e.f.Close()
	}
	s.remove(int32(fd))
	return 0
}

func (s *System) fdRenumber(from, to uint32) Errno {
	e, errno := s.get(from)
	if errno != 0 {
		return errno
	}
	old, errno := s.get(to)
	if errno != 0 {
		return errno
	}
	if from == to {
		return 0
	}
	if old.f != nil {
		old.f.Close()
	}
	s.fds[int32(to)] = e
	s.remove(int32(from))
	return 0
}

func (s *System) fdPrestatGet(m Memory, fd, p uint32) Errno {
	e, errno := s.get(fd)
	if errno != 0 {
		return errno
	}
	if e.preopen == "" {
		return ErrnoBadf
	}
	clear(m.slice(p, sizeofPrestat))
	m.putU32(p+4, uint32(len(e.preopen)))
	return 0
}

func (s *System) fdPrestatDirName(m Memory, fd, p, n uint32) Errno {
	e, errno := s.get(fd)
	if errno != 0 {
		return errno
	}
	if e.preopen == "" {
		return ErrnoBadf
	}
	if n < uint32(len(e.preopen)) {
		return ErrnoNametoolong
	}
	copy(m.slice(p, uint32(len(e.preopen))), e.preopen)
	return 0
}

// validTimes checks fst_flags: a time and "now" for the same time conflict.
func validTimes(flags uint32) bool {
	if flags&^(fstflagAtim|fstflagAtimNow|fstflagMtim|fstflagMtimNow) != 0 {
		return false
	}
	return flags&(fstflagAtim|fstflagAtimNow) != fstflagAtim|fstflagAtimNow &&
		flags&(fstflagMtim|fstflagMtimNow) != fstflagMtim|fstflagMtimNow
}

// setTimes applies set_times to the file rel, whose host info is fi.
func (s *System) setTimes(rel string, fi os.FileInfo, atim, mtim int64, flags uint32) Errno {
	if s.ids != nil {
		id, ok := hostID(fi)
		if !ok {
			return 0
		}
		now := s.clock.stamp()
		t := s.ids.timesOf(id)
		switch {
		case flags&fstflagAtim != 0:
			t.atim = atim
		case flags&fstflagAtimNow != 0:
			t.atim = now
		}
		switch {
		case flags&fstflagMtim != 0:
			t.mtim = mtim
		case flags&fstflagMtimNow != 0:
			t.mtim = now
		}
		t.ctim = now
		return 0
	}
	var a, mt time.Time // zero: unchanged
	now := time.Now()
	switch {
	case flags&fstflagAtim != 0:
		a = time.Unix(0, atim)
	case flags&fstflagAtimNow != 0:
		a = now
	}
	switch {
	case flags&fstflagMtim != 0:
		mt = time.Unix(0, mtim)
	case flags&fstflagMtimNow != 0:
		mt = now
	}
	if a.IsZero() && mt.IsZero() {
		return 0
	}
	return errnoOf(s.root.Chtimes(rel, a, mt))
}

func (s *System) fdFilestatSetTimes(fd uint32, atim, mtim int64, flags uint32) Errno {
	e, errno := s.getFor(fd, rightFdFilestatSetTimes)
	if errno != 0 {
		return errno
	}
	if !validTimes(flags) {
		return ErrnoInval
	}
	if e.f == nil {
		return ErrnoBadf
	}
	fi, err := e.f.Stat()
	if err != nil {
		return errnoOf(err)
	}
	return s.setTimes(e.rel, fi, atim, mtim, flags)
}

func (s *System) pathFilestatSetTimes(fd uint32, p string, atim, mtim int64, flags uint32) Errno {
	rel, errno := s.resolveFor(fd, p, rightPathFilestatSetTimes)
	if errno != 0 {
		return errno
	}
	if !validTimes(flags) {
		return ErrnoInval
	}
	fi, err := s.root.Stat(rel)
	if err != nil {
		return errnoOf(err)
	}
	return s.setTimes(cleanRel(rel), fi, atim, mtim, flags)
}

func (s *System) pathFilestatGet(m Memory, fd uint32, p string, buf uint32) Errno {
	rel, errno := s.resolveFor(fd, p, rightPathFilestatGet)
	if errno != 0 {
		return errno
	}
	dir, name := s.at(rel)
	fi, err := dir.Stat(name)
	if err != nil {
		return errnoOf(err)
	}
	s.putFilestat(m, buf, fi)
	return 0
}

// readRights are the rights that ask path_open for a file open for
// reading; FD_WRITE asks for one open for writing (as wasmtime reads them).
const readRights = rightFdRead | rightFdReaddir

func (s *System) pathOpen(m Memory, fd uint32, p string, oflags uint32, base, inheriting uint64, fdflags uint32, fdPtr uint32) Errno {
	rel, errno := s.resolveFor(fd, p, rightPathOpen)
	if errno != 0 {
		return errno
	}
	parent := s.fds[int32(fd)]
	if oflags&^(oflagCreat|oflagDirectory|oflagExcl|oflagTrunc) != 0 || fdflags&^(fdflagAppend|fdflagDsync|fdflagNonblock|fdflagRsync|fdflagSync) != 0 {
		return ErrnoInval
	}
	creat, excl, trunc := oflags&oflagCreat != 0, oflags&oflagExcl != 0, oflags&oflagTrunc != 0
	if (creat && parent.base&rightPathCreateFile == 0) || (trunc && parent.base&rightPathFilestatSetSize == 0) {
		return ErrnoNotcapable
	}
	wantDir := oflags&oflagDirectory != 0
	write := base&rightFdWrite != 0 || trunc
	if write && s.cfg.ReadOnly {
		return ErrnoRofs // not even opened for writing on the host
	}
	read := base&readRights != 0 || !write
	base &= parent.inheriting
	inheriting &= parent.inheriting

	dir, name := s.at(rel)
	fi, err := dir.Stat(name)
	switch {
	case err == nil && creat && excl:
		return ErrnoExist
	case err == nil && fi.IsDir():
		// Asked for as a directory, the rights are what its files may get;
		// else writing to a directory is refused as open(2) does.
		if trunc || base&rightFdWrite != 0 {
			return ErrnoIsdir
		}
		f, err := dir.Open(name)
		if err != nil {
			return errnoOf(err)
		}
		e := &fdEntry{kind: kindDir, rel: cleanRel(rel), f: f, fdflags: uint16(fdflags), base: base & rightsDir, inheriting: inheriting}
		e.id, e.hasID = hostID(fi)
		return s.opened(m, e, fdPtr)
	case err == nil && wantDir:
		return ErrnoNotdir
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return errnoOf(err)
	case err != nil && (!creat || wantDir || strings.HasSuffix(rel, "/")):
		if creat && wantDir {
			return ErrnoInval
		}
		if creat && strings.HasSuffix(rel, "/") {
			return ErrnoIsdir // POSIX: O_CREAT on a name ending in '/'
		}
		return errnoOf(err)
	}
	created := err != nil
	flag := os.O_RDONLY
	switch {
	case read && write:
		flag = os.O_RDWR
	case write:
		flag = os.O_WRONLY
	}
	if creat {
		flag |= os.O_CREATE
	}
	if excl {
		flag |= os.O_EXCL
	}
	if trunc {
		flag |= os.O_TRUNC
	}
	f, err := dir.OpenFile(name, flag, 0o644)
	if err != nil {
		return errnoOf(err)
	}
	e := &fdEntry{kind: kindFile, rel: cleanRel(rel), f: f, read: read, write: write, fdflags: uint16(fdflags),
		append: fdflags&fdflagAppend != 0, base: base & rightsFile, inheriting: inheriting}
	e.hostFD, e.hasFD = hostFD(f)
	if fi, err := f.Stat(); err == nil {
		e.id, e.hasID = hostID(fi)
		s.noteSize(e, fi.Size())
	}
	if created || (trunc && fi.Size() > 0) {
		s.modifiedFD(e)
		if created {
			if s.ids != nil && e.hasID {
				t := s.ids.timesOf(e.id)
				t.atim = t.mtim
			}
			s.modifiedPath(parentOf(rel))
		}
	}
	return s.opened(m, e, fdPtr)
}

func (s *System) opened(m Memory, e *fdEntry, fdPtr uint32) (errno Errno) {
	m.slice(fdPtr, 4) // a fault before the fd is taken
	fd, errno := s.add(e)
	if errno != 0 {
		e.f.Close()
		return errno
	}
	m.putU32(fdPtr, uint32(fd))
	return 0
}

func (s *System) pathCreateDirectory(fd uint32, p string) Errno {
	rel, errno := s.resolveFor(fd, p, rightPathCreateDirectory)
	if errno != 0 {
		return errno
	}
	if err := s.root.Mkdir(rel, 0o755); err != nil {
		return errnoOf(err)
	}
	s.modifiedPath(rel)
	s.modifiedPath(parentOf(rel))
	return 0
}

func (s *System) pathRemoveDirectory(fd uint32, p string) Errno {
	rel, errno := s.resolveFor(fd, p, rightPathRemoveDirectory)
	if errno != 0 {
		return errno
	}
	fi, err := s.root.Lstat(rel)
	if err != nil {
		return errnoOf(err)
	}
	if !fi.IsDir() {
		return ErrnoNotdir
	}
	c := cleanRel(rel)
	if c == "." {
		return ErrnoBusy // the directory itself
	}
	s.forgetDirs()
	if err := s.root.Remove(c); err != nil {
		if errno := errnoOf(err); errno == ErrnoExist {
			return ErrnoNotempty // some systems say EEXIST
		} else {
			return errno
		}
	}
	s.modifiedPath(parentOf(rel))
	return 0
}

func (s *System) pathUnlinkFile(fd uint32, p string) Errno {
	rel, errno := s.resolveFor(fd, p, rightPathUnlinkFile)
	if errno != 0 {
		return errno
	}
	fi, err := s.root.Lstat(rel)
	if err != nil {
		return errnoOf(err)
	}
	if fi.IsDir() {
		return ErrnoIsdir
	}
	if strings.HasSuffix(rel, "/") {
		return ErrnoNotdir
	}
	if err := s.root.Remove(rel); err != nil {
		return errnoOf(err)
	}
	if s.ids != nil {
		if id, ok := hostID(fi); ok {
			s.ids.unlink(id)
			s.modified(id, ok)
		}
	}
	s.modifiedPath(parentOf(rel))
	return 0
}

func (s *System) pathRename(fd uint32, oldPath string, newFD uint32, newPath string) Errno {
	oldRel, errno := s.resolveFor(fd, oldPath, rightPathRenameSource)
	if errno != 0 {
		return errno
	}
	newRel, errno := s.resolveFor(newFD, newPath, rightPathRenameTarget)
	if errno != 0 {
		return errno
	}
	fi, err := s.root.Lstat(oldRel)
	if err != nil {
		return errnoOf(err)
	}
	if !fi.IsDir() && strings.HasSuffix(newRel, "/") {
		return ErrnoNotdir
	}
	oc, nc := cleanRel(oldRel), cleanRel(newRel)
	if oc == "." || nc == "." {
		return ErrnoBusy
	}
	s.forgetDirs() // what a path names may change
	if to, err := s.root.Lstat(nc); err == nil && to.IsDir() && oc != nc {
		// rename(2) replaces an empty directory; os.Rename refuses any.
		if !fi.IsDir() {
			return ErrnoIsdir
		}
		if err := s.root.Remove(nc); err != nil {
			if errno := errnoOf(err); errno == ErrnoExist {
				return ErrnoNotempty
			} else {
				return errno
			}
		}
	} else if err == nil && fi.IsDir() && !to.IsDir() {
		return ErrnoNotdir
	}
	if err := s.root.Rename(oc, nc); err != nil {
		return errnoOf(err)
	}
	if s.ids != nil {
		if id, ok := hostID(fi); ok {
			s.ids.timesOf(id).ctim = s.clock.stamp()
		}
	}
	s.modifiedPath(parentOf(oc))
	s.modifiedPath(parentOf(nc))
	return 0
}

func (s *System) pathLink(oldFD uint32, oldPath string, newFD uint32, newPath string) Errno {
	oldRel, errno := s.resolveFor(oldFD, oldPath, rightPathLinkSource)
	if errno != 0 {
		return errno
	}
	newRel, errno := s.resolveFor(newFD, newPath, rightPathLinkTarget)
	if errno != 0 {
		return errno
	}
	fi, err := s.root.Lstat(oldRel)
	if err != nil {
		return errnoOf(err)
	}
	if fi.IsDir() {
		return ErrnoPerm // no hard links to directories, as on Linux
	}
	if strings.HasSuffix(oldRel, "/") {
		return ErrnoNotdir // a file named as a directory
	}
	if strings.HasSuffix(newRel, "/") {
		if _, err := s.root.Lstat(cleanRel(newRel)); err == nil {
			return ErrnoExist
		}
		return ErrnoNoent // a link's name cannot end in '/'
	}
	if err := s.root.Link(oldRel, newRel); err != nil {
		return errnoOf(err)
	}
	if s.ids != nil {
		if id, ok := hostID(fi); ok {
			s.ids.link(id)
			s.ids.timesOf(id).ctim = s.clock.stamp()
		}
	}
	s.modifiedPath(parentOf(newRel))
	return 0
}

// pathSymlink refuses to create symbolic links: with EPERM, POSIX's errno
// for a file system that has none, once the link's own path is known to be
// right (else ENOENT, ENOTDIR or EEXIST, as symlink(2) would say).
func (s *System) pathSymlink(target string, fd uint32, p string) Errno {
	if strings.IndexByte(target, 0) >= 0 {
		return ErrnoInval
	}
	rel, errno := s.resolveFor(fd, p, rightPathSymlink)
	if errno != 0 {
		return errno
	}
	if _, err := s.root.Lstat(rel); err == nil {
		return ErrnoExist
	} else if !errors.Is(err, fs.ErrNotExist) {
		return errnoOf(err)
	}
	if strings.HasSuffix(rel, "/") {
		return ErrnoNoent // a link's name cannot end in '/'
	}
	fi, err := s.root.Stat(parentOf(rel))
	switch {
	case err != nil:
		return errnoOf(err)
	case !fi.IsDir():
		return ErrnoNotdir
	case target == "":
		return ErrnoNoent
	}
	return ErrnoPerm
}

// pathReadlink: there are no symbolic links, so EINVAL for any file that
// exists (readlink(2) on a file that is not a link).
func (s *System) pathReadlink(m Memory, fd uint32, p string, usedPtr uint32) Errno {
	rel, errno := s.resolveFor(fd, p, rightPathReadlink)
	if errno != 0 {
		return errno
	}
	if _, err := s.root.Lstat(rel); err != nil {
		return errnoOf(err)
	}
	return ErrnoInval
}

// dirent is one entry of a directory listing.
type dirent struct {
	name string
	ino  uint64
	typ  uint8
}

// list reads the directory e: ".", "..", then its entries in name order.
func (s *System) list(e *fdEntry) ([]dirent, Errno) {
	if _, err := e.f.Seek(0, io.SeekStart); err != nil {
		return nil, errnoOf(err)
	}
	names, err := e.f.Readdirnames(-1)
	if err != nil {
		return nil, errnoOf(err)
	}
	sortedNames(names)
	ino := func(rel string, fi os.FileInfo) uint64 {
		if s.ids != nil {
			if id, ok := hostID(fi); ok {
				return s.ids.inode(id)
			}
			return 0
		}
		_, n, _, _, _, _ := hostStat(fi)
		return n
	}
	out := make([]dirent, 0, len(names)+2)
	self, err := e.f.Stat()
	if err != nil {
		return nil, errnoOf(err)
	}
	out = append(out, dirent{".", ino(e.rel, self), filetypeDirectory})
	up := self
	if e.rel != "." {
		if fi, err := s.root.Stat(path.Dir(e.rel)); err == nil {
			up = fi
		}
	}
	out = append(out, dirent{"..", ino(path.Dir(e.rel), up), filetypeDirectory})
	dirFD, hasFD := hostFD(e.f)
	for _, n := range names {
		if hasFD {
			// One fstatat in the directory open at e, rather than a walk
			// from the root (three calls) for each entry: n is a name from
			// the directory itself, and nothing is followed.
			id, hostIno, typ, err := statAt(dirFD, n)
			if err != nil {
				continue // removed meanwhile
			}
			if s.ids != nil {
				hostIno = s.ids.inode(id)
			}
			out = append(out, dirent{n, hostIno, typ})
			continue
		}
		rel := n
		if e.rel != "." {
			rel = e.rel + "/" + n
		}
		fi, err := s.root.Lstat(rel)
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, dirent{n, ino(rel, fi), filetypeOf(fi.Mode())})
	}
	return out, 0
}

func (s *System) fdReaddir(m Memory, fd, buf, bufLen uint32, cookie uint64, usedPtr uint32) Errno {
	e, errno := s.getFor(fd, rightFdReaddir)
	if errno != 0 {
		return errno
	}
	if e.kind != kindDir {
		return ErrnoNotdir
	}
	if cookie == 0 || e.listing == nil {
		if e.listing, errno = s.list(e); errno != 0 {
			return errno
		}
	}
	out := m.slice(buf, bufLen)
	used := uint32(0)
	for i := cookie; i < uint64(len(e.listing)) && used < bufLen; i++ {
		d := e.listing[i]
		var hdr [sizeofDirent]byte
		le := Memory(hdr[:])
		le.putU64(0, i+1)
		le.putU64(8, d.ino)
		le.putU32(16, uint32(len(d.name)))
		le.putU8(20, d.typ)
		entry := append(hdr[:], d.name...)
		used += uint32(copy(out[used:], entry)) // the last may be cut short
	}
	m.putU32(usedPtr, used)
	return 0
}

// pollOneoff waits for the first of its subscriptions: files and the
// standard streams are always ready (stdin at its end), so it only sleeps
// when all it waits for is clocks, until the earliest. A deterministic
// guest whose sleeps would pass Config.SleepLimit is stopped there
// (SleptOut).
func (s *System) pollOneoff(m Memory, in, out, n, neventsPtr uint32) Errno {
	if n == 0 {
		return ErrnoInval
	}
	if n > 1<<16 {
		return ErrnoInval
	}
	subs := m.slice(in, n*sizeofSubscription)
	evs := m.slice(out, n*sizeofEvent)
	_ = subs
	type clockSub struct {
		i  uint32
		at int64 // absolute, on its clock
		id uint32
	}
	var clocks []clockSub
	nev := uint32(0)
	event := func(userdata uint64, errno Errno, typ uint8, hangup bool) {
		p := out + nev*sizeofEvent
		clear(evs[nev*sizeofEvent : (nev+1)*sizeofEvent])
		m.putU64(p, userdata)
		m.putU16(p+8, uint16(errno))
		m.putU8(p+10, typ)
		if hangup {
			m.putU16(p+24, eventrwflagHangup)
		}
		nev++
	}
	for i := range n {
		p := in + i*sizeofSubscription
		userdata := m.u64(p)
		switch tag := m.slice(p+8, 1)[0]; tag {
		case eventtypeClock:
			id := m.u32(p + 16)
			timeout := int64(m.u64(p + 24))
			flags := m.u16(p + 40)
			now, ok := s.clock.now(id)
			if !ok {
				event(userdata, ErrnoInval, tag, false)
				continue
			}
			at := timeout
			if flags&subclockAbstime == 0 {
				at = now + timeout
			}
			clocks = append(clocks, clockSub{i, at, id})
		case eventtypeFdRead, eventtypeFdWrite:
			e, errno := s.get(m.u32(p + 16))
			switch {
			case errno != 0:
				event(userdata, errno, tag, false)
			case e.kind == kindDir:
				event(userdata, ErrnoBadf, tag, false)
			default:
				event(userdata, 0, tag, e.kind == kindStdin && tag == eventtypeFdRead)
			}
		default:
			event(userdata, ErrnoInval, tag, false)
		}
	}
	if nev == 0 && len(clocks) > 0 {
		// Sleep until the earliest clock, then report those due.
		first := clocks[0]
		for _, c := range clocks[1:] {
			if now, _ := s.clock.now(c.id); c.at-now < first.at-now {
				first = c
			}
		}
		if now, _ := s.clock.now(first.id); first.at > now && !s.clock.sleep(first.at-now, int64(s.cfg.SleepLimit)) {
			s.mu.Lock()
			s.sleptOut = true
			s.mu.Unlock()
			return ErrnoExit
		}
		for _, c := range clocks {
			if now, _ := s.clock.now(c.id); c.at <= now {
				event(m.u64(in+c.i*sizeofSubscription), 0, eventtypeClock, false)
			}
		}
	}
	m.putU32(neventsPtr, nev)
	return 0
}
