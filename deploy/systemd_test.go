package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/cli"
)

// The units deploy/systemd ships, each with the highest exposure
// `systemd-analyze security` may give it (its score times ten: 0 is fully
// sandboxed, 100 not at all). The node's is 16; the provider's, root for
// runc, 55. A unit that loses some of its sandboxing fails here.
var units = []struct {
	file        string
	maxExposure int
}{
	{"gpunet-node.service", 20},
	{"gpunet-provider.service", 60},
}

// binPath is where the units expect the binary (docs/operators.md
// installs it there).
const binPath = "/usr/local/bin/gpunet"

// unitValues reads a unit file's Key=Value lines, every section's, in order.
func unitValues(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	vals := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";") || strings.HasPrefix(l, "[") {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			t.Fatalf("%s: %q is not Key=Value", path, l)
		}
		vals[k] = append(vals[k], v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return vals
}

// installUnits copies the units into a temporary directory with their
// binary replaced by an executable stand-in there (systemd-analyze verify
// checks that ExecStart's program exists), and returns the copies' paths.
func installUnits(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "gpunet")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, u := range units {
		data, err := os.ReadFile(filepath.Join("systemd", u.file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "ExecStart="+binPath+" ") {
			t.Fatalf("systemd/%s: ExecStart does not run %s", u.file, binPath)
		}
		p := filepath.Join(dir, u.file)
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(string(data), binPath, bin)), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// systemdVersion is the major version `systemd-analyze --version` prints.
func systemdVersion(t *testing.T, analyze string) int {
	t.Helper()
	out, err := exec.Command(analyze, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^systemd (\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze --version: %q", out)
	}
	v, _ := strconv.Atoi(string(m[1]))
	return v
}

// backoffKeys are the settings of the restart backoff, which systemd
// before 254 does not know and ignores with a warning.
var backoffKeys = regexp.MustCompile(`: Unknown key '(RestartSteps|RestartMaxDelaySec)' in section \[Service\], ignoring\.$`)

// verifyProblems runs `systemd-analyze verify` on paths and returns what it
// found: its exit status if not 0 and every line it printed, since it
// exits 0 after a misspelt key or a value it cannot parse (it ignores
// them, as systemd would). Only the backoff's keys on a systemd that
// predates them are let through.
func verifyProblems(t *testing.T, analyze string, paths ...string) []string {
	t.Helper()
	old := systemdVersion(t, analyze) < 254
	cmd := exec.Command(analyze, append([]string{"verify", "--man=no"}, paths...)...)
	out, err := cmd.CombinedOutput()
	var problems []string
	if err != nil {
		problems = append(problems, "systemd-analyze verify: "+err.Error())
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l == "" || old && backoffKeys.MatchString(l) {
			continue
		}
		problems = append(problems, l)
	}
	return problems
}

// TestSystemdUnitsVerify: the units load in systemd without a complaint.
func TestSystemdUnitsVerify(t *testing.T) {
	analyze := requireTool(t, "systemd-analyze", "systemd")
	for _, p := range verifyProblems(t, analyze, installUnits(t)...) {
		t.Error(p)
	}
}

// TestSystemdVerifyBites: a misspelt key, a value systemd cannot parse and
// a missing binary are each found, although systemd-analyze verify exits 0
// on the first two.
func TestSystemdVerifyBites(t *testing.T) {
	analyze := requireTool(t, "systemd-analyze", "systemd")
	good := installUnits(t)[0]
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, from, to string }{
		{"misspelt key", "\nProtectSystem=strict\n", "\nProtectSytem=strict\n"},
		{"bad value", "\nLimitNOFILE=1048576\n", "\nLimitNOFILE=lots\n"},
		{"no binary", "\nExecStart=" + filepath.Join(filepath.Dir(good), "gpunet"), "\nExecStart=/nonexistent/gpunet"},
	} {
		bad := strings.Replace(string(data), c.from, c.to, 1)
		if bad == string(data) {
			t.Fatalf("%s: %q is not in %s", c.name, c.from, good)
		}
		p := filepath.Join(t.TempDir(), filepath.Base(good))
		if err := os.WriteFile(p, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := verifyProblems(t, analyze, p); len(got) == 0 {
			t.Errorf("%s: verify found nothing", c.name)
		}
	}
}

// TestSystemdUnitsExposure: each unit keeps its sandboxing, as
// `systemd-analyze security` scores it.
func TestSystemdUnitsExposure(t *testing.T) {
	analyze := requireTool(t, "systemd-analyze", "systemd")
	for i, p := range installUnits(t) {
		u := units[i]
		out, err := exec.Command(analyze, "security", "--offline=yes", "--no-pager", "--threshold="+strconv.Itoa(u.maxExposure), p).CombinedOutput()
		if err != nil {
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			t.Errorf("%s: exposure above %d.%d (%v): %s", u.file, u.maxExposure/10, u.maxExposure%10, err, lines[len(lines)-1])
		}
	}
}

// envFile reads a systemd EnvironmentFile of KEY=VALUE lines.
func envFile(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			t.Fatalf("%s: %q is not KEY=VALUE", path, l)
		}
		env[k] = v
	}
	return env
}

