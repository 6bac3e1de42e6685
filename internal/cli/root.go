// Package cli is the gpunet command line: one file per verb group. It parses
// flags, calls library packages and prints; it holds no business logic.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/validator"
)

// Exit codes.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
	// ExitHalted: `node` or `devnet` stopped because the validator's
	// consensus halted (validator.ErrConsensusHalted); a supervisor should
	// restart the process.
	ExitHalted = 3
	// ExitJobFailed and ExitJobCancelled: `job wait` (and `job run`,
	// `job get`) saw the job end failed or cancelled.
	ExitJobFailed    = 4
	ExitJobCancelled = 5
)

// env holds what every command shares: global flags and output streams.
type env struct {
	home   string
	node   string
	output string
	// keyringPassFile is --keyring-passphrase-file (keys_passphrase.go).
	keyringPassFile string
	stdout          io.Writer
	stderr          io.Writer
}

// usageError marks errors in how a command was called.
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

// Run runs the gpunet command line with args (without the program name) and
// returns the process exit code. Commands that read stdin (a job spec
// given as -) read os.Stdin.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return RunIO(ctx, args, os.Stdin, stdout, stderr)
}

// RunIO is Run with stdin.
func RunIO(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "gpunet",
		Short:         "gpunet: a decentralized GPU compute network",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if e.output != "text" && e.output != "json" {
				if cmd.Name() == "offers" {
					// -o sorted offers once.
					return usageError{fmt.Errorf("-o/--output %q: want text or json (to sort offers: --sort %s)", e.output, e.output)}
				}
				return usageError{fmt.Errorf("-o/--output %q: want text or json", e.output)}
			}
			return nil
		},
	}
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&e.home, "home", defaultHome(), "gpunet home directory (env GPUNET_HOME)")
	pf.StringVar(&e.node, "node", os.Getenv("GPUNET_NODE"), "node API address, or several comma-separated nodes of one network, tried in turn when one is unreachable (default: the API of the node in --home; env GPUNET_NODE)")
	pf.StringVarP(&e.output, "output", "o", "text", "output format: text or json")
	pf.StringVar(&e.keyringPassFile, "keyring-passphrase-file", "", "file whose first line is the passphrase of encrypted keys (else $GPUNET_KEYRING_PASSPHRASE, else a prompt)")
	root.AddCommand(
		versionCmd(e), initCmd(e), nodeCmd(e), devnetCmd(e), statusCmd(e),
		keysCmd(e), txCmd(e), queryCmd(e), benchCmd(e),
		providerCmd(e), offersCmd(e), stakeCmd(e), quoteCmd(e), jobCmd(e), imageCmd(e),
		sandboxExecCmd(e), validatorCmd(e), testnetCmd(e), govCmd(e), storageCmd(e), serviceCmd(e),
		attestCmd(e),
	)
	strictGroups(root)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	if e.output == "json" {
		json.NewEncoder(stderr).Encode(jsonError(err))
	} else {
		fmt.Fprintln(stderr, "Error:", err)
	}
	var ue usageError
	var jo jobOutcomeError
	switch {
	case errors.Is(err, validator.ErrConsensusHalted):
		// First: the cause's text (e.g. "invalid argument") may look like
		// a usage error to isCobraUsage.
		return ExitHalted
	case errors.As(err, &jo) && jo.j.State == ledger.JobCancelled:
		return ExitJobCancelled
	case errors.As(err, &jo):
		return ExitJobFailed
	case errors.As(err, &ue) || isCobraUsage(err):
		return ExitUsage
	}
	return ExitError
}

// specProblem is one problem with a job spec in a JSON error.
type specProblem struct {
	File    string `json:"file,omitempty"`
	Field   string `json:"field,omitempty"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Message string `json:"message"`
}

// jsonError is an error as --output json writes it on stderr:
// {"error": MESSAGE}, and for a job spec's problems each one's field,
// line and column in "problems".
func jsonError(err error) any {
	out := struct {
		Error    string        `json:"error"`
		Problems []specProblem `json:"problems,omitempty"`
	}{Error: err.Error()}
	var es jobspec.Errors
	var one *jobspec.Error
	switch {
	case errors.As(err, &es):
	case errors.As(err, &one):
		es = jobspec.Errors{one}
	}
	for _, p := range es {
		out.Problems = append(out.Problems, specProblem{File: p.File, Field: p.Field, Line: p.Line, Column: p.Column, Message: p.Msg})
	}
	return out
}

// strictGroups makes every command that only groups subcommands (job,
// keys, query, …) fail on an unknown subcommand, as the root does, instead
// of printing its help and succeeding; alone, it prints its help.
func strictGroups(c *cobra.Command) {
	for _, sub := range c.Commands() {
		strictGroups(sub)
	}
	if !c.HasSubCommands() || c.Runnable() || !c.HasParent() {
		return
	}
	c.SuggestionsMinimumDistance = 2 // cobra's default for the root
	c.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf("; did you mean %s?", strings.Join(s, " or "))
		}
		return usageError{fmt.Errorf("%s (see `%s --help`)", msg, cmd.CommandPath())}
	}
	c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
}

func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "accepts ", "requires ", "invalid argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

func defaultHome() string {
	if h := os.Getenv("GPUNET_HOME"); h != "" {
		return h
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".gpunet")
	}
	return ".gpunet"
}

// print writes v as JSON with --output json, or calls text otherwise.
func (e *env) print(v any, text func(w io.Writer)) error {
	if e.output == "json" {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	text(e.stdout)
	return nil
}

// keyring opens the keyring of --home: keys it creates are encrypted, and
// encrypted keys decrypted, with the passphrase e.passphrase supplies.
func (e *env) keyring() (*keys.Keyring, error) {
	return keys.Open(filepath.Join(e.home, "keyring"), keys.WithPassphrase(e.passphrase()))
}

// client returns a client for --node (one node or a comma-separated list),
// or for the API of the node in --home.
func (e *env) client() (*chainclient.Client, error) {
	if e.node != "" {
		return chainclient.New(e.node), nil
	}
	c, err := validator.LoadConfig(e.home)
	if err != nil {
		return nil, fmt.Errorf("no node to talk to: pass --node ADDR, or use the --home of a running node (%w)", err)
	}
	return chainclient.New(c.API), nil
}

// exactArgs is cobra.ExactArgs with a message that names the arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return usageError{fmt.Errorf("%s takes %d argument(s) (%v), got %d; see `%s --help`", cmd.CommandPath(), len(names), names, len(args), cmd.CommandPath())}
		}
		return nil
	}
}
