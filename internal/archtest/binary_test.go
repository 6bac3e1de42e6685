package archtest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Why no binary links test code.
const (
	whyTesting  = "package testing is for test binaries: a shipped binary that links it carries test code, and whichever of its packages imports testing is a test helper that leaked out of the tests"
	whyHTTPTest = "net/http/httptest serves on loopback with a built-in certificate for tests; a shipped binary must serve through its own listeners and certificates"
	whyTestify  = "testify is an assertion library for tests (and ours use none)"
	whyHelpers  = "our test helpers (ocitest, ledgertest, apiservertest, …: a path segment ending in \"test\") take a testing.TB and fail tests; a binary that links one links package testing and test fixtures with it"
)

// testCode is what no binary may link. Our own test helpers are banned by
// name as well (testHelper).
var testCode = []ban{
	{"testing", whyTesting},
	{"net/http/httptest", whyHTTPTest},
	{"github.com/stretchr/testify/", whyTestify},
}

// testCodeImporters are the packages of other modules whose non-test files
// import test code, which our binaries link through a dependency they need:
// each says which file and why we accept it. Only the import by these
// packages is excused, not the packages they import, so that one of ours
// importing testing still fails; an entry no binary needs any more fails
// too, so that the list does not outlive its reasons.
var testCodeImporters = map[string]string{
	"github.com/cometbft/cometbft/libs/log":                    "testing_logger.go (NewTestingLogger) imports testing; the node logs through CometBFT's logger",
	"github.com/cometbft/cometbft/types":                       "test_util.go (MakeCommit, …) imports testing and testify/require; the node and its clients use CometBFT's types",
	"github.com/cometbft/cometbft/internal/consensus":          "wal_generator.go imports testing and testify/require; the node runs CometBFT's consensus",
	"github.com/google/go-containerregistry/pkg/registry":      "tls.go (registry.TLS) imports net/http/httptest; devnet serves the examples' images from registry.New",
	"github.com/google/go-containerregistry/internal/httptest": "pkg/registry's TLS helper, as above",
}

// testHelper reports whether p is one of our test helpers: a package of
// this module with a path segment ending in "test" (ocitest, ledgertest,
// archtest, test/e2e). internal/testnet, which `gpunet testnet` runs, is
// not one, nor internal/attest (`gpunet attest`), whose name is a word.
func testHelper(p string) bool {
	rest, ok := strings.CutPrefix(p, module)
	if !ok {
		return false
	}
	for seg := range strings.SplitSeq(rest, "/") {
		if strings.HasSuffix(seg, "test") && seg != "attest" {
			return true
		}
	}
	return false
}

// testCodeBan returns why p is test code no binary may link, or "".
func testCodeBan(p string) string {
	if testHelper(p) {
		return whyHelpers
	}
	for _, b := range testCode {
		if matches(p, b.prefix) {
			return b.why
		}
	}
	return ""
}

// checkNoTestCode returns one message for each import of test code in the
// binary root, whose dependencies pkgs holds, by a package that is neither
// test code itself nor in exempt, with the shortest chain of imports to
// the importer. used gets the exempt importers the binary links.
func checkNoTestCode(pkgs map[string]*listed, root string, exempt map[string]string, used map[string]bool) []string {
	g := walkImports(pkgs, root)
	var bad []string
	for _, p := range g.order {
		lp := pkgs[p]
		if lp == nil || testCodeBan(p) != "" {
			continue
		}
		for _, imp := range lp.Imports {
			why := testCodeBan(imp)
			if why == "" {
				continue
			}
			if _, ok := exempt[p]; ok && !strings.HasPrefix(p, module) {
				used[p] = true
				continue
			}
			short := strings.TrimPrefix(imp, module)
			bad = append(bad, fmt.Sprintf("links %s through %s → %s:\n\t%s", short, g.chain(p), short, why))
		}
	}
	return bad
}

