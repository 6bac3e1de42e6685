package buildinfo

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

// TestFromBuildInfo: the commit, its time and whether the tree was
// modified come from the settings go build records; a commit set with
// -ldflags stands in when the build recorded none; the module version
// replaces "dev".
func TestFromBuildInfo(t *testing.T) {
	vcs := []debug.BuildSetting{
		{Key: "-buildmode", Value: "exe"},
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "515161d23397c34683cc8cb1bc0daf46c7809358"},
		{Key: "vcs.time", Value: "2026-11-27T09:33:56Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	for _, tc := range []struct {
		name            string
		bi              *debug.BuildInfo
		version, commit string
		want            Info
	}{
		{"go build in a git checkout", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs}, "dev", "",
			Info{Version: "dev", Commit: "515161d23397c34683cc8cb1bc0daf46c7809358", CommitTime: "2026-11-27T09:33:56Z", Modified: true, GoVersion: "go1.26.8"}},
		{"a clean tree, go install …@v1.2.3", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}, Settings: vcs[:4]}, "dev", "",
			Info{Version: "v1.2.3", Commit: "515161d23397c34683cc8cb1bc0daf46c7809358", CommitTime: "2026-11-27T09:33:56Z", GoVersion: "go1.26.8"}},
		{"-buildvcs=false with -X …Commit", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs[:1]}, "v2.0.0", "abc123",
			Info{Version: "v2.0.0", Commit: "abc123", GoVersion: "go1.26.8"}},
		{"the build's record beats -X …Commit", &debug.BuildInfo{GoVersion: "go1.26.8", Settings: vcs[:3]}, "dev", "abc123",
			Info{Version: "dev", Commit: "515161d23397c34683cc8cb1bc0daf46c7809358", GoVersion: "go1.26.8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fromBuildInfo(tc.bi, tc.version, tc.commit); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	if got := fromBuildInfo(nil, "dev", ""); got.Version != "dev" || got.Commit != "" || got.GoVersion == "" {
		t.Errorf("without build info: %+v", got)
	}
}

// TestGoBuildRecordsTheCommit builds, with a plain `go build` in a fresh
// git checkout, a program that prints Read(), and runs it: it reports the
// checkout's commit and the commit's time, then, built again after an
// edit, a modified tree. GOFLAGS is the test's own, as on a machine whose
// go env does not turn VCS stamping off.
func TestGoBuildRecordsTheCommit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mod, err := probeModule(root)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"go.mod":     mod,
		"go.sum":     string(sum),
		".gitignore": "probe\n",
		"main.go": `package main

import (
	"encoding/json"
	"os"

	"github.com/gpunet/gpunet/internal/buildinfo"
)

func main() { json.NewEncoder(os.Stdout).Encode(buildinfo.Read()) }
`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off",
		"GIT_AUTHOR_DATE=2026-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2026-01-02T03:04:05Z", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	build := func() Info {
		t.Helper()
		run("go", "build", "-o", "probe", ".")
		var i Info
		out := run(filepath.Join(dir, "probe"))
		if err := json.Unmarshal([]byte(out), &i); err != nil {
			t.Fatalf("probe printed %q: %v", out, err)
		}
		return i
	}
	build() // settles go.mod and go.sum before they are committed
	run("git", "init", "-q")
	run("git", "add", "-A")
	run("git", "-c", "user.name=gpunet", "-c", "user.email=test@gpunet.invalid", "commit", "-q", "-m", "probe")
	head := strings.TrimSpace(run("git", "rev-parse", "HEAD"))

	got := build()
	if got.Commit != head || got.CommitTime != "2026-01-02T03:04:05Z" || got.Modified {
		t.Errorf("built at commit %s (2026-01-02T03:04:05Z), clean: Read() = %+v", head, got)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(strings.Replace(readFile(t, filepath.Join(dir, "main.go")), "func main", "// An edit.\nfunc main", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := build(); got.Commit != head || !got.Modified {
		t.Errorf("built after an edit: Read() = %+v, want commit %s, modified", got, head)
	}
}

// probeModule is the go.mod of a module beside this one that imports
// buildinfo: the same requirements, this module and its local
// replacements at their absolute paths.
func probeModule(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	var out []string
	local := regexp.MustCompile(`=>\s*(\./\S+|\.\./\S+)`)
	inTools := false
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case inTools:
			inTools = strings.TrimSpace(l) != ")"
			continue
		case strings.HasPrefix(l, "module "):
			l = "module github.com/gpunet/gpunet/buildinfoprobe"
		case strings.HasPrefix(l, "tool ("):
			inTools = true
			continue
		case strings.HasPrefix(l, "tool "):
			continue // the tools are this module's
		}
		if m := local.FindStringSubmatch(l); m != nil {
			l = strings.Replace(l, m[1], filepath.Join(root, m[1]), 1)
		}
		out = append(out, l)
	}
	out = append(out, "require github.com/gpunet/gpunet v0.0.0", "replace github.com/gpunet/gpunet => "+root, "")
	return strings.Join(out, "\n"), nil
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
