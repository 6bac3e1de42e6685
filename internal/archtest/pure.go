package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Purity is what a deterministic package may depend on (DESIGN.md section
// 4): the ledger and the packages it imports.
type Purity struct {
	// Allowed are the non-standard packages the package may depend on,
	// itself included.
	Allowed []string
	// ForbiddenStd are standard packages its non-test files must not
	// import.
	ForbiddenStd []string
	// ForbiddenCalls are selector expressions they must not contain,
	// e.g. "time.Now".
	ForbiddenCalls []string
}

// CheckPure checks the package in the working directory (a test's own):
// its dependencies, its non-test files' imports, calls and go statements.
func CheckPure(t *testing.T, rule Purity) {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if !slices.Contains(rule.Allowed, p) {
			t.Errorf("depends on %s; only the standard library and %v are allowed", p, rule.Allowed)
		}
	}
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		checked++
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if p := strings.Trim(imp.Path.Value, `"`); slices.Contains(rule.ForbiddenStd, p) {
				t.Errorf("%s imports %s", name, p)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: go statement at %s: deterministic code starts no goroutines", name, fset.Position(n.Pos()))
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && slices.Contains(rule.ForbiddenCalls, id.Name+"."+n.Sel.Name) {
					t.Errorf("%s: %s.%s at %s: deterministic code reads no clock", name, id.Name, n.Sel.Name, fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no source files checked")
	}
}
