package wasi

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// guest calls a System's functions as a module would, with its own linear
// memory: scratch space for results at 0, iovecs at 256, strings and data
// from 1024 on.
type guest struct {
	t   *testing.T
	s   *System
	m   Memory
	top uint32 // next free byte for put
}

func newGuest(t *testing.T, cfg Config) *guest {
	t.Helper()
	if cfg.Root == "" {
		cfg.Root = t.TempDir()
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &guest{t: t, s: s, m: make(Memory, 1<<16), top: 1024}
}

// put copies b into memory and returns where.
func (g *guest) put(b []byte) (p, n uint64) {
	at := g.top
	copy(g.m[at:], b)
	g.top += uint32(len(b))
	return uint64(at), uint64(len(b))
}

func (g *guest) call(name string, args ...uint64) Errno {
	g.t.Helper()
	for i := range Funcs {
		if Funcs[i].Name == name {
			return g.s.Call(&Funcs[i], g.m, args)
		}
	}
	g.t.Fatalf("no WASI function %s", name)
	return 0
}

func (g *guest) ok(name string, args ...uint64) {
	g.t.Helper()
	if errno := g.call(name, args...); errno != 0 {
		g.t.Fatalf("%s: errno %d", name, errno)
	}
}

// open opens path under the root (fd 3) with oflags and fdflags, for
// reading and writing, and returns the fd.
func (g *guest) open(path string, oflags, fdflags uint64) uint64 {
	g.t.Helper()
	p, n := g.put([]byte(path))
	g.ok("path_open", 3, 0, p, n, oflags, rightFdRead|rightFdWrite|rightFdSeek|rightFdTell|rightFdFilestatSetSize, 0, fdflags, 0)
	return uint64(g.m.u32(0))
}

// iovecs writes an iovec array for bufs at 256 and returns it, with the
// buffers' bytes put in memory.
func (g *guest) iovecs(bufs ...[]byte) (p, n uint64) {
	for i, b := range bufs {
		at, l := g.put(b)
		binary.LittleEndian.PutUint32(g.m[256+8*i:], uint32(at))
		binary.LittleEndian.PutUint32(g.m[260+8*i:], uint32(l))
	}
	return 256, uint64(len(bufs))
}

// write writes bufs (as one fd_write of several iovecs) and returns what
// it wrote, or the errno.
func (g *guest) write(fd uint64, bufs ...[]byte) (uint32, Errno) {
	p, n := g.iovecs(bufs...)
	errno := g.call("fd_write", fd, p, n, 8)
	return g.m.u32(8), errno
}

// read reads up to n bytes in one fd_read.
func (g *guest) read(fd uint64, n int) string {
	g.t.Helper()
	p, cnt := g.iovecs(make([]byte, n))
	at := g.m.u32(256)
	g.ok("fd_read", fd, p, cnt, 8)
	return string(g.m[at : at+g.m.u32(8)])
}

func (g *guest) tell(fd uint64) uint64 {
	g.t.Helper()
	g.ok("fd_tell", fd, 16)
	return g.m.u64(16)
}

func (g *guest) seek(fd uint64, off int64, whence uint64) (uint64, Errno) {
	errno := g.call("fd_seek", fd, uint64(off), whence, 16)
	return g.m.u64(16), errno
}

func (g *guest) size(path string) uint64 {
	g.t.Helper()
	p, n := g.put([]byte(path))
	g.ok("path_filestat_get", 3, 0, p, n, 64)
	return g.m.u64(64 + 32)
}

// TestFileOffsets: reads, writes and seeks share the fd's offset as POSIX
// says (each is now a positioned host call on the fd's own offset);
// positioned ones leave it alone; an empty iovec is skipped.
func TestFileOffsets(t *testing.T) {
	g := newGuest(t, Config{Deterministic: true})
	fd := g.open("f.txt", oflagCreat, 0)
	if n, errno := g.write(fd, nil, []byte("hello"), []byte(" world")); errno != 0 || n != 11 {
		t.Fatalf("fd_write = %d, errno %d; want 11", n, errno)
	}
	if got := g.tell(fd); got != 11 {
		t.Errorf("tell after the write = %d, want 11", got)
	}
	if pos, errno := g.seek(fd, 0, 0); errno != 0 || pos != 0 {
		t.Fatalf("seek to 0 = %d, errno %d", pos, errno)
	}
	if got := g.read(fd, 5); got != "hello" {
		t.Errorf("read %q, want hello", got)
	}
	// fd_pwrite at 0: the offset stays at 5.
	p, n := g.iovecs([]byte("J"))
	g.ok("fd_pwrite", fd, p, n, 0, 8)
	if got := g.tell(fd); got != 5 {
		t.Errorf("tell after pwrite = %d, want 5", got)
	}
	if got := g.read(fd, 100); got != " world" {
		t.Errorf("read %q, want \" world\"", got)
	}
	if got := g.read(fd, 100); got != "" {
		t.Errorf("read at the end %q, want nothing", got)
	}
	if pos, errno := g.seek(fd, -3, 1); errno != 0 || pos != 8 {
		t.Errorf("seek -3 from 11 = %d, errno %d; want 8", pos, errno)
	}
	if got := g.read(fd, 100); got != "rld" {
		t.Errorf("read %q, want rld", got)
	}
	if pos, errno := g.seek(fd, 2, 2); errno != 0 || pos != 13 {
		t.Errorf("seek 2 past the end = %d, errno %d; want 13", pos, errno)
	}
	if _, errno := g.seek(fd, -100, 1); errno != ErrnoInval {
		t.Errorf("seek before the start: errno %d, want EINVAL", errno)
	}
	if got := g.tell(fd); got != 13 {
		t.Errorf("tell after a refused seek = %d, want 13", got)
	}
	if n, errno := g.write(fd, []byte("!")); errno != 0 || n != 1 {
		t.Fatalf("fd_write past the end = %d, errno %d", n, errno)
	}
	b, err := os.ReadFile(filepath.Join(g.s.cfg.Root, "f.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), "Jello world\x00\x00!"; got != want {
		t.Errorf("file %q, want %q", got, want)
	}
}

// TestAppendWrites: with FDFLAGS_APPEND every write goes to the end,
// wherever the offset was, and leaves the offset there.
func TestAppendWrites(t *testing.T) {
	g := newGuest(t, Config{})
	if err := os.WriteFile(filepath.Join(g.s.cfg.Root, "log"), []byte("ab"), 0o644); err != nil {
		t.Fatal(err)
	}
	fd := g.open("log", 0, fdflagAppend)
	other := g.open("log", 0, 0)
	g.write(other, []byte("XYZ")) // another fd makes the file longer: "XYZ"
	g.seek(fd, 0, 0)
	if n, errno := g.write(fd, []byte("c")); errno != 0 || n != 1 {
		t.Fatalf("append = %d, errno %d", n, errno)
	}
	if got := g.tell(fd); got != 4 {
		t.Errorf("tell after the append = %d, want 4", got)
	}
	b, _ := os.ReadFile(filepath.Join(g.s.cfg.Root, "log"))
	if got, want := string(b), "XYZc"; got != want {
		t.Errorf("file %q, want %q", got, want)
	}
}

// TestDiskBudgetBySize: the budget counts growth by file, whichever fd
// writes it: a write that would pass it is refused before anything is
// written; rewriting in place is free; truncating gives nothing back.
func TestDiskBudgetBySize(t *testing.T) {
	g := newGuest(t, Config{DiskBytes: 10})
	a := g.open("f", oflagCreat, 0)
	b := g.open("f", 0, 0)
	if _, errno := g.write(a, []byte("12345678")); errno != 0 {
		t.Fatalf("8 bytes: errno %d", errno)
	}
	if _, errno := g.write(a, []byte("abcd")); errno != ErrnoNospc {
		t.Fatalf("4 more (12 > 10): errno %d, want ENOSPC", errno)
	}
	if !g.s.DiskExceeded() {
		t.Error("DiskExceeded is false after a refused write")
	}
	if got := g.size("f"); got != 8 {
		t.Errorf("size after the refused write %d, want 8", got)
	}
	if got := g.tell(a); got != 8 {
		t.Errorf("offset after the refused write %d, want 8", got)
	}
	// b writes at its offset 0: in place, free, then 2 bytes of growth.
	if _, errno := g.write(b, []byte("ABCDEFGHIJ")); errno != 0 {
		t.Fatalf("rewrite and grow by 2 through another fd: errno %d", errno)
	}
	// a's offset is 8, the file 10 long: in place again.
	if _, errno := g.write(a, []byte("xy")); errno != 0 {
		t.Fatalf("in place at 8: errno %d", errno)
	}
	if got := g.size("f"); got != 10 {
		t.Errorf("size %d, want 10", got)
	}
	// Truncate to 4 and grow again: the 10 bytes are spent.
	g.ok("fd_filestat_set_size", a, 4)
	if _, errno := g.write(b, []byte("z")); errno != ErrnoNospc {
		t.Errorf("growth after truncation: errno %d, want ENOSPC", errno)
	}
	b2, _ := os.ReadFile(filepath.Join(g.s.cfg.Root, "f"))
	if got, want := string(b2), "ABCD"; got != want {
		t.Errorf("file %q, want %q", got, want)
	}
}

// TestPathsAfterRename: path_open and path_filestat_get keep directories
// open (System.at), and a rename or a removed directory must not leave a
// path naming what it used to.
func TestPathsAfterRename(t *testing.T) {
	g := newGuest(t, Config{Deterministic: true})
	mkdir := func(p string) {
		t.Helper()
		ptr, n := g.put([]byte(p))
		g.ok("path_create_directory", 3, ptr, n)
	}
	create := func(p, content string) {
		t.Helper()
		fd := g.open(p, oflagCreat|oflagTrunc, 0)
		g.write(fd, []byte(content))
		g.ok("fd_close", fd)
	}
	mkdir("d")
	create("d/x", "1")
	if got := g.size("d/x"); got != 1 {
		t.Fatalf("d/x size %d, want 1", got)
	}
	from, fn := g.put([]byte("d"))
	to, tn := g.put([]byte("e"))
	g.ok("path_rename", 3, from, fn, 3, to, tn)
	mkdir("d")
	create("d/x", "22")
	if got := g.size("d/x"); got != 2 {
		t.Errorf("d/x after renaming d away and making a new one: size %d, want 2", got)
	}
	if got := g.size("e/x"); got != 1 {
		t.Errorf("e/x size %d, want 1", got)
	}
	// Remove d's file and d, make d again with a file of 3 bytes.
	p, n := g.put([]byte("d/x"))
	g.ok("path_unlink_file", 3, p, n)
	p, n = g.put([]byte("d"))
	g.ok("path_remove_directory", 3, p, n)
	mkdir("d")
	create("d/x", "333")
	if got := g.size("d/x"); got != 3 {
		t.Errorf("d/x after removing d and making a new one: size %d, want 3", got)
	}
}

// TestListingMatchesStat: a listing's inode numbers and types (one
// fstatat per entry) are those path_filestat_get reports.
func TestListingMatchesStat(t *testing.T) {
	for _, det := range []bool{true, false} {
		g := newGuest(t, Config{Deterministic: det})
		root := g.s.cfg.Root
		if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "sub", "b"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(root, "sub", "a"), 0o755); err != nil {
			t.Fatal(err)
		}
		p, n := g.put([]byte("sub"))
		g.ok("path_open", 3, 0, p, n, oflagDirectory, rightFdReaddir, 0, 0, 0)
		dir := uint64(g.m.u32(0))
		g.ok("fd_readdir", dir, 4096, 4096, 0, 8)
		used := g.m.u32(8)
		got := map[string][2]uint64{} // name: ino, type
		for off := uint32(4096); off < 4096+used; {
			namelen := g.m.u32(off + 16)
			name := string(g.m[off+sizeofDirent : off+sizeofDirent+namelen])
			got[name] = [2]uint64{g.m.u64(off + 8), uint64(g.m[off+20])}
			off += sizeofDirent + namelen
		}
		for name, typ := range map[string]uint64{"a": filetypeDirectory, "b": filetypeRegularFile} {
			sp, sn := g.put([]byte("sub/" + name))
			g.ok("path_filestat_get", 3, 0, sp, sn, 64)
			ino := g.m.u64(64 + 8)
			if got[name] != [2]uint64{ino, typ} {
				t.Errorf("deterministic %v: listing has %s as (ino, type) %v, stat says (%d, %d)", det, name, got[name], ino, typ)
			}
		}
	}
}
