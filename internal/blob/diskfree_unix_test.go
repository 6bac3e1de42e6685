//go:build linux || darwin || freebsd

package blob

import "syscall"

// freeBytes returns the space available to this user on dir's filesystem.
func freeBytes(dir string) (int64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(uint64(st.Bavail) * uint64(st.Bsize)), true
}