// TestBinariesLinkNoTestCode walks the transitive dependencies of every
// binary under cmd/ (as Tailscale's deptest does for its binaries): what
// we ship links neither package testing, nor httptest, nor a test helper
// of ours. A helper that a binary needs belongs in a package of its own
// that imports no test code (as ocilayer, which the examples' image
// builders use and ocitest wraps for tests).
func TestBinariesLinkNoTestCode(t *testing.T) {
	pkgs := listDeps(t, []string{module + "cmd/..."})
	if _, ok := pkgs[module+"internal/cli"]; !ok {
		t.Fatal("the binaries do not link internal/cli: the walk would check nothing of ours")
	}
	used := map[string]bool{}
	binaries := 0
	for _, root := range slices.Sorted(func(yield func(string) bool) {
		for p, lp := range pkgs {
			if !lp.DepOnly && !yield(p) {
				return
			}
		}
	}) {
		binaries++
		for _, msg := range checkNoTestCode(pkgs, root, testCodeImporters, used) {
			t.Errorf("%s %s", strings.TrimPrefix(root, module), msg)
		}
	}
	if binaries == 0 {
		t.Fatal("go list found no binary under cmd/")
	}
	for p := range testCodeImporters {
		if !used[p] {
			t.Errorf("no binary links test code through %s any more: remove it from testCodeImporters", p)
		}
	}
}

// TestNoTestCodeRuleBites runs the check on a made-up graph in which the
// binary reaches testing through a helper of ours, and through an excused
// package of another module, so that TestBinariesLinkNoTestCode cannot
// pass by never looking.
func TestNoTestCodeRuleBites(t *testing.T) {
	bin, img, helper := module+"cmd/gpunet", module+"examples/internal/progimage", module+"internal/sandbox/oci/ocitest"
	logger := "example.org/engine/log"
	pkgs := map[string]*listed{
		bin:                 {ImportPath: bin, Imports: []string{img, logger}},
		img:                 {ImportPath: img, DepOnly: true, Imports: []string{"bytes", helper}},
		helper:              {ImportPath: helper, DepOnly: true, Imports: []string{"net/http/httptest", "testing"}},
		logger:              {ImportPath: logger, DepOnly: true, Imports: []string{"testing"}},
		"bytes":             {ImportPath: "bytes", Standard: true, DepOnly: true},
		"testing":           {ImportPath: "testing", Standard: true, DepOnly: true},
		"net/http/httptest": {ImportPath: "net/http/httptest", Standard: true, DepOnly: true, Imports: []string{"testing"}},
	}
	used := map[string]bool{}
	got := checkNoTestCode(pkgs, bin, map[string]string{logger: "its logger imports testing"}, used)
	want := "links internal/sandbox/oci/ocitest through cmd/gpunet → examples/internal/progimage → internal/sandbox/oci/ocitest:\n\t" + whyHelpers
	if len(got) != 1 || got[0] != want {
		t.Errorf("checkNoTestCode = %q, want [%q]", got, want)
	}
	if !used[logger] {
		t.Errorf("the excused importer %s was not marked used", logger)
	}
	// Without the excuse, the logger's import counts as well.
	if got := checkNoTestCode(pkgs, bin, nil, map[string]bool{}); len(got) != 2 {
		t.Errorf("without exemptions: %q, want two violations", got)
	}
	// An exemption for one of our packages excuses nothing.
	if got := checkNoTestCode(pkgs, bin, map[string]string{img: "no", logger: "its logger imports testing"}, map[string]bool{}); len(got) != 1 {
		t.Errorf("exempting our own %s: %q, want its violation still", img, got)
	}
	for p, want := range map[string]bool{
		module + "internal/ledger/ledgertest":       true,
		module + "test/e2e":                         true,
		module + "internal/testnet":                 false,
		module + "internal/bench/statestore":        false,
		"github.com/cometbft/cometbft/test/e2e/app": false,
	} {
		if got := testHelper(p); got != want {
			t.Errorf("testHelper(%s) = %v, want %v", p, got, want)
		}
	}
}
