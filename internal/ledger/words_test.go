package ledger_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
)

// Words out of consensus (issue 28): the ledger records codes and
// numbers, and internal/jobtext renders sentences. A sentence in a hashed
// record would make a reworded message a fork between validators on
// different versions. These tests fail when English comes back.

// pendingSentences are the record fields still written as sentences, and
// by what, until those sites are converted to a Wait (remove an entry
// with its last writer).
var pendingSentences = map[string]string{}

// suppliedText are the string fields whose text a party supplied (an
// owner's spec, a provider's declaration or failure reason): data quoted
// by the renderer, never our words. A field of a struct listed as
// "Type.*" is allowed whole.
var suppliedText = []string{
	"JobSpec.*", "ServiceSpec.*", "ProviderInfo.*", // declared by owners and providers
	"JobResult.Reason", // the provider's failure reason (MsgCommitResult, bounded)
	"Job.Released",     // the provider's release reason (MsgReleaseJob, bounded)
	"Wait.Text",        // quoted by jobtext (see Wait)
	"ReplicaEnd.Text",  // the provider's or owner's reason (bounded)
	"Job.ConsumerKey",  // an age recipient
	"Provider.Moniker", // a name
}

// TestNoSentencesInRecords walks every record the lifecycle chain (a
// job placed, audited, revealed and settled; a cheater outvoted and
// slashed; a job nobody can place; a lapsed grant) leaves, and fails on
// a string with a space in a field that is not supplied text: codes,
// states, hashes and addresses have none, sentences do.
func TestNoSentencesInRecords(t *testing.T) {
	c := lifecycleChain(t)
	var recs []any
	for id := uint64(1); id <= 4; id++ {
		recs = append(recs, job(t, c, id))
	}
	for _, k := range provs[:4] {
		recs = append(recs, provider(t, c, k))
	}
	for _, r := range recs {
		walkStrings(reflect.ValueOf(r).Elem(), "", func(path, s string) {
			if !strings.Contains(s, " ") || allowedText(path) {
				return
			}
			if _, pending := pendingSentences[lastField(path)]; pending {
				return
			}
			t.Errorf("%s = %q: a sentence in a record (record a code and its numbers in a ledger.Wait; internal/jobtext renders it)", path, s)
		})
	}
}

// lastField is "Type.Field" of a path "Job.Assignments[0].Result.Reason"
// as the struct type that holds it names it: walkStrings writes paths
// with type names.
func lastField(path string) string {
	parts := strings.Split(path, "/")
	return parts[len(parts)-1]
}

func allowedText(path string) bool {
	for _, part := range strings.Split(path, "/") {
		typ, _, _ := strings.Cut(part, ".")
		if slices.Contains(suppliedText, part) || slices.Contains(suppliedText, typ+".*") {
			return true
		}
	}
	return false
}

// walkStrings calls fn with every string reachable from v and its path:
// "/"-separated "Type.Field" steps.
func walkStrings(v reflect.Value, path string, fn func(path, s string)) {
	switch v.Kind() {
	case reflect.String:
		fn(path, v.String())
	case reflect.Pointer:
		if !v.IsNil() {
			walkStrings(v.Elem(), path, fn)
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := range v.Len() {
			walkStrings(v.Index(i), path, fn)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			walkStrings(v.MapIndex(k), path+"["+k.String()+"]", fn)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if f.IsExported() {
				walkStrings(v.Field(i), strings.TrimPrefix(path+"/"+v.Type().Name()+"."+f.Name, "/"), fn)
			}
		}
	}
}

// TestNoFormattedTextInRecordFields: no file of the ledger assigns the
// result of fmt.Sprintf, or a concatenation with a string literal, to a
// field of a record type (nor sets one in a composite literal), and none
// imports internal/jobtext (the renderer depends on the ledger, never the
// reverse; TestImportRule checks the transitive dependencies too).
func TestNoFormattedTextInRecordFields(t *testing.T) {
	fields := map[string]bool{}
	for _, r := range []any{ledger.Job{}, ledger.Provider{}, ledger.Service{}, ledger.Proposal{}, ledger.Wait{}} {
		collectStringFields(reflect.TypeOf(r), fields, map[reflect.Type]bool{})
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasSuffix(p, "/internal/jobtext") {
				t.Errorf("%s imports %s: the ledger must not depend on its renderer", name, p)
			}
		}
		f, err = parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		report := func(at token.Pos, field string) {
			t.Errorf("%s: formatted text assigned to record field %s: record a code and its numbers (ledger.Wait) instead", fset.Position(at), field)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				for i, lhs := range n.Lhs {
					sel, ok := lhs.(*ast.SelectorExpr)
					if !ok || !fields[sel.Sel.Name] || i >= len(n.Rhs) {
						continue
					}
					if isFormatted(n.Rhs[i]) {
						report(n.Pos(), sel.Sel.Name)
					}
				}
			case *ast.KeyValueExpr:
				if id, ok := n.Key.(*ast.Ident); ok && fields[id.Name] && isFormatted(n.Value) {
					report(n.Pos(), id.Name)
				}
			}
			return true
		})
	}
}

// collectStringFields adds the names of the string fields of t and of the
// structs it reaches.
func collectStringFields(t reflect.Type, out map[string]bool, seen map[reflect.Type]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return
	}
	seen[t] = true
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type.Kind() == reflect.String {
			out[f.Name] = true
		}
		collectStringFields(f.Type, out, seen)
	}
}

// isFormatted reports whether e is fmt.Sprintf(…) or a + with a string
// literal in it.
func isFormatted(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.CallExpr:
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "fmt" && strings.HasPrefix(sel.Sel.Name, "Sprint") {
				return true
			}
		}
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			return isStringLit(e.X) || isStringLit(e.Y) || isFormatted(e.X) || isFormatted(e.Y)
		}
	case *ast.ParenExpr:
		return isFormatted(e.X)
	}
	return false
}

func isStringLit(e ast.Expr) bool {
	l, ok := e.(*ast.BasicLit)
	return ok && l.Kind == token.STRING
}
