package archtest

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

type pkg struct {
	ImportPath string
	Doc        string
	Imports    []string
	Name       string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "github.com/gpunet/gpunet/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 5 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

// TestOnlyAdaptersImportCometBFT keeps consensus machinery in the adapter
// packages (STYLE.md: dependency direction is the architecture).
func TestOnlyAdaptersImportCometBFT(t *testing.T) {
	allowed := map[string]bool{
		"github.com/gpunet/gpunet/internal/abciapp":   true,
		"github.com/gpunet/gpunet/internal/validator": true,
		"github.com/gpunet/gpunet/internal/bench":     true, // runs CometBFT's kvstore as the baseline
	}
	for _, p := range listPackages(t) {
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, "github.com/cometbft/") && !allowed[p.ImportPath] {
				t.Errorf("%s imports %s; only %v may", p.ImportPath, imp, allowed)
			}
		}
	}
}

// TestEveryPackageHasDoc requires a package comment saying what each
// package is for.
func TestEveryPackageHasDoc(t *testing.T) {
	for _, p := range listPackages(t) {
		if p.Name != "main" && strings.TrimSpace(p.Doc) == "" {
			t.Errorf("package %s has no package comment", p.ImportPath)
		}
	}
}
