package jobspec

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/gpunet/gpunet/internal/typo"
)

// Error is one problem with a job spec.
type Error struct {
	File   string // the spec file, when read by Load
	Field  string // the field's path, e.g. "resources.gpu.count" or "inputs[1].from"; empty for YAML syntax errors
	Line   int    // 1-based position in the YAML; 0 when not known
	Column int
	Msg    string // what is wrong and what would be right

	moot string // a field whose own errors this one explains, e.g. "timeout" for an unknown "timout"
}

func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d:%d: ", e.File, e.Line, e.Column)
	case e.File != "":
		fmt.Fprintf(&b, "%s: ", e.File)
	case e.Line > 0:
		fmt.Fprintf(&b, "line %d, column %d: ", e.Line, e.Column)
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in a job spec, ordered by position; those
// with no position come last. Parse, Load and Validate return a non-empty
// Errors as their error, so errors.As finds either an Errors or its first
// *Error.
type Errors []*Error

func (es Errors) Error() string {
	switch len(es) {
	case 0:
		return "no errors"
	case 1:
		return es[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems in the job spec:", len(es))
	for _, e := range es {
		b.WriteString("\n  ")
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap returns the errors one by one, for errors.Is and errors.As.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// covers reports whether an error in es already explains problems with
// field: one about the field itself, a field containing it, or a
// misspelling of it.
func (es Errors) covers(field string) bool {
	within := func(f, outer string) bool {
		return outer != "" && (f == outer || strings.HasPrefix(f, outer+".") || strings.HasPrefix(f, outer+"["))
	}
	for _, e := range es {
		if within(field, e.Field) || within(field, e.moot) {
			return true
		}
	}
	return false
}

// maxErrors is the most errors reported; a spec with more is better fixed
// from the top.
const maxErrors = 50

// err returns es as an error: nil when empty, otherwise sorted and cut to
// maxErrors.
func (es Errors) err() error {
	if len(es) == 0 {
		return nil
	}
	slices.SortStableFunc(es, func(a, b *Error) int {
		if (a.Line == 0) != (b.Line == 0) {
			if a.Line == 0 {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
	if len(es) > maxErrors {
		more := len(es) - maxErrors
		msg := fmt.Sprintf("and %d more problems", more)
		if more == 1 {
			msg = "and 1 more problem"
		}
		es = append(es[:maxErrors:maxErrors], &Error{Msg: msg})
	}
	return es
}

// suggest returns the candidate that a mistyped name most likely meant, or
// "" when none is close: the same name in another case or spelling of
// separators, or one within a small edit distance.
func suggest(name string, candidates []string) string {
	norm := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r == '-' || r == ' ' {
				return '_'
			}
			return r
		}, strings.ToLower(s))
	}
	n := norm(name)
	best, bestDist := "", 0
	for _, c := range candidates {
		if norm(c) == n {
			return c
		}
		// Allow one edit in short names and about one in three in longer ones.
		limit := max(1, min(3, len(c)/3))
		if d := typo.Distance(n, norm(c)); d <= limit && (best == "" || d < bestDist) {
			best, bestDist = c, d
		}
	}
	return best
}

// quoteList writes names as `"a", "b" or "c"`.
func quoteList(names []string) string {
	var b strings.Builder
	for i, n := range names {
		switch {
		case i == 0:
		case i == len(names)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", n)
	}
	return b.String()
}