// execArgs expands an ExecStart line as systemd does for these units:
// ${VAR} becomes one word, $VAR as many as its value has.
func execArgs(t *testing.T, line string, env map[string]string) []string {
	t.Helper()
	var args []string
	for _, w := range strings.Fields(line) {
		switch {
		case strings.HasPrefix(w, "${") && strings.HasSuffix(w, "}"):
			v, ok := env[w[2:len(w)-1]]
			if !ok {
				t.Fatalf("ExecStart uses %s, which the unit's environment does not set", w)
			}
			args = append(args, v)
		case strings.HasPrefix(w, "$"):
			v, ok := env[w[1:]]
			if !ok {
				t.Fatalf("ExecStart uses %s, which the unit's environment does not set", w)
			}
			args = append(args, strings.Fields(v)...)
		case strings.Contains(w, "$"):
			t.Fatalf("ExecStart word %q: expand variables as a word of their own", w)
		default:
			args = append(args, w)
		}
	}
	return args
}

// TestSystemdExecStartParses: each unit's ExecStart, with the example
// provider.env for the provider's EnvironmentFile, is a gpunet command
// line the CLI accepts.
func TestSystemdExecStartParses(t *testing.T) {
	for _, u := range units {
		t.Run(u.file, func(t *testing.T) {
			vals := unitValues(t, filepath.Join("systemd", u.file))
			env := map[string]string{}
			for _, f := range vals["EnvironmentFile"] {
				if f != "/etc/gpunet/provider.env" {
					t.Fatalf("EnvironmentFile=%s: the test knows only /etc/gpunet/provider.env (systemd/provider.env)", f)
				}
				for k, v := range envFile(t, filepath.Join("systemd", "provider.env")) {
					env[k] = v
				}
			}
			for _, e := range vals["Environment"] {
				k, v, _ := strings.Cut(e, "=")
				env[k] = v
			}
			if len(vals["ExecStart"]) != 1 {
				t.Fatalf("%d ExecStart lines, want 1", len(vals["ExecStart"]))
			}
			args := execArgs(t, vals["ExecStart"][0], env)
			if args[0] != binPath {
				t.Fatalf("ExecStart runs %s, want %s", args[0], binPath)
			}
			if err := checkParses(t.Context(), args[1:]); err != nil {
				t.Errorf("ExecStart %v: %v", args[1:], err)
			}
			// The node flag comes from the environment file.
			if _, ok := env["GPUNET_NODE"]; u.file == "gpunet-provider.service" && !ok {
				t.Error("provider.env does not set GPUNET_NODE, the node the agent talks to")
			}
		})
	}
}

// TestProviderUnitPassesPassphrase: the provider's unit loads the
// credential under the name the CLI reads the passphrase from
// ($CREDENTIALS_DIRECTORY/keyring-passphrase, internal/cli), and never puts
// a passphrase in the environment.
func TestProviderUnitPassesPassphrase(t *testing.T) {
	vals := unitValues(t, filepath.Join("systemd", "gpunet-provider.service"))
	var loaded bool
	for _, c := range vals["LoadCredential"] {
		loaded = loaded || strings.HasPrefix(c, cli.PassphraseCredential+":")
	}
	if !loaded {
		t.Errorf("LoadCredential=%v: none is %s:FILE, the credential the CLI reads", vals["LoadCredential"], cli.PassphraseCredential)
	}
	env := envFile(t, filepath.Join("systemd", "provider.env"))
	for _, e := range vals["Environment"] {
		k, _, _ := strings.Cut(e, "=")
		env[k] = ""
	}
	if _, ok := env["GPUNET_KEYRING_PASSPHRASE"]; ok {
		t.Error("the provider's environment sets GPUNET_KEYRING_PASSPHRASE: the passphrase belongs in the credential")
	}
}

// TestSysusers: the sysusers.d file makes the user gpunet-node.service
// runs as, with the unit's state directory as its home and no login.
func TestSysusers(t *testing.T) {
	sysusers := requireTool(t, "systemd-sysusers", "systemd")
	root := t.TempDir()
	sysusersFile, err := filepath.Abs(filepath.Join("systemd", "gpunet.sysusers")) // a relative one is taken under --root
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(sysusers, "--root="+root, sysusersFile).CombinedOutput(); err != nil {
		t.Fatalf("systemd-sysusers: %v: %s", err, out)
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	if err != nil {
		t.Fatal(err)
	}
	vals := unitValues(t, filepath.Join("systemd", "gpunet-node.service"))
	user, state := vals["User"], vals["StateDirectory"]
	if len(user) != 1 || len(state) != 1 {
		t.Fatalf("node unit: User=%v StateDirectory=%v, want one each", user, state)
	}
	var found bool
	for _, l := range strings.Split(string(passwd), "\n") {
		f := strings.Split(l, ":")
		if len(f) != 7 || f[0] != user[0] {
			continue
		}
		found = true
		if home := "/var/lib/" + state[0]; f[5] != home || f[6] != "/usr/sbin/nologin" {
			t.Errorf("passwd: %q; want home %s and shell /usr/sbin/nologin", l, home)
		}
	}
	if !found {
		t.Errorf("systemd-sysusers made no user %s:\n%s", user[0], passwd)
	}
}
