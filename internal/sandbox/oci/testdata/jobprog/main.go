// Command jobprog is the program of the oci executor's test images: one
// static binary whose first argument picks what it does inside the
// container.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Println("usage: jobprog hello|whoami|cat|devices|ls|getenv|write|net|mem|fork|serve|sleep|spin|exit|count ARGS")
		os.Exit(2)
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "hello":
		fmt.Printf("hello from a container, uid %d gid %d\n", os.Getuid(), os.Getgid())
	case "whoami":
		// The identity and confinement the job sees, one "key value" a line.
		fmt.Printf("uid %d\ngid %d\n", os.Getuid(), os.Getgid())
		b, _ := os.ReadFile("/proc/self/status")
		for _, l := range strings.Split(string(b), "\n") {
			for _, k := range []string{"CapEff:", "CapBnd:", "NoNewPrivs:", "Seccomp:"} {
				if strings.HasPrefix(l, k) {
					fmt.Println(strings.Join(strings.Fields(l), " "))
				}
			}
		}
		h, _ := os.Hostname()
		fmt.Println("hostname", h)
		for _, k := range []string{"NVIDIA_VISIBLE_DEVICES", "HOME", "GREETING"} {
			fmt.Printf("env %s=%s\n", k, os.Getenv(k))
		}
		wd, _ := os.Getwd()
		fmt.Println("cwd", wd)
		if err := os.WriteFile("/rootfs-write-test", []byte("x"), 0o644); err != nil {
			fmt.Println("rootfs read-only:", err)
		}
	case "cat":
		// Print each file, or why it cannot be read.
		for _, f := range args {
			b, err := os.ReadFile(f)
			if err != nil {
				fmt.Printf("cat %s: error: %v\n", f, err)
				continue
			}
			fmt.Printf("cat %s: %q\n", f, b)
		}
	case "devices":
		// The device nodes the job sees.
		ents, _ := os.ReadDir("/dev")
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		fmt.Println("devices", strings.Join(names, " "))
	case "write":
		// write DIR: copy every file under /in to DIR with its contents
		// upper-cased, and a summary file.
		dst := args[0]
		var names []string
		filepath.Walk("/in", func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel("/in", p)
			out := filepath.Join(dst, rel)
			os.MkdirAll(filepath.Dir(out), 0o755)
			names = append(names, rel)
			return os.WriteFile(out, []byte(strings.ToUpper(string(b))), 0o644)
		})
		if err := os.WriteFile(filepath.Join(dst, "summary.txt"), []byte(fmt.Sprintf("%d files: %s\n", len(names), strings.Join(names, ","))), 0o644); err != nil {
			fmt.Println("write:", err)
			os.Exit(1)
		}
		fmt.Println("wrote", len(names), "files")
	case "ls":
		// ls DIR...: each directory's entries, "ls DIR: a b c", symbolic
		// links as name->target.
		for _, d := range args {
			ents, err := os.ReadDir(d)
			if err != nil {
				fmt.Printf("ls %s: error: %v\n", d, err)
				continue
			}
			var names []string
			for _, e := range ents {
				n := e.Name()
				if t, err := os.Readlink(filepath.Join(d, n)); err == nil {
					n += "->" + t
				}
				names = append(names, n)
			}
			fmt.Printf("ls %s: %s\n", d, strings.Join(names, " "))
		}
	case "getenv":
		for _, k := range args {
			fmt.Printf("getenv %s=%s\n", k, os.Getenv(k))
		}
	case "net":
		// Try each address; print "net ADDR: ok" or the error.
		for _, a := range args {
			c, err := net.DialTimeout("tcp", a, 2*time.Second)
			if err != nil {
				fmt.Printf("net %s: error: %v\n", a, err)
				continue
			}
			c.Close()
			fmt.Printf("net %s: ok\n", a)
		}
		ifs, _ := net.Interfaces()
		var names []string
		for _, i := range ifs {
			names = append(names, i.Name)
		}
		fmt.Println("interfaces", strings.Join(names, ","))
	case "mem":
		// mem MiB: allocate and touch that much memory.
		n, _ := strconv.Atoi(args[0])
		var keep [][]byte
		for i := 0; i < n; i++ {
			b := make([]byte, 1<<20)
			for j := 0; j < len(b); j += 4096 {
				b[j] = 1
			}
			keep = append(keep, b)
		}
		fmt.Println("allocated", len(keep), "MiB")
	case "fork":
		// A process bomb: start copies of itself that sleep, until the
		// system refuses.
		n := 0
		for ; n < 100000; n++ {
			c := exec.Command("/proc/self/exe", "sleep")
			if err := c.Start(); err != nil {
				fmt.Printf("fork refused after %d processes: %v\n", n, err)
				os.Exit(0)
			}
		}
		fmt.Printf("started %d processes, none refused\n", n)
		os.Exit(1)
	case "serve":
		// serve ADDR: an HTTP server (the services' tests): /health
		// answers 200, anything else "hello from a service PATH".
		http.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
		http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "hello from a service %s\n", r.URL.Path)
		})
		fmt.Println("serving on", args[0])
		if err := http.ListenAndServe(args[0], nil); err != nil {
			fmt.Println("serve:", err)
			os.Exit(1)
		}
	case "sleep":
		fmt.Println("sleeping")
		time.Sleep(24 * time.Hour)
	case "spin":
		// spin N: burn the CPU on N threads until killed (the pause
		// tests' CPU hog).
		n, _ := strconv.Atoi(args[0])
		fmt.Printf("spinning on %d threads\n", n)
		for range n - 1 {
			go spin()
		}
		spin()
	case "exit":
		code, _ := strconv.Atoi(args[0])
		fmt.Println("exiting", code)
		os.Exit(code)
	case "count":
		// count N WORK PAUSE: the checkpointing counter of the e2e tests
		// (test/e2e/testdata/counter's, with the same state, log and
		// output): N steps, each folding WORK SHA-256 rounds into a chain
		// and then pausing PAUSE (a duration), the state (the step reached
		// and the chain) written atomically to state under
		// $GPUNET_CHECKPOINT_DIR after each step and resumed from when it
		// is there; the result goes to /out/result.txt.
		n, _ := strconv.Atoi(args[0])
		work, _ := strconv.Atoi(args[1])
		pause, _ := time.ParseDuration(args[2])
		state := filepath.Join(os.Getenv("GPUNET_CHECKPOINT_DIR"), "state")
		i, acc := 0, make([]byte, 32)
		if r := os.Getenv("NODE_RANK"); r != "" {
			// A gang member's chain starts from its rank, so that a
			// member resumed from another rank's state gives another
			// result.
			h := sha256.Sum256([]byte("rank/" + r))
			acc = h[:]
		}
		if b, err := os.ReadFile(state); err == nil {
			var h string
			if _, err := fmt.Sscanf(string(b), "%d %s", &i, &h); err == nil {
				acc, _ = hex.DecodeString(h)
				fmt.Printf("resuming at step %d (checkpoint %s)\n", i, os.Getenv("GPUNET_RESUME_SEQ"))
			}
		}
		for ; i < n; i++ {
			for range work {
				h := sha256.Sum256(fmt.Appendf(acc, "/%d", i))
				acc = h[:]
			}
			tmp := state + ".tmp"
			if err := os.WriteFile(tmp, fmt.Appendf(nil, "%d %x\n", i+1, acc), 0o644); err != nil {
				fmt.Println("count:", err)
				os.Exit(1)
			}
			if err := os.Rename(tmp, state); err != nil {
				fmt.Println("count:", err)
				os.Exit(1)
			}
			time.Sleep(pause)
		}
		if err := os.MkdirAll("/out", 0o755); err != nil {
			fmt.Println("count:", err)
			os.Exit(1)
		}
		if err := os.WriteFile("/out/result.txt", fmt.Appendf(nil, "%d %x\n", n, acc), 0o644); err != nil {
			fmt.Println("count:", err)
			os.Exit(1)
		}
		fmt.Println("done")
	default:
		fmt.Println("unknown command", os.Args[1])
		os.Exit(2)
	}
}

// spin burns the CPU for ever.
func spin() {
	x := uint64(1)
	for {
		x = x*6364136223846793005 + 1442695040888963407
		if x == 0 {
			fmt.Println(x)
		}
	}
}
