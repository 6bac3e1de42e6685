package e2e

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHomeInUse: a second devnet (with --reset too) and a node on a home a
// devnet runs in are refused at once, naming the running process and how
// to stop it, and change nothing in the home (issue 33: a second devnet
// moved the first one's ports for good, then died on "open app state …:
// resource temporarily unavailable"). The first devnet runs on as before;
// once it stops, the home is free again.
func TestHomeInUse(t *testing.T) {
	parallel(t, weightLight)
	home := filepath.Join(t.TempDir(), "home")
	first, info := startDevnet(t, home)
	pid := first.cmd.Process.Pid
	before := homeFiles(t, home)
	for _, args := range [][]string{
		{"devnet", "--home", home, "--providers", "0", "--api", "127.0.0.1:1"},
		{"devnet", "--home", home, "--reset"},
		{"node", "--home", home},
	} {
		start := time.Now()
		wantFail(t, 1, []string{home + " is in use by gpunet devnet", fmt.Sprintf("pid %d", pid), fmt.Sprintf("kill %d", pid)}, args...)
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("gpunet %s took %v to refuse", strings.Join(args, " "), took)
		}
	}
	after := homeFiles(t, home)
	for path, was := range before {
		if now, ok := after[path]; !ok || now != was {
			t.Errorf("%s changed while the refused commands ran: %q → %q", path, was, now)
		}
	}
	for path := range after {
		if _, ok := before[path]; !ok {
			t.Errorf("%s appeared while the refused commands ran", path)
		}
	}
	waitUntil(t, 30*time.Second, "the first devnet's first block", func() bool { return status(t, "--node", info.API).Height >= 1 })
	if code := first.stop(30 * time.Second); code != 0 {
		t.Fatalf("the first devnet exited %d", code)
	}
	again, info2 := startDevnet(t, home)
	if info2.API != info.API || info2.Created {
		t.Errorf("the devnet after the first stopped: %+v; want it to resume on the first's API %s", info2, info.API)
	}
	again.stop(30 * time.Second)
}

// homeFiles is what a home holds that a devnet writes only as it starts
// (its config, keys, its own state and the lock file), path → content and
// modification time; the chain's data and logs, which it writes as it
// runs, are left out.
func homeFiles(t *testing.T, home string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(home, path)
		top := strings.Split(rel, string(filepath.Separator))[0]
		if top == "data" || top == "logs" {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		st, err := d.Info()
		if err != nil {
			return err
		}
		out[rel] = fmt.Sprintf("%s @%s", b, st.ModTime().Format(time.RFC3339Nano))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := out["config/gpunet.yaml"]; !ok {
		t.Fatalf("no config/gpunet.yaml in %s: %v", home, out)
	}
	return out
}
