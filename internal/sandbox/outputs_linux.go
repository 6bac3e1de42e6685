package sandbox

import (
	"io/fs"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// linkCount is how many names fi's inode has; 0 if unknown.
func linkCount(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 0
}

// linkOpenFile makes target a new name of the inode f has open, through
// /proc/self/fd (linkat with AT_SYMLINK_FOLLOW, which needs no privilege,
// unlike AT_EMPTY_PATH), and reports whether it did.
func linkOpenFile(f *os.File, target string) bool {
	proc := "/proc/self/fd/" + strconv.FormatUint(uint64(f.Fd()), 10)
	return unix.Linkat(unix.AT_FDCWD, proc, unix.AT_FDCWD, target, unix.AT_SYMLINK_FOLLOW) == nil
}
