package cli

import (
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// A benchmark is one `gpunet bench` subcommand. bind registers its flags
// on fresh options and returns the run that uses them.
type benchmark struct {
	name, short, long string
	bind              func(f *pflag.FlagSet) benchRun
}

// A benchRun checks the flags, runs the benchmark and returns its result;
// progress is where the benchmark reports as it goes (nil with --output
// json). A flag in error is a usageError.
type benchRun func(cmd *cobra.Command, e *env, progress io.Writer) (benchResult, error)

// benchResult is every benchmark's result: it prints itself as text, and
// --output json prints it as JSON.
type benchResult interface{ WriteText(io.Writer) error }

// benchmarks are the subcommands of `gpunet bench`, in the order help
// lists them.
var benchmarks = []benchmark{
	ledgerBenchmark, schedulerBenchmark, jobBenchmark, wasmBenchmark, containerBenchmark, serviceBenchmark, challengeBenchmark, verifyBenchmark, apiBenchmark, stateSyncBenchmark, gpuBenchmark,
}

func benchCmd(e *env) *cobra.Command {
	c := &cobra.Command{Use: "bench", Short: "Run benchmarks"}
	for _, b := range benchmarks {
		c.AddCommand(b.command(e))
	}
	return c
}

// command makes b's subcommand: flags bound, run, result printed.
func (b benchmark) command(e *env) *cobra.Command {
	c := &cobra.Command{Use: b.name, Short: b.short, Long: b.long, Args: exactArgs()}
	run := b.bind(c.Flags())
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		var progress io.Writer
		if e.output != "json" {
			progress = e.stderr
		}
		res, err := run(cmd, e, progress)
		if err != nil {
			return err
		}
		return e.print(res, func(w io.Writer) { res.WriteText(w) })
	}
	return c
}

// An output is a file a flag names (none if empty) and the writer of the
// options it goes to.
type output struct {
	path string
	w    *io.Writer
}

// createOutputs creates the outputs' files and sets their writers; close
// closes them all. On error none stays open.
func createOutputs(outs ...output) (close func(), err error) {
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	for _, o := range outs {
		if o.path == "" {
			continue
		}
		f, err := os.Create(o.path)
		if err != nil {
			closeAll()
			return nil, err
		}
		files = append(files, f)
		*o.w = f
	}
	return closeAll, nil
}
