// Command guest is the wasm executor's test program, built for wasip1 at
// test time. Its first argument picks what it does.
package main

import (
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unsafe"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: guest MODE [ARGS]")
		os.Exit(2)
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "hello": // a line on each stream
		fmt.Println("hello from stdout")
		fmt.Fprintln(os.Stderr, "hello from stderr")
	case "exit": // exit CODE
		code, _ := strconv.Atoi(args[0])
		os.Exit(code)
	case "env": // print argv and the environment
		fmt.Printf("argv %q\n", os.Args)
		env := os.Environ()
		sort.Strings(env)
		fmt.Printf("env %q\n", env)
	case "entropy": // what a deterministic run must fix, to /out/entropy.txt
		entropy()
	case "alloc": // allocate 1 MiB at a time until the runtime gives up
		var keep [][]byte
		for i := 0; ; i++ {
			b := make([]byte, 1<<20)
			b[0] = byte(i)
			keep = append(keep, b)
			if i%64 == 0 {
				fmt.Printf("allocated %d MiB\n", i)
			}
		}
	case "bigalloc": // one large allocation: bigalloc MIB
		n, _ := strconv.Atoi(args[0])
		b := make([]byte, n<<20)
		b[len(b)-1] = 1
		fmt.Println("got", len(b))
	case "spin": // print "ready", then loop forever
		fmt.Println("ready")
		spin()
	case "sleep": // sleep DURATION
		d, _ := time.ParseDuration(args[0])
		time.Sleep(d)
		fmt.Println("woke")
	case "poll": // poll DURATION: wait for what never comes, a line and a sleep at a time
		d, _ := time.ParseDuration(args[0])
		start := time.Now()
		for i := 0; ; i++ {
			fmt.Printf("waiting %d %v\n", i, time.Since(start).Round(time.Millisecond))
			time.Sleep(d)
		}
	case "trap": // out-of-bounds memory access
		p := (*byte)(unsafe.Pointer(uintptr(0xfffffff0)))
		*p = 1
		fmt.Println("not reached")
	case "panic":
		panic("guest panic")
	case "write": // write PATH BYTES
		n, _ := strconv.Atoi(args[1])
		must(os.MkdirAll(filepath.Dir(args[0]), 0o755))
		must(os.WriteFile(args[0], []byte(strings.Repeat("x", n)), 0o644))
	case "escape": // try to write outside the root; escape RELPATH-TO-HOST-FILE
		escape(args[0])
	case "readonly": // read /in.txt, then try every way of changing the tree
		readOnly()
	case "files": // what the file system promises, line by line
		files()
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", os.Args[1])
		os.Exit(2)
	}
}

//go:noinline
func spin() {
	for i := 0; ; i++ {
		if i < 0 {
			return
		}
	}
}

func entropy() {
	var b strings.Builder
	fmt.Fprintf(&b, "now %s\n", time.Now().Format(time.RFC3339Nano))
	start := time.Now()
	time.Sleep(50 * time.Millisecond)
	fmt.Fprintf(&b, "slept %v\n", time.Since(start) >= 50*time.Millisecond)
	fmt.Fprintf(&b, "rand %d\n", rand.Uint64())
	var buf [16]byte
	crand.Read(buf[:])
	fmt.Fprintf(&b, "crypto/rand %s\n", hex.EncodeToString(buf[:]))
	m := map[int]bool{}
	for i := range 32 {
		m[i] = true
	}
	var order []string
	for k := range m {
		order = append(order, strconv.Itoa(k))
	}
	fmt.Fprintf(&b, "map order %s\n", strings.Join(order, ","))
	must(os.MkdirAll("/out/sub", 0o755))
	for _, n := range []string{"c", "a", "b"} {
		must(os.WriteFile("/out/sub/"+n, nil, 0o644))
	}
	d, err := os.Open("/out/sub")
	must(err)
	names, err := d.Readdirnames(-1)
	must(err)
	d.Close()
	fmt.Fprintf(&b, "readdir %s\n", strings.Join(names, ","))
	st, err := os.Stat("/out/sub/a")
	must(err)
	fmt.Fprintf(&b, "mtime %s\n", st.ModTime().UTC().Format(time.RFC3339Nano))
	must(os.WriteFile("/out/entropy.txt", []byte(b.String()), 0o644))
	fmt.Print(b.String())
}

