package ledger

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// docs/ledger.md is the ledger's reference: these tests fail when it lacks
// a message type, a registered invariant or a parameter, or when its
// parameter table says other than the registry.

// ledgerDocSection returns the lines of docs/ledger.md from the heading
// that starts with heading to the next heading of the same or a higher
// level.
func ledgerDocSection(t *testing.T, heading string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "ledger.md"))
	if err != nil {
		t.Fatal(err)
	}
	level := strings.Index(heading, " ")
	var out []string
	in := false
	for _, l := range strings.Split(string(data), "\n") {
		if in && strings.HasPrefix(l, "#") {
			if n := strings.Index(l, " "); n > 0 && n <= level && strings.Trim(l[:n], "#") == "" {
				break
			}
		}
		if strings.HasPrefix(l, heading) {
			in = true
		}
		if in {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		t.Fatalf("docs/ledger.md has no section %q", heading)
	}
	return out
}

func TestDocListsEveryMessage(t *testing.T) {
	text := strings.Join(ledgerDocSection(t, "### Messages"), "\n")
	for _, mt := range MsgTypes() {
		if row := fmt.Sprintf("\n| %d | %s |", mt, mt); !strings.Contains(text, row) {
			t.Errorf("docs/ledger.md, Messages: no row %q", strings.TrimSpace(row))
		}
	}
}

func TestDocListsEveryInvariant(t *testing.T) {
	text := strings.Join(ledgerDocSection(t, "## Invariants"), "\n")
	for _, f := range invariants {
		name := runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name()
		name = name[strings.LastIndex(name, ".")+1:]
		if !strings.Contains(text, "`"+name+"`") {
			t.Errorf("docs/ledger.md, Invariants: %s is not listed", name)
		}
	}
}

// TestDocParamsTable: the Parameters table is the registry, row by row:
// name, kind, default, bounds, step and description. On failure it prints
// the table to paste.
func TestDocParamsTable(t *testing.T) {
	var got []string
	for _, l := range ledgerDocSection(t, "## Parameters") {
		if strings.HasPrefix(l, "| `") {
			got = append(got, l)
		}
	}
	var want []string
	def := DefaultParams()
	for _, s := range ParamRegistry() {
		v, _ := def.Get(s.Name)
		want = append(want, fmt.Sprintf("| `%s` | %s | %s | %s … %s | %s | %s |",
			s.Name, s.Kind, groupDigits(v), groupDigits(s.Min), groupDigits(s.Max), docStep(s), s.Desc))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		for i := range max(len(got), len(want)) {
			var g, w string
			if i < len(got) {
				g = got[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if g != w {
				t.Errorf("docs/ledger.md, Parameters, row %d:\n got %s\nwant %s", i+1, g, w)
				break
			}
		}
		t.Logf("the table's rows, from the registry:\n%s", strings.Join(want, "\n"))
	}
}

// groupDigits writes v with a comma between groups of three digits.
func groupDigits(v uint64) string {
	s := strconv.FormatUint(v, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// docStep writes a parameter's largest step per proposal: an amount, a
// share of the value, or the larger of the two.
func docStep(s ParamSpec) string {
	pct := strings.TrimSuffix(strings.TrimRight(strconv.FormatFloat(float64(s.MaxStepPPM)/10_000, 'f', 4, 64), "0"), ".") + "%"
	switch {
	case s.MaxStepPPM == 0:
		return groupDigits(s.MaxStep)
	case s.MaxStep == 0:
		return pct
	}
	return fmt.Sprintf("max(%s, %s)", groupDigits(s.MaxStep), pct)
}
