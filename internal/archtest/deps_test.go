package archtest

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
)

// The module's import path; rules name packages relative to it.
const module = "github.com/gpunet/gpunet/"

// Why the node's engines stay out of everything but the node.
const (
	whyCometBFT = "clients must not link the consensus engine: a client binary would carry CometBFT (and through it Pebble), over a hundred packages it never runs, and a shared type would tie the wire format to the node's internals"
	whyPebble   = "clients must not link the node's storage engine: Pebble is the block store's and the tx index's, never a client's"
)

// engines are the dependencies no client or pure package may have.
var engines = []ban{
	{"github.com/cometbft/", whyCometBFT},
	{"github.com/cockroachdb/pebble", whyPebble},
}

// A ban is a dependency prefix and why it is banned. A prefix ending in "/"
// matches every path under it; one that does not matches that package and
// its subpackages.
type ban struct {
	prefix, why string
}

// A depRule holds the packages matching pkgs (relative to the module, "x/..."
// for x and every package below it) to banned transitive dependencies, and,
// when only is set, to only those non-standard ones.
type depRule struct {
	pkgs   []string
	banned []ban
	// only, when set, lists the non-standard packages (prefixes, as in a
	// ban) that the packages may depend on at all; onlyWhy says why.
	only    []string
	onlyWhy string
}

// pureLedger is what the ledger may depend on: the purity test of
// internal/ledger (archtest.CheckPure) allows the same.
var pureLedger = []string{module + "internal/ledger", module + "internal/address", module + "internal/challenge"}

var depRules = []depRule{
	{
		pkgs:    []string{"internal/ledger/..."},
		banned:  engines,
		only:    pureLedger,
		onlyWhy: "the ledger is the deterministic state machine (DESIGN.md section 4): it depends on the standard library and its own pure helpers only, so that every node computes the same app hash and the ledger is tested without a node",
	},
	{
		pkgs:    []string{"internal/admission"},
		banned:  engines,
		only:    []string{module + "internal/admission"},
		onlyWhy: "the API's connection admission sits under every request a node serves: it depends on the standard library only, so that it can be read and tested on its own",
	},
	{
		pkgs:    []string{"internal/challenge"},
		banned:  engines,
		only:    []string{module + "internal/challenge"},
		onlyWhy: "the ledger verifies challenges with this package, so it is as deterministic as the ledger and depends on the standard library only",
	},
	{
		pkgs:    []string{"internal/apiwire"},
		banned:  engines,
		only:    append(slices.Clone(pureLedger), module+"internal/apiwire", module+"internal/offers", module+"internal/typo"),
		onlyWhy: "the wire types are shared by the server and every client: they carry data, so they depend on the ledger's types (and the pure packages those need) only, and a client that decodes an answer links nothing of the server",
	},
	{
		pkgs: []string{
			"internal/challenge/prove", "internal/jobspec", "internal/offers", "internal/seal", "internal/keys",
			"internal/sandbox/...", "internal/hwinfo", "internal/gpu/...", "internal/attest",
			"internal/clusternet",
		},
		banned: engines,
	},
	{
		pkgs:    []string{"examples/allreduce/..."},
		banned:  engines,
		only:    []string{module + "examples/allreduce"},
		onlyWhy: "the cluster example stands for any distributed program a gang runs: it reads torchrun's variables and the members file and links nothing of gpunet's, so that what it needs is what docs/clusters.md promises",
	},
	{
		pkgs:   []string{"internal/chainclient", "internal/jobclient", "internal/provider", "internal/dashboard", "internal/netstats"},
		banned: engines,
	},
}

// matches reports whether p is named by the rule prefix pre.
func matches(p, pre string) bool {
	if strings.HasSuffix(pre, "/") {
		return strings.HasPrefix(p, pre)
	}
	return p == pre || strings.HasPrefix(p, pre+"/")
}

// covers reports whether the rule names package p.
func (r depRule) covers(p string) bool {
	for _, pat := range r.pkgs {
		if base, ok := strings.CutSuffix(pat, "/..."); ok {
			// Test helpers (ledgertest, …) ship in no binary.
			if matches(p, module+base) && !strings.HasSuffix(path.Base(p), "test") {
				return true
			}
		} else if p == module+pat {
			return true
		}
	}
	return false
}

// listed is a package as `go list -deps -json` describes it.
type listed struct {
	ImportPath string
	Standard   bool
	DepOnly    bool
	Imports    []string
	Deps       []string
}

// listDeps runs go list -deps on patterns: every package they name and
// every package those depend on, by import path.
func listDeps(t *testing.T, patterns []string) map[string]*listed {
	t.Helper()
	args := append([]string{"list", "-deps", "-json=ImportPath,Standard,DepOnly,Imports,Deps"}, patterns...)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list: %v\n%s", err, msg)
	}
	pkgs := map[string]*listed{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		p := new(listed)
		if err := dec.Decode(p); err != nil {
			t.Fatal(err)
		}
		pkgs[p.ImportPath] = p
	}
	return pkgs
}

// importGraph is a breadth-first walk of the imports from one package.
type importGraph struct {
	order []string          // the package and all it depends on, nearest first
	prev  map[string]string // who imports each first, on a shortest chain
}

