//go:build unix

package wasi

import (
	"errors"
	"os"
	"syscall"
)

// fileID identifies a host file.
type fileID struct{ dev, ino uint64 }

// hostIDsUnique: a fileID is one file's alone (while it exists), so what
// is known of a file can be kept by its fileID.
const hostIDsUnique = true

func hostID(fi os.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{uint64(st.Dev), uint64(st.Ino)}, true
}

// hostStat is what a non-deterministic run reports of a file beyond its
// type and size.
func hostStat(fi os.FileInfo) (dev, ino, nlink uint64, atim, mtim, ctim int64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		t := fi.ModTime().UnixNano()
		return 0, 0, 1, t, t, t
	}
	return uint64(st.Dev), uint64(st.Ino), uint64(st.Nlink), timespec(st, 'a'), timespec(st, 'm'), timespec(st, 'c')
}

// hostErrno maps the syscall.Errno inside err, if any.
func hostErrno(err error) (Errno, bool) {
	var en syscall.Errno
	if !errors.As(err, &en) {
		return 0, false
	}
	if e, ok := errnos[en]; ok {
		return e, true
	}
	return ErrnoIo, true
}

var errnos = map[syscall.Errno]Errno{
	syscall.E2BIG: Errno2big, syscall.EACCES: ErrnoAcces, syscall.EAGAIN: ErrnoAgain,
	syscall.EBADF: ErrnoBadf, syscall.EBUSY: ErrnoBusy, syscall.EEXIST: ErrnoExist,
	syscall.EFAULT: ErrnoFault, syscall.EFBIG: ErrnoFbig, syscall.EILSEQ: ErrnoIlseq,
	syscall.EINTR: ErrnoIntr, syscall.EINVAL: ErrnoInval, syscall.EIO: ErrnoIo,
	syscall.EISDIR: ErrnoIsdir, syscall.ELOOP: ErrnoLoop, syscall.EMFILE: ErrnoMfile,
	syscall.EMLINK: ErrnoMlink, syscall.ENAMETOOLONG: ErrnoNametoolong, syscall.ENFILE: ErrnoNfile,
	syscall.ENOENT: ErrnoNoent, syscall.ENOMEM: ErrnoNomem, syscall.ENOSPC: ErrnoNospc,
	syscall.ENOSYS: ErrnoNosys, syscall.ENOTDIR: ErrnoNotdir, syscall.ENOTEMPTY: ErrnoNotempty,
	syscall.ENOTSUP: ErrnoNotsup, syscall.ENOTTY: ErrnoNotty, syscall.EOVERFLOW: ErrnoOverflow,
	syscall.EPERM: ErrnoPerm, syscall.EPIPE: ErrnoPipe, syscall.ERANGE: ErrnoRange,
	syscall.EROFS: ErrnoRofs, syscall.ESPIPE: ErrnoSpipe, syscall.EXDEV: ErrnoXdev,
	syscall.EDQUOT: ErrnoNospc,
}
