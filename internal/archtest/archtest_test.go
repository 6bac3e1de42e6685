package archtest

import (
	"encoding/json"
	"os/exec"
	"slices"
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
	allowed := []string{
		"github.com/gpunet/gpunet/internal/abciapp",
		"github.com/gpunet/gpunet/internal/validator",
		"github.com/gpunet/gpunet/internal/bench/ledgerbench", // runs CometBFT's kvstore as the baseline, on a node it builds itself
		"github.com/gpunet/gpunet/internal/bench/apibench",    // resumes a real node on a state it built, bootstrapping CometBFT's state as state sync would
		"github.com/gpunet/gpunet/internal/bench/syncbench",   // restores a snapshot through the ABCI calls CometBFT's state sync makes
	}
	for _, p := range listPackages(t) {
		ok := slices.ContainsFunc(allowed, func(a string) bool { return matches(p.ImportPath, a) })
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, "github.com/cometbft/") && !ok {
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
