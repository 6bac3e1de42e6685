// Command probejudge is a judge program for the provider's tests of
// compare.program: what it does is read from /a/mode.
//
//	same    exit 0, if it was run as "job /a /b" and can read /b/mode
//	diff    exit 1
//	loop    never ends
//	panic   a Go panic (exit 2)
//	write   try to change /a and /b and to make /tmp; exit 0 if anything worked
//	escape  try to read ../secret beyond its root; exit 0 if it could
package main

import (
	"fmt"
	"os"
	"slices"
)

func main() {
	mode, err := os.ReadFile("/a/mode")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	switch string(mode) {
	case "same":
		if _, err := os.ReadFile("/b/mode"); err != nil || !slices.Equal(os.Args[1:], []string{"/a", "/b"}) {
			fmt.Fprintln(os.Stderr, "args", os.Args, err)
			os.Exit(4)
		}
	case "diff":
		os.Exit(1)
	case "loop":
		for n := 0; ; n++ {
			if n < 0 {
				break
			}
		}
	case "panic":
		panic("judge panics")
	case "write":
		var worked []string
		try := func(what string, err error) {
			if err == nil {
				worked = append(worked, what)
			}
		}
		try("write /a/mode", os.WriteFile("/a/mode", []byte("same"), 0o644))
		try("create /b/new", os.WriteFile("/b/new", []byte("x"), 0o644))
		try("mkdir /tmp", os.Mkdir("/tmp", 0o755))
		try("remove /b/mode", os.Remove("/b/mode"))
		if len(worked) > 0 {
			fmt.Println("changed:", worked)
			return
		}
		os.Exit(1)
	case "escape":
		for _, p := range []string{"/../secret", "../secret", "/a/../../secret", "../../secret"} {
			if b, err := os.ReadFile(p); err == nil {
				fmt.Printf("read %s: %q\n", p, b)
				return
			}
		}
		os.Exit(1)
	default:
		os.Exit(5)
	}
}
