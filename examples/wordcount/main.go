// Command wordcount is gpunet's example WASI job: it counts the lines,
// words and bytes of the files named in its arguments and writes them, with
// the ten most frequent words, to /out/counts.txt (and a summary line to
// stdout). It is an ordinary Go program:
//
//	GOOS=wasip1 GOARCH=wasm go build -o wordcount.wasm .   # the job's module
//	go run . -out counts.txt input.txt                     # the same, natively
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpunet/gpunet/examples/wordcount/count"
)

func main() {
	out := flag.String("out", "/out/counts.txt", "where to write the counts")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: wordcount [-out FILE] FILE...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "wordcount:", err)
		os.Exit(1)
	}
}

func run(out string, files []string) error {
	var c count.Counts
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		err = c.Add(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := c.Report(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Println(c.Summary())
	return nil
}
