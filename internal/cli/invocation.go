package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// The commands gpunet suggests ("Try: …", "follow it with: …", "print it
// again with: …") are written as the user ran this program, so that they
// can be pasted as they are: "gpunet" when the shell found it on PATH,
// the path typed ("./gpunet") otherwise, and "go run ./cmd/gpunet" under
// go run, whose binary lives in the build cache or a temporary directory
// that is gone when it exits.

// progName, when set, is the program's name in hints instead of how
// os.Args[0] says it was run (tests set it).
var progName string

var invokedOnce = sync.OnceValue(func() string { return invokedAs(os.Args[0], exec.LookPath) })

// program is how to run this program again, as the user did: the first
// words of every command a hint prints.
func program() string {
	if progName != "" {
		return progName
	}
	return invokedOnce()
}

// hint is the command line args (a hint's words after the program's
// name) as the user would type it: program() args.
func hint(args string) string { return program() + " " + args }

// goRunCache matches the directory of a binary go run cached in the build
// cache (GOCACHE/xx/<64 hex>-d/NAME).
var goRunCache = regexp.MustCompile(`^[0-9a-f]{64}-d$`)

// invokedAs says how to run again the program that was started as arg0
// (os.Args[0]); lookPath is exec.LookPath.
func invokedAs(arg0 string, lookPath func(string) (string, error)) string {
	dir := filepath.Dir(arg0)
	if strings.Contains(arg0, string(filepath.Separator)+"go-build") || goRunCache.MatchString(filepath.Base(dir)) {
		return "go run ./cmd/gpunet"
	}
	if !strings.ContainsRune(arg0, filepath.Separator) {
		return arg0 // the shell found it on PATH
	}
	// A path: where PATH finds the same program by its name, the name
	// is enough.
	name := filepath.Base(arg0)
	if p, err := lookPath(name); err == nil && sameFile(p, arg0) {
		return name
	}
	return arg0
}

func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}
