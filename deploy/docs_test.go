package deploy

import (
	"bufio"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The operators' pages show commands for machines this test does not have
// (three validators, a GPU provider, systemd), so it cannot run them as
// TestREADME runs the README's. It checks instead that every gpunet
// command line of their ```sh blocks names a command that exists, with
// flags it has (checkParses), so that a renamed command or flag fails here
// rather than on an operator's machine.

// docCommand is a gpunet command line of a page.
type docCommand struct {
	line int      // where it starts in the page
	args []string // the words after gpunet
}

// docCommands returns the gpunet commands of path's ```sh blocks: each
// line (a trailing backslash continues it), split into the commands of a
// pipeline or list, with leading VAR=value words and sudo (with -u USER)
// taken off.
func docCommands(t *testing.T, path string) []docCommand {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cmds []docCommand
	sc := bufio.NewScanner(f)
	in, n, start, pending := false, 0, 0, ""
	for sc.Scan() {
		n++
		l := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(l, "```sh"):
			in = true
			continue
		case strings.HasPrefix(l, "```"):
			in = false
			continue
		case !in:
			continue
		}
		if pending == "" {
			start = n
		}
		if strings.HasSuffix(l, `\`) {
			pending += strings.TrimSuffix(l, `\`) + " "
			continue
		}
		line := pending + l
		pending = ""
		words, err := shellWords(line)
		if err != nil {
			t.Fatalf("%s:%d: %v", path, start, err)
		}
		for _, cmd := range splitCommands(words) {
			if args, ok := gpunetArgs(cmd); ok {
				cmds = append(cmds, docCommand{start, args})
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cmds
}

// shellWords splits a shell line into words as sh would, quotes removed,
// up to a comment; the operators | ; & && || ( ) stand as words of their
// own. It knows no expansions: $VAR stays as written.
func shellWords(line string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, w.String())
			w.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			flush()
		case c == '#' && !inWord:
			flush()
			return words, nil
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated ' in %q", line)
			}
			w.WriteString(line[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case c == '"':
			j := i + 1
			for ; j < len(line) && line[j] != '"'; j++ {
				if line[j] == '\\' && j+1 < len(line) {
					j++
				}
				w.WriteByte(line[j])
			}
			if j >= len(line) {
				return nil, fmt.Errorf("unterminated \" in %q", line)
			}
			inWord = true
			i = j
		case c == '\\' && i+1 < len(line):
			i++
			w.WriteByte(line[i])
			inWord = true
		case strings.IndexByte("|;&()", c) >= 0:
			flush()
			op := string(c)
			if i+1 < len(line) && (c == '|' || c == '&') && line[i+1] == c {
				op += op
				i++
			}
			words = append(words, op)
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return words, nil
}

// splitCommands splits words at the shell's operators.
func splitCommands(words []string) [][]string {
	var cmds [][]string
	var cur []string
	for _, w := range words {
		if slices.Contains([]string{"|", "||", "&", "&&", ";", "(", ")"}, w) {
			if len(cur) > 0 {
				cmds = append(cmds, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, w)
	}
	if len(cur) > 0 {
		cmds = append(cmds, cur)
	}
	return cmds
}

var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// gpunetArgs returns the arguments of cmd when it runs gpunet (by name or
// path, through env assignments, env or sudo).
func gpunetArgs(cmd []string) ([]string, bool) {
	for len(cmd) > 0 {
		switch {
		case assignment.MatchString(cmd[0]), cmd[0] == "env":
			cmd = cmd[1:]
		case cmd[0] == "sudo":
			cmd = cmd[1:]
			for len(cmd) > 0 && strings.HasPrefix(cmd[0], "-") {
				if cmd[0] == "-u" || cmd[0] == "-g" {
					cmd = cmd[1:]
				}
				cmd = cmd[1:]
			}
		case path.Base(cmd[0]) == "gpunet":
			return cmd[1:], true
		default:
			return nil, false
		}
	}
	return nil, false
}

// checkDocCommands checks every gpunet command of page, which must have
// at least min of them (fewer: the extraction is broken, or the page
// lost its steps).
func checkDocCommands(t *testing.T, page string, min int) {
	p := filepath.Join("..", "docs", page)
	cmds := docCommands(t, p)
	if len(cmds) < min {
		t.Fatalf("docs/%s: %d gpunet command lines found, want at least %d", page, len(cmds), min)
	}
	for _, c := range cmds {
		if err := checkParses(t.Context(), c.args); err != nil {
			t.Errorf("docs/%s:%d: gpunet %s: %v", page, c.line, strings.Join(c.args, " "), err)
		}
	}
}

// TestOperatorDocs: docs/operators.md's gpunet command lines parse.
func TestOperatorDocs(t *testing.T) { checkDocCommands(t, "operators.md", 16) }

// TestProviderDocs: docs/provider.md's gpunet command lines parse.
func TestProviderDocs(t *testing.T) { checkDocCommands(t, "provider.md", 11) }

// TestDocCommandsExtraction: the extraction finds gpunet wherever a page
// may run it, and nothing else.
func TestDocCommandsExtraction(t *testing.T) {
	page := filepath.Join(t.TempDir(), "page.md")
	text := "text `gpunet not-in-a-block`\n" +
		"```sh\n" +
		"sudo -u gpunet gpunet status --home /var/lib/gpunet   # a comment with gpunet in it\n" +
		"GPUNET_NODE=http://x:8080 /usr/local/bin/gpunet offers 'gpu=RTX_4090 region=eu' | head\n" +
		"curl -s http://x/ && gpunet query validators \\\n" +
		"  --node \"http://x:8080\"\n" +
		"echo gpunet\n" +
		"```\n" +
		"```yaml\ngpunet: not a command\n```\n"
	if err := os.WriteFile(page, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	got := docCommands(t, page)
	want := []docCommand{
		{3, []string{"status", "--home", "/var/lib/gpunet"}},
		{4, []string{"offers", "gpu=RTX_4090 region=eu"}},
		{5, []string{"query", "validators", "--node", "http://x:8080"}},
	}
	if !slices.EqualFunc(got, want, func(a, b docCommand) bool { return a.line == b.line && slices.Equal(a.args, b.args) }) {
		t.Errorf("docCommands = %+v, want %+v", got, want)
	}
}