func walkImports(pkgs map[string]*listed, root string) importGraph {
	g := importGraph{order: []string{root}, prev: map[string]string{root: ""}}
	for i := 0; i < len(g.order); i++ {
		if lp := pkgs[g.order[i]]; lp != nil {
			for _, imp := range lp.Imports {
				if _, seen := g.prev[imp]; !seen {
					g.prev[imp] = g.order[i]
					g.order = append(g.order, imp)
				}
			}
		}
	}
	return g
}

// chain returns the shortest chain of imports to dep ("a → b → dep").
func (g importGraph) chain(dep string) string {
	var c []string
	for p := dep; p != ""; p = g.prev[p] {
		c = append(c, strings.TrimPrefix(p, module))
	}
	slices.Reverse(c)
	return strings.Join(c, " → ")
}

// checkDeps applies rule to root, whose dependencies pkgs holds; it returns
// one message per ban broken (and one for the packages outside only), each
// with the shortest import chain into the banned packages.
func checkDeps(pkgs map[string]*listed, root string, rule depRule) []string {
	g := walkImports(pkgs, root)
	var bad []string
	report := func(what string, hits []string, why string) {
		if len(hits) == 0 {
			return
		}
		n := ""
		if len(hits) > 1 {
			n = fmt.Sprintf(" (%d packages: %s, …)", len(hits), strings.Join(hits[:min(len(hits), 3)], ", "))
		}
		bad = append(bad, fmt.Sprintf("depends on %s%s through %s:\n\t%s", what, n, g.chain(hits[0]), why))
	}
	claimed := map[string]bool{}
	for _, b := range rule.banned {
		var hits []string
		for _, dep := range g.order[1:] {
			if matches(dep, b.prefix) {
				hits = append(hits, dep)
				claimed[dep] = true
			}
		}
		report(b.prefix, hits, b.why)
	}
	if rule.only != nil {
		var hits []string
		for _, dep := range g.order[1:] {
			lp := pkgs[dep]
			if !claimed[dep] && lp != nil && !lp.Standard && !slices.ContainsFunc(rule.only, func(pre string) bool { return matches(dep, pre) }) {
				hits = append(hits, dep)
			}
		}
		if len(hits) > 0 {
			report(hits[0], hits, rule.onlyWhy+" (allowed: the standard library and "+strings.Join(rule.only, ", ")+")")
		}
	}
	return bad
}

// TestDependencies walks each checked package's transitive dependencies (as
// Tailscale's tstest/deptest does): a direct-import check misses a client
// that links the whole node through one shared type. Each rule says why.
func TestDependencies(t *testing.T) {
	var patterns []string
	for _, r := range depRules {
		for _, p := range r.pkgs {
			patterns = append(patterns, module+p)
		}
	}
	pkgs := listDeps(t, patterns)
	for _, r := range depRules {
		checked := 0
		for _, root := range slices.Sorted(func(yield func(string) bool) {
			for p, lp := range pkgs {
				if !lp.DepOnly && !yield(p) {
					return
				}
			}
		}) {
			if !r.covers(root) {
				continue
			}
			checked++
			for _, msg := range checkDeps(pkgs, root, r) {
				t.Errorf("%s %s", strings.TrimPrefix(root, module), msg)
			}
		}
		if checked == 0 {
			t.Errorf("rule for %v names no package: the test would pass with the packages gone", r.pkgs)
		}
	}
}

// TestDependencyRuleBites runs the rules on a made-up graph in which a
// client reaches CometBFT through a shared package, so TestDependencies
// cannot pass by never looking.
func TestDependencyRuleBites(t *testing.T) {
	client, shared := module+"internal/chainclient", module+"internal/shared"
	engine := "github.com/cometbft/cometbft/types"
	pkgs := map[string]*listed{
		client: {ImportPath: client, Imports: []string{"fmt", shared}, Deps: []string{engine, "fmt", shared}},
		shared: {ImportPath: shared, DepOnly: true, Imports: []string{engine}, Deps: []string{engine}},
		engine: {ImportPath: engine, DepOnly: true},
		"fmt":  {ImportPath: "fmt", Standard: true, DepOnly: true},
	}
	var rule depRule
	for _, r := range depRules {
		if r.covers(client) {
			rule = r
		}
	}
	got := checkDeps(pkgs, client, rule)
	want := "depends on github.com/cometbft/ through internal/chainclient → internal/shared → " + engine + ":\n\t" + whyCometBFT
	if len(got) != 1 || got[0] != want {
		t.Errorf("checkDeps = %q, want [%q]", got, want)
	}
	ledgerRule := depRules[0]
	pkgs[client].ImportPath = module + "internal/ledger"
	pkgs[module+"internal/ledger"] = pkgs[client]
	if !ledgerRule.covers(module+"internal/ledger") || ledgerRule.covers(module+"internal/ledger/ledgertest") {
		t.Error("the ledger's rule covers the wrong packages")
	}
	if got := checkDeps(pkgs, module+"internal/ledger", ledgerRule); len(got) != 2 {
		t.Errorf("the ledger depending on %s and %s gave %q, want two violations", shared, engine, got)
	}
}
