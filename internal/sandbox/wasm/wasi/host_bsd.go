//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package wasi

import "syscall"

func timespec(st *syscall.Stat_t, which byte) int64 {
	switch which {
	case 'a':
		return st.Atimespec.Nano()
	case 'm':
		return st.Mtimespec.Nano()
	}
	return st.Ctimespec.Nano()
}
