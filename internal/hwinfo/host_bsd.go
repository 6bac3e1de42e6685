//go:build darwin || freebsd

package hwinfo

import (
	"errors"
	"syscall"
)

func sysinfoRAM() (uint64, error) {
	return 0, errors.New("no sysinfo on this OS")
}

func diskFree(path string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}
