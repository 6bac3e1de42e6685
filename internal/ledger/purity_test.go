package ledger_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportRule enforces DESIGN.md section 4: the ledger depends on the
// standard library and gpunet's pure packages only, never on CometBFT, the
// OS, the network or a source of randomness.
func TestImportRule(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := map[string]bool{
		"github.com/gpunet/gpunet/internal/ledger":    true,
		"github.com/gpunet/gpunet/internal/address":   true,
		"github.com/gpunet/gpunet/internal/challenge": true, // pure too: its own TestImportRule
	}
	for _, p := range strings.Fields(string(out)) {
		if !allowed[p] {
			t.Errorf("ledger depends on %s; only the standard library and %v are allowed", p, allowed)
		}
	}
	forbiddenStd := []string{"os", "net", "net/http", "math/rand", "math/rand/v2", "crypto/rand", "sync", "io/fs", "syscall", "unsafe", "reflect"}
	forbiddenCalls := []string{"time.Now", "time.Since", "time.Until", "time.Sleep", "time.After", "time.Tick", "time.NewTimer"}
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			for _, bad := range forbiddenStd {
				if p == bad {
					t.Errorf("%s imports %s", name, p)
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: go statement at %s: the ledger starts no goroutines", name, fset.Position(n.Pos()))
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok {
					for _, bad := range forbiddenCalls {
						if id.Name+"."+n.Sel.Name == bad {
							t.Errorf("%s: %s at %s: the ledger reads no clock", name, bad, fset.Position(n.Pos()))
						}
					}
				}
			}
			return true
		})
	}
}
