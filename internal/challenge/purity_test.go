package challenge_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportRule keeps this package importable by the ledger (DESIGN.md
// section 4, internal/ledger/purity_test.go): the standard library only,
// no OS, network, randomness, clock or goroutines. The prover, which may
// use all of those, lives in the subpackage prove.
func TestImportRule(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/gpunet/gpunet/internal/challenge" {
			t.Errorf("challenge depends on %s; only the standard library is allowed", p)
		}
	}
	forbiddenStd := []string{"os", "net", "net/http", "math/rand", "math/rand/v2", "crypto/rand", "sync", "sync/atomic", "io/fs", "syscall", "unsafe", "reflect", "runtime", "time"}
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
			p := strings.Trim(imp.Path.Value, `"`)
			for _, bad := range forbiddenStd {
				if p == bad {
					t.Errorf("%s imports %s", name, p)
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if g, ok := n.(*ast.GoStmt); ok {
				t.Errorf("%s: go statement at %s: the ledger starts no goroutines", name, fset.Position(g.Pos()))
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no source files checked")
	}
}
