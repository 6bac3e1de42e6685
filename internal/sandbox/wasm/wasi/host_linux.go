package wasi

import "syscall"

func timespec(st *syscall.Stat_t, which byte) int64 {
	switch which {
	case 'a':
		return st.Atim.Nano()
	case 'm':
		return st.Mtim.Nano()
	}
	return st.Ctim.Nano()
}
