//go:build darwin || linux || openbsd

package wasi

import (
	"os"

	"golang.org/x/sys/unix"
)

// maxHostIovecs is IOV_MAX: the most buffers one preadv or pwritev takes.
const maxHostIovecs = 1024

// hostFD is f's descriptor, for preadv and pwritev. A regular file is in
// blocking mode, which Fd keeps.
func hostFD(f *os.File) (int, bool) { return int(f.Fd()), true }

func preadv(fd int, bufs [][]byte, off int64) (int, error) {
	for {
		n, err := unix.Preadv(fd, bufs, off)
		if err != unix.EINTR {
			return max(n, 0), err
		}
	}
}

func pwritev(fd int, bufs [][]byte, off int64) (int, error) {
	for {
		n, err := unix.Pwritev(fd, bufs, off)
		if err != unix.EINTR {
			return max(n, 0), err
		}
	}
}

// statAt is what a listing shows of the entry name in the directory open
// at dirFD: its identity, host inode number and file type, from one
// fstatat(2) that follows no symbolic link.
func statAt(dirFD int, name string) (id fileID, ino uint64, typ uint8, err error) {
	var st unix.Stat_t
	for {
		err = unix.Fstatat(dirFD, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return fileID{}, 0, 0, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		typ = filetypeDirectory
	case unix.S_IFREG:
		typ = filetypeRegularFile
	case unix.S_IFLNK:
		typ = filetypeSymbolicLink
	case unix.S_IFCHR:
		typ = filetypeCharacterDevice
	case unix.S_IFBLK:
		typ = 1 // block device
	case unix.S_IFSOCK:
		typ = 6 // stream socket
	}
	return fileID{uint64(st.Dev), uint64(st.Ino)}, uint64(st.Ino), typ, nil
}
