package deploy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/cli"
)

// requireTool returns the path of the program name, skipping the test when
// it is not installed, except with CI=true, where it fails: CI installs it
// (.ci/run, with the Debian package pkg).
func requireTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	msg := fmt.Sprintf("%s is not installed (Debian: apt-get install %s)", name, pkg)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// checkParses reports whether the gpunet command line args (without the
// program name) names an existing command with flags it has: it runs it
// with --help, which parses every flag and runs nothing (put before the
// first flag, so that no flag missing its value can take --help as its
// value and run the command), and checks that
// the words before the first flag resolve to a command rather than leaving
// a group command with an unknown subcommand (cobra prints a group's help
// for `gpunet validator creat --help`).
func checkParses(ctx context.Context, args []string) error {
	first := len(args) // the first flag
	for i, a := range args {
		if strings.HasPrefix(a, "-") {
			first = i
			break
		}
	}
	withHelp := append(append(append([]string{}, args[:first]...), "--help"), args[first:]...)
	var out, errOut bytes.Buffer
	if code := cli.Run(ctx, withHelp, &out, &errOut); code != cli.ExitOK {
		return fmt.Errorf("exit %d: %s", code, strings.TrimSpace(errOut.String()))
	}
	help := out.String()
	_, usage, ok := strings.Cut(help, "Usage:\n")
	if !ok {
		return fmt.Errorf("no Usage: in its help:\n%s", help)
	}
	usageWords := strings.Fields(strings.SplitN(usage, "\n", 2)[0])
	words := args[:first]
	// The command's path is "gpunet" and as many of words as the usage
	// line repeats; the rest are its positional arguments.
	k := 0
	for k < len(words) && k+1 < len(usageWords) && usageWords[k+1] == words[k] {
		k++
	}
	if strings.Contains(help, "\nAvailable Commands:\n") && k < len(words) {
		return fmt.Errorf("%q is not a subcommand of gpunet %s", words[k], strings.Join(words[:k], " "))
	}
	return nil
}

// TestCheckParsesBites: the check refuses what a drifted doc line would
// hold, and accepts what is right.
func TestCheckParsesBites(t *testing.T) {
	home := t.TempDir()
	for _, c := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"validator", "create", "--from", "op", "--stake", "100sync", "--pubkey", "ab", "--pop", "cd"}, true},
		{[]string{"tx", "send", "gpu1…", "5sync", "--from", "alice"}, true},
		{[]string{"node", "--home", "/var/lib/gpunet"}, true},
		{[]string{"validator", "creat", "--from", "op"}, false},                 // unknown subcommand of a group
		{[]string{"validator", "create", "--from", "op", "--stak", "1"}, false}, // unknown flag
		{[]string{"nod", "--home", "h"}, false},                                 // unknown command
		{[]string{"provider", "start", "--from", "k", "--no-such-flag"}, false}, // an unknown flag after valid ones
		{[]string{"init", "--home", home, "--join"}, false},                     // a flag without its value: refused, not run
	} {
		err := checkParses(t.Context(), c.args)
		if got := err == nil; got != c.ok {
			t.Errorf("gpunet %s: parses %v (%v), want %v", strings.Join(c.args, " "), got, err, c.ok)
		}
	}
	if entries, err := os.ReadDir(home); err != nil || len(entries) > 0 {
		t.Errorf("checking `gpunet init --home %s --join` wrote %d entries there (%v): it ran", home, len(entries), err)
	}
}
