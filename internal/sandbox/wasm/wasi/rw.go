package wasi

import (
	"io"
	"math"
)

// Reading and writing files: one host call for each fd_read or fd_write,
// whatever the iovecs (preadv(2) and pwritev(2) where the host has them),
// as the same program makes natively. A file's offset is the fd's own
// (fdEntry.pos), so every read and write is positioned; the host file's
// offset is used by fd_seek alone, to check a new offset as lseek(2) does.
// The disk budget is kept from file sizes the System tracks (see
// fileSize), so a write costs no fstat(2) either.

// fileSize is the size of the file open at e: as this System last saw or
// made it, else from fstat(2). The guest is the only one changing the files
// under Root while it runs, and every change of size goes through here
// (writes, truncation, allocation, path_open's O_TRUNC, which refreshes
// the size from the opened file), so the size kept for a file is its size.
func (s *System) fileSize(e *fdEntry) (int64, Errno) {
	if e.hasID && hostIDsUnique {
		if n, ok := s.sizes[e.id]; ok {
			return n, 0
		}
	}
	fi, err := e.f.Stat()
	if err != nil {
		return 0, errnoOf(err)
	}
	s.noteSize(e, fi.Size())
	return fi.Size(), 0
}

// noteSize records n as the size of e's file.
func (s *System) noteSize(e *fdEntry, n int64) {
	if e.hasID && hostIDsUnique {
		s.sizes[e.id] = n
	}
}

func (s *System) fdRead(m Memory, fd, iovs, n uint32, off int64, positioned bool, nPtr uint32) Errno {
	e, errno := s.getFor(fd, rightFdRead)
	if errno != 0 {
		return errno
	}
	bufs := m.iovecs(iovs, n)
	switch e.kind {
	case kindStdin:
		if positioned {
			return ErrnoSpipe
		}
		m.putU32(nPtr, 0) // always at its end
		return 0
	case kindOut, kindDir:
		return ErrnoBadf
	}
	if !e.read {
		return ErrnoBadf
	}
	if positioned && off < 0 {
		return ErrnoInval
	}
	pos := off
	if !positioned {
		pos = e.pos
	}
	k, err := readAt(e, bufs, pos)
	if err != nil && k == 0 {
		return errnoOf(err)
	}
	if !positioned {
		e.pos += int64(k)
	}
	m.putU32(nPtr, uint32(k))
	return 0
}

func (s *System) fdWrite(m Memory, fd, iovs, n uint32, off int64, positioned bool, nPtr uint32) Errno {
	e, errno := s.getFor(fd, rightFdWrite)
	if errno != 0 {
		return errno
	}
	bufs := m.iovecs(iovs, n)
	switch e.kind {
	case kindStdin, kindDir:
		return ErrnoBadf
	case kindOut:
		if positioned {
			return ErrnoSpipe
		}
		var total int
		for _, b := range bufs {
			k, _ := e.w.Write(b)
			total += k
		}
		m.putU32(nPtr, uint32(total))
		return 0
	}
	if !e.write {
		return ErrnoBadf
	}
	if positioned && off < 0 {
		return ErrnoInval
	}
	var size int64
	pos := off
	if !positioned {
		pos = e.pos
		if e.append {
			// Where the file ends now, exactly (as a seek to its end
			// would tell).
			fi, err := e.f.Stat()
			if err != nil {
				return errnoOf(err)
			}
			s.noteSize(e, fi.Size())
			pos = fi.Size()
		}
	}
	budget := s.cfg.DiskBytes > 0
	if budget {
		var total int64
		for _, b := range bufs {
			total += int64(len(b))
		}
		if total > math.MaxInt64-pos {
			return ErrnoFbig
		}
		if size, errno = s.fileSize(e); errno != 0 {
			return errno
		}
		// Refused before it is written: the file stays as it was.
		if !s.fitsDisk(pos + total - size) {
			return ErrnoNospc
		}
	}
	k, err := writeAt(e, bufs, pos)
	if err != nil && k == 0 {
		return errnoOf(err)
	}
	end := pos + int64(k)
	if budget && end > size {
		s.chargeDisk(end - size)
		s.noteSize(e, end)
	}
	if !positioned {
		e.pos = end
	}
	s.modifiedFD(e)
	m.putU32(nPtr, uint32(k))
	return 0
}

func (s *System) fdSeek(m Memory, fd uint32, off int64, whence, p uint32) Errno {
	e, errno := s.get(fd)
	if errno != 0 {
		return errno
	}
	switch e.kind {
	case kindStdin, kindOut:
		return ErrnoSpipe
	case kindDir:
		return ErrnoBadf
	}
	need := uint64(rightFdSeek)
	if off == 0 && whence == io.SeekCurrent {
		need |= rightFdTell // a tell: either right will do
	}
	if e.base&need == 0 {
		return ErrnoNotcapable
	}
	if whence > io.SeekEnd {
		return ErrnoInval
	}
	if off == 0 && whence == io.SeekCurrent {
		m.putU64(p, uint64(e.pos))
		return 0
	}
	// The host checks the new offset (negative, past the largest file):
	// the fd's host offset is set to it, and not used otherwise.
	if whence == io.SeekCurrent {
		if (off > 0 && e.pos > math.MaxInt64-off) || e.pos+off < 0 {
			return ErrnoInval
		}
		off, whence = e.pos+off, io.SeekStart
	}
	pos, err := e.f.Seek(off, int(whence))
	if err != nil {
		return errnoOf(err)
	}
	e.pos = pos
	m.putU64(p, uint64(pos))
	return 0
}

// readAt reads into bufs from the file at pos, as one preadv(2) where the
// host has it: what it read, and an error only when it read nothing (at
// the end of the file, 0 and no error).
func readAt(e *fdEntry, bufs [][]byte, pos int64) (int, error) {
	bufs = nonEmpty(bufs)
	if len(bufs) == 0 {
		return 0, nil
	}
	if e.hasFD && len(bufs) <= maxHostIovecs {
		return preadv(e.hostFD, bufs, pos)
	}
	var total int
	for _, b := range bufs {
		k, err := e.f.ReadAt(b, pos+int64(total))
		total += k
		if err != nil {
			if err == io.EOF || total > 0 {
				return total, nil
			}
			return 0, err
		}
	}
	return total, nil
}

// writeAt writes bufs to the file at pos, as one pwritev(2) where the host
// has it: what it wrote, and an error only when it wrote nothing.
func writeAt(e *fdEntry, bufs [][]byte, pos int64) (int, error) {
	bufs = nonEmpty(bufs)
	if len(bufs) == 0 {
		return 0, nil
	}
	if e.hasFD && len(bufs) <= maxHostIovecs {
		return pwritev(e.hostFD, bufs, pos)
	}
	var total int
	for _, b := range bufs {
		k, err := e.f.WriteAt(b, pos+int64(total))
		total += k
		if err != nil {
			if total > 0 {
				return total, nil
			}
			return 0, err
		}
	}
	return total, nil
}

// nonEmpty is bufs without its empty buffers (C's stdio passes its own
// buffer first, often empty), in place when there are none.
func nonEmpty(bufs [][]byte) [][]byte {
	for i, b := range bufs {
		if len(b) == 0 {
			out := bufs[:i:i]
			for _, b := range bufs[i+1:] {
				if len(b) > 0 {
					out = append(out, b)
				}
			}
			return out
		}
	}
	return bufs
}
