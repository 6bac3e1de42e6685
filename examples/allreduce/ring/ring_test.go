package ring

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAllReduceEqualsSum: rings of 1 to 5 ranks over loopback TCP, with
// vectors shorter and longer than the ring, give every rank the
// one-process sum.
func TestAllReduceEqualsSum(t *testing.T) {
	for _, world := range []int{1, 2, 3, 5} {
		for _, n := range []int{1, 4, 1000} {
			t.Run(fmt.Sprintf("world=%d,n=%d", world, n), func(t *testing.T) {
				want := Digest(Sum(3, world, n))
				got := runLoopback(t, world, n)
				for r, d := range got {
					if d != want {
						t.Errorf("rank %d: %s, want %s", r, d, want)
					}
				}
			})
		}
	}
}

// runLoopback runs world ranks of Run on 127.0.0.1 and returns their
// results' digests.
func runLoopback(t *testing.T, world, n int) []string {
	t.Helper()
	port := freePorts(t, world)
	dir := t.TempDir()
	members := dir + "/members"
	// One member holding every rank: LOCAL_WORLD_SIZE = world.
	os.WriteFile(members, []byte("127.0.0.1 slots="+fmt.Sprint(world)+"\n"), 0o644)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out := make([]string, world)
	var wg sync.WaitGroup
	errs := make([]error, world)
	for r := range world {
		env := map[string]string{
			"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": fmt.Sprint(port),
			"WORLD_SIZE": fmt.Sprint(world), "RANK": fmt.Sprint(r), "NODE_RANK": "0",
			"LOCAL_WORLD_SIZE": fmt.Sprint(world), "LOCAL_RANK": fmt.Sprint(r),
			"GPUNET_MEMBERS_FILE": members,
		}
		e, err := EnvFromOS(func(k string) string { return env[k] }, os.ReadFile)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := Run(ctx, e, 3, n)
			errs[r] = err
			out[r] = Digest(v)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return out
}

// freePorts finds a port p with p+1 … p+k free (the ring's ports).
func freePorts(t *testing.T, k int) int {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if p+k >= 65535 {
			continue
		}
		ok := true
		for i := 1; i <= k; i++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+i))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return p
		}
	}
	t.Fatal("no free ports")
	return 0
}

func TestEnvFromOSErrors(t *testing.T) {
	good := map[string]string{
		"MASTER_ADDR": "10.78.0.1", "MASTER_PORT": "29500", "WORLD_SIZE": "6", "RANK": "3",
		"NODE_RANK": "1", "LOCAL_WORLD_SIZE": "2", "LOCAL_RANK": "1", "GPUNET_MEMBERS_FILE": "/members",
	}
	file := "10.78.0.1 slots=2\n10.78.0.2 slots=2\n10.78.0.3 slots=2\n"
	read := func(f string) func(string) ([]byte, error) {
		return func(string) ([]byte, error) { return []byte(f), nil }
	}
	e, err := EnvFromOS(func(k string) string { return good[k] }, read(file))
	if err != nil {
		t.Fatal(err)
	}
	if a := e.Addr(3).String(); a != "10.78.0.2:29502" {
		t.Errorf("rank 3 listens at %s, want 10.78.0.2:29502", a)
	}
	for _, tc := range []struct {
		key, val, file, want string
	}{
		{"WORLD_SIZE", "", file, "WORLD_SIZE"},
		{"RANK", "6", file, "below its size"},
		{"RANK", "2", file, "is not NODE_RANK"},
		{"MASTER_PORT", "65535", file, "MASTER_PORT"},
		{"MASTER_ADDR", "10.78.0.2", file, "first member"},
		{"GPUNET_MEMBERS_FILE", "", file, "not set"},
		{"", "", "10.78.0.1\n10.78.0.2\n", "lists 2 members"},
		{"", "", "10.78.0.1\nnode-b\n10.78.0.3\n", "line 2"},
		{"", "", "# none\n", "no member"},
	} {
		env := map[string]string{}
		for k, v := range good {
			env[k] = v
		}
		if tc.key != "" {
			env[tc.key] = tc.val
		}
		_, err := EnvFromOS(func(k string) string { return env[k] }, read(tc.file))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%q, file %q: %v, want an error containing %q", tc.key, tc.val, tc.file, err, tc.want)
		}
	}
	_, err = EnvFromOS(func(k string) string { return good[k] }, func(string) ([]byte, error) { return nil, fs.ErrNotExist })
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("unreadable members file: %v", err)
	}
}

func FuzzParseHostfile(f *testing.F) {
	f.Add([]byte("10.78.0.1 slots=8\n10.78.0.2 slots=8\n"))
	f.Add([]byte("# c\n\n  fd00::2  \n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		as, err := parseHostfile(data)
		if err != nil {
			return
		}
		if len(as) == 0 {
			t.Fatal("no member and no error")
		}
		for _, a := range as {
			if !a.IsValid() {
				t.Fatalf("invalid address accepted from %q", data)
			}
		}
	})
}