func escape(rel string) {
	try := func(what string, err error) {
		if err != nil {
			fmt.Printf("%s: %v\n", what, err)
		} else {
			fmt.Printf("%s: ok\n", what)
		}
	}
	try("write /../../etc/passwd", os.WriteFile("/../../etc/passwd", []byte("pwned\n"), 0o644))
	try("write ../x", os.WriteFile("../x", []byte("pwned\n"), 0o644))
	try("write ../../escaped", os.WriteFile("../../escaped", []byte("pwned\n"), 0o644))
	try("symlink "+rel, os.Symlink(rel, "/link"))
	try("write through /link", os.WriteFile("/link", []byte("pwned\n"), 0o644))
	try("mkdir /../up", os.Mkdir("/../up", 0o755))
	try("rename /x to /../x", os.Rename("/x", "/../x"))
	_, err := os.ReadFile("/../" + rel)
	try("read /../"+rel, err)
}

func readOnly() {
	try := func(what string, err error) {
		if err != nil {
			fmt.Printf("%s: %v\n", what, err)
		} else {
			fmt.Printf("%s: ok\n", what)
		}
	}
	b, err := os.ReadFile("/in.txt")
	try(fmt.Sprintf("read /in.txt %q", b), err)
	try("write /in.txt", os.WriteFile("/in.txt", []byte("changed\n"), 0o644))
	f, err := os.OpenFile("/in.txt", os.O_RDWR, 0)
	if err == nil {
		_, err = f.Write([]byte("changed"))
		f.Close()
	}
	try("open /in.txt read-write", err)
	try("create /new", os.WriteFile("/new", []byte("x"), 0o644))
	try("truncate /in.txt", os.Truncate("/in.txt", 0))
	try("mkdir /d", os.Mkdir("/d", 0o755))
	try("rename /in.txt", os.Rename("/in.txt", "/moved"))
	try("link /in.txt", os.Link("/in.txt", "/linked"))
	try("remove /in.txt", os.Remove("/in.txt"))
	try("chtimes /in.txt", os.Chtimes("/in.txt", time.Unix(1, 0), time.Unix(1, 0)))
	fmt.Println("stdout works")
}

func files() {
	say := func(format string, a ...any) { fmt.Printf(format+"\n", a...) }
	st, err := os.Stat("/out")
	say("out dir %v %v", err == nil && st.IsDir(), err)
	must(os.WriteFile("/tmp/a", []byte("a"), 0o644))
	say("tmp writable")
	must(os.WriteFile("/tmp/b", []byte("b"), 0o644))
	a, _ := os.Stat("/tmp/a")
	b, _ := os.Stat("/tmp/b")
	say("later write is newer %v", b.ModTime().After(a.ModTime()))
	set := time.Date(2024, 2, 29, 12, 0, 0, 0, time.UTC)
	must(os.Chtimes("/tmp/a", set, set))
	a, _ = os.Stat("/tmp/a")
	say("set time reads back %v", a.ModTime().Equal(set))
	must(os.WriteFile("/tmp/a", []byte("again"), 0o644))
	a, _ = os.Stat("/tmp/a")
	say("write after set moves mtime on %v", !a.ModTime().Equal(set))
	err = os.Symlink("a", "/tmp/link")
	say("symlink: %v", err)
	err = os.Symlink("a", "/nodir/link")
	say("symlink in missing dir: %v", err)
	err = os.Symlink("a", "/tmp/b")
	say("symlink over a file: %v", err)
	_, err = os.Readlink("/tmp/a")
	say("readlink of a file: %v", err)
	f, err := os.Open("/etc/passwd")
	if err == nil {
		f.Close()
	}
	say("open /etc/passwd: %v", err)
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "guest:", err)
		os.Exit(1)
	}
}
