package wasi

// Module is the import module name of WASI preview 1.
const Module = "wasi_snapshot_preview1"

// Func is one WASI function, for an engine to bind.
type Func struct {
	Name string
	// Params are the parameter types, one letter each: 'i' for i32, 'I'
	// for i64.
	Params string
	// NoResult is true for proc_exit; every other function returns an
	// errno as an i32.
	NoResult bool
	call     func(s *System, m Memory, a []uint64) Errno
}

// ErrnoExit is what Call returns when the guest must stop: after proc_exit
// (ExitCode has the code), or at a sleep past Config.SleepLimit
// (SleptOut). The engine stops the guest (wasmtime: return a trap; wazero:
// panic with its exit error).
const ErrnoExit Errno = 1<<32 - 1

// Call runs f for the guest whose memory is m, with the arguments a (each
// an i32 or i64 as the engine passes it, zero-extended). It never panics
// on the guest's account: an access outside m is EFAULT.
func (s *System) Call(f *Func, m Memory, a []uint64) (errno Errno) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(fault); !ok {
				panic(r)
			}
			errno = ErrnoFault
		}
	}()
	return f.call(s, m, a)
}

func u32(v uint64) uint32 { return uint32(v) }

// Funcs are the functions of wasi_snapshot_preview1, all of them.
var Funcs = []Func{
	{"args_get", "ii", false, func(s *System, m Memory, a []uint64) Errno { return s.argsGet(m, s.cfg.Args, u32(a[0]), u32(a[1])) }},
	{"args_sizes_get", "ii", false, func(s *System, m Memory, a []uint64) Errno {
		return s.sizesGet(m, len(s.cfg.Args), s.argsSize, u32(a[0]), u32(a[1]))
	}},
	{"environ_get", "ii", false, func(s *System, m Memory, a []uint64) Errno { return s.argsGet(m, s.cfg.Env, u32(a[0]), u32(a[1])) }},
	{"environ_sizes_get", "ii", false, func(s *System, m Memory, a []uint64) Errno {
		return s.sizesGet(m, len(s.cfg.Env), s.envSize, u32(a[0]), u32(a[1]))
	}},
	{"clock_res_get", "ii", false, func(s *System, m Memory, a []uint64) Errno { return s.clockResGet(m, u32(a[0]), u32(a[1])) }},
	{"clock_time_get", "iIi", false, func(s *System, m Memory, a []uint64) Errno { return s.clockTimeGet(m, u32(a[0]), u32(a[2])) }},
	{"fd_advise", "iIIi", false, func(s *System, m Memory, a []uint64) Errno { return s.fdAdvise(u32(a[0]), u32(a[3])) }},
	{"fd_allocate", "iII", false, func(s *System, m Memory, a []uint64) Errno { return s.fdAllocate(u32(a[0]), a[1], a[2]) }},
	{"fd_close", "i", false, func(s *System, m Memory, a []uint64) Errno { return s.fdClose(u32(a[0])) }},
	{"fd_datasync", "i", false, func(s *System, m Memory, a []uint64) Errno { return s.fdSync(u32(a[0])) }},
	{"fd_fdstat_get", "ii", false, func(s *System, m Memory, a []uint64) Errno { return s.fdFdstatGet(m, u32(a[0]), u32(a[1])) }},
	{"fd_fdstat_set_flags", "ii", false, func(s *System, m Memory, a []uint64) Errno { return s.fdFdstatSetFlags(u32(a[0]), u32(a[1])) }},
	{"fd_fdstat_set_rights", "iII", false, func(s *System, m Memory, a []uint64) Errno { return s.fdFdstatSetRights(u32(a[0]), a[1], a[2]) }},
	{"fd_filestat_get", "ii", false, func(s *System, m Memory, a []uint64) Errno { return s.fdFilestatGet(m, u32(a[0]), u32(a[1])) }},
	{"fd_filestat_set_size", "iI", false, func(s *System, m Memory, a []uint64) Errno { return s.fdFilestatSetSize(u32(a[0]), a[1]) }},
	{"fd_filestat_set_times", "iIIi", false, func(s *System, m Memory, a []uint64) Errno {
		return s.fdFilestatSetTimes(u32(a[0]), int64(a[1]), int64(a[2]), u32(a[3]))
	}},
	{"fd_pread", "iiiIi", false, func(s *System, m Memory, a []uint64) Errno {
		return s.fdRead(m, u32(a[0]), u32(a[1]), u32(a[2]), int64(a[3]), true, u32(a[4]))
	}},
	{"fd_prestat_get", "ii", false, func(s *System, m Memory, a []uint64) Errno { return s.fdPrestatGet(m, u32(a[0]), u32(a[1])) }},
	{"fd_prestat_dir_name", "iii", false, func(s *System, m Memory, a []uint64) Errno {
		return s.fdPrestatDirName(m, u32(a[0]), u32(a[1]), u32(a[2]))
	}},
	{"fd_pwrite", "iiiIi", false, func(s *System, m Memory, a []uint64) Errno {
		return s.fdWrite(m, u32(a[0]), u32(a[1]), u32(a[2]), int64(a[3]), true, u32(a[4]))
	}},
	{"fd_read", "iiii", false, func(s *System, m Memory, a []uint64) Errno {
		return s.fdRead(m, u32(a[0]), u32(a[1]), u32(a[2]), 0, false, u32(a[3]))
	}},
	{"fd_readdir", "iiiIi", false, func(s *System, m Memory, a []uint64) Errno {
		return s.fdReaddir(m, u32(a[0]), u32(a[1]), u32(a[2]), a[3], u32(a[4]))
	}},
	{"fd_renumber", "ii", false, func(s *System, m Memory, a []uint64) Errno { return s.fdRenumber(u32(a[0]), u32(a[1])) }},
	{"fd_seek", "iIii", false, func(s *System, m Memory, a []uint64) Errno {
		return s.fdSeek(m, u32(a[0]), int64(a[1]), u32(a[2]), u32(a[3]))
	}},
	{"fd_sync", "i", false, func(s *System, m Memory, a []uint64) Errno { return s.fdSync(u32(a[0])) }},
	{"fd_tell", "ii", false, func(s *System, m Memory, a []uint64) Errno { return s.fdSeek(m, u32(a[0]), 0, 1, u32(a[1])) }},
	{"fd_write", "iiii", false, func(s *System, m Memory, a []uint64) Errno {
		return s.fdWrite(m, u32(a[0]), u32(a[1]), u32(a[2]), 0, false, u32(a[3]))
	}},
	{"path_create_directory", "iii", false, func(s *System, m Memory, a []uint64) Errno {
		return s.pathCreateDirectory(u32(a[0]), m.str(u32(a[1]), u32(a[2])))
	}},
	{"path_filestat_get", "iiiii", false, func(s *System, m Memory, a []uint64) Errno {
		return s.pathFilestatGet(m, u32(a[0]), m.str(u32(a[2]), u32(a[3])), u32(a[4]))
	}},
	{"path_filestat_set_times", "iiiiIIi", false, func(s *System, m Memory, a []uint64) Errno {
		return s.pathFilestatSetTimes(u32(a[0]), m.str(u32(a[2]), u32(a[3])), int64(a[4]), int64(a[5]), u32(a[6]))
	}},
	{"path_link", "iiiiiii", false, func(s *System, m Memory, a []uint64) Errno {
		return s.pathLink(u32(a[0]), m.str(u32(a[2]), u32(a[3])), u32(a[4]), m.str(u32(a[5]), u32(a[6])))
	}},
	{"path_open", "iiiiiIIii", false, func(s *System, m Memory, a []uint64) Errno {
		return s.pathOpen(m, u32(a[0]), m.str(u32(a[2]), u32(a[3])), u32(a[4]), a[5], a[6], u32(a[7]), u32(a[8]))
	}},
	{"path_readlink", "iiiiii", false, func(s *System, m Memory, a []uint64) Errno {
		return s.pathReadlink(m, u32(a[0]), m.str(u32(a[1]), u32(a[2])), u32(a[5]))
	}},
	{"path_remove_directory", "iii", false, func(s *System, m Memory, a []uint64) Errno {
		return s.pathRemoveDirectory(u32(a[0]), m.str(u32(a[1]), u32(a[2])))
	}},
	{"path_rename", "iiiiii", false, func(s *System, m Memory, a []uint64) Errno {
		return s.pathRename(u32(a[0]), m.str(u32(a[1]), u32(a[2])), u32(a[3]), m.str(u32(a[4]), u32(a[5])))
	}},
	{"path_symlink", "iiiii", false, func(s *System, m Memory, a []uint64) Errno {
		return s.pathSymlink(m.str(u32(a[0]), u32(a[1])), u32(a[2]), m.str(u32(a[3]), u32(a[4])))
	}},
	{"path_unlink_file", "iii", false, func(s *System, m Memory, a []uint64) Errno {
		return s.pathUnlinkFile(u32(a[0]), m.str(u32(a[1]), u32(a[2])))
	}},
	{"poll_oneoff", "iiii", false, func(s *System, m Memory, a []uint64) Errno {
		return s.pollOneoff(m, u32(a[0]), u32(a[1]), u32(a[2]), u32(a[3]))
	}},
	{"proc_exit", "i", true, func(s *System, m Memory, a []uint64) Errno {
		s.mu.Lock()
		s.exited, s.exitCode = true, u32(a[0])
		s.mu.Unlock()
		return ErrnoExit
	}},
	{"proc_raise", "i", false, func(s *System, m Memory, a []uint64) Errno { return ErrnoNosys }},
	{"random_get", "ii", false, func(s *System, m Memory, a []uint64) Errno {
		s.rand.Read(m.slice(u32(a[0]), u32(a[1])))
		return 0
	}},
	{"sched_yield", "", false, func(s *System, m Memory, a []uint64) Errno { return 0 }},
	{"sock_accept", "iii", false, func(s *System, m Memory, a []uint64) Errno { return s.notSocket(u32(a[0])) }},
	{"sock_recv", "iiiiii", false, func(s *System, m Memory, a []uint64) Errno { return s.notSocket(u32(a[0])) }},
	{"sock_send", "iiiii", false, func(s *System, m Memory, a []uint64) Errno { return s.notSocket(u32(a[0])) }},
	{"sock_shutdown", "ii", false, func(s *System, m Memory, a []uint64) Errno { return s.notSocket(u32(a[0])) }},
}

func (s *System) argsGet(m Memory, list []string, ptrs, buf uint32) Errno {
	for i, a := range list {
		m.putU32(ptrs+uint32(i)*4, buf)
		b := m.slice(buf, uint32(len(a))+1)
		copy(b, a)
		b[len(a)] = 0
		buf += uint32(len(a)) + 1
	}
	return 0
}

func (s *System) sizesGet(m Memory, n int, size uint32, countPtr, sizePtr uint32) Errno {
	m.putU32(countPtr, uint32(n))
	m.putU32(sizePtr, size)
	return 0
}

func (s *System) clockResGet(m Memory, id, p uint32) Errno {
	if id > clockThreadCPUTimeID {
		return ErrnoInval
	}
	res := uint64(1)
	if s.clock.virtual {
		res = uint64(tick)
	}
	m.putU64(p, res)
	return 0
}

func (s *System) clockTimeGet(m Memory, id, p uint32) Errno {
	t, ok := s.clock.now(id)
	if !ok {
		return ErrnoInval
	}
	m.putU64(p, uint64(t))
	return 0
}

func (s *System) notSocket(fd uint32) Errno {
	if _, errno := s.get(fd); errno != 0 {
		return errno
	}
	return ErrnoNotsock
}
