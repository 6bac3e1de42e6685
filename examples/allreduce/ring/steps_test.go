package ring

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// runStepsLoopback runs world ranks of RunSteps on 127.0.0.1, rank r
// keeping its state in dirs[r], and returns their results' digests and
// the steps they resumed at.
func runStepsLoopback(t *testing.T, dirs []string, n, steps int) ([]string, []int, error) {
	t.Helper()
	world := len(dirs)
	port := freePorts(t, world)
	members := filepath.Join(t.TempDir(), "members")
	os.WriteFile(members, []byte("127.0.0.1 slots="+fmt.Sprint(world)+"\n"), 0o644)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	digests, from, errs := make([]string, world), make([]int, world), make([]error, world)
	var wg sync.WaitGroup
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
		wg.Go(func() {
			v, f, err := RunSteps(ctx, e, 5, n, steps, 0, dirs[r])
			digests[r], from[r], errs[r] = Digest(v), f, err
		})
	}
	wg.Wait()
	return digests, from, errors.Join(errs...)
}

// TestRunStepsResumes: three ranks reducing in steps give the one-process
// sum; given states kept at different steps (as a gang's members'
// checkpoints of one step are), all resume at the fewest, take the
// reduced slices from their states (a state whose kept slices are wrong
// gives a wrong result) and still give the sum.
func TestRunStepsResumes(t *testing.T) {
	const world, n, steps = 3, 1000, 7
	sum := Sum(5, world, n)
	want := Digest(sum)
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	got, from, err := runStepsLoopback(t, dirs, n, steps)
	if err != nil {
		t.Fatal(err)
	}
	for r := range world {
		if got[r] != want || from[r] != 0 {
			t.Errorf("rank %d, fresh: %s from step %d; want %s from 0", r, got[r], from[r], want)
		}
		if _, done, err := parseState(mustRead(t, filepath.Join(dirs[r], "state")), n, steps); err != nil || done != steps {
			t.Errorf("rank %d's state after the run: %d steps done (%v), want %d", r, done, err, steps)
		}
	}

	// States at steps 4, 2 and 5: every rank resumes at 2.
	for r, done := range []int{4, 2, 5} {
		v := Input(5, r, n)
		copy(v[:done*n/steps], sum)
		if err := writeState(dirs[r], v, steps, done); err != nil {
			t.Fatal(err)
		}
	}
	got, from, err = runStepsLoopback(t, dirs, n, steps)
	if err != nil {
		t.Fatal(err)
	}
	for r := range world {
		if got[r] != want || from[r] != 2 {
			t.Errorf("rank %d, resumed: %s from step %d; want %s from 2", r, got[r], from[r], want)
		}
	}

	// The kept slices are used: rank 1's first element kept wrong.
	for r := range world {
		v := Input(5, r, n)
		copy(v[:3*n/steps], sum)
		if r == 1 {
			v[0]++
		}
		if err := writeState(dirs[r], v, steps, 3); err != nil {
			t.Fatal(err)
		}
	}
	got, _, err = runStepsLoopback(t, dirs, n, steps)
	if err != nil {
		t.Fatal(err)
	}
	if got[1] == want || got[0] != want {
		t.Errorf("with rank 1's kept slice changed: rank 0 %s, rank 1 %s; want rank 0's the sum %s and rank 1's another", got[0], got[1], want)
	}

	// A state of another run is refused, naming the file.
	if err := writeState(dirs[0], Input(5, 0, n+1), steps, 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runStepsLoopback(t, dirs, n, steps); err == nil || !strings.Contains(err.Error(), "state: a state of a run of 1001 elements") {
		t.Errorf("a state for another n: %v", err)
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseStateErrors(t *testing.T) {
	dir := t.TempDir()
	if err := writeState(dir, make([]int64, 10), 5, 3); err != nil {
		t.Fatal(err)
	}
	good := mustRead(t, filepath.Join(dir, "state"))
	if _, done, err := parseState(good, 10, 5); err != nil || done != 3 {
		t.Fatalf("a good state: %d done, %v", done, err)
	}
	over := append([]byte(nil), good...)
	over[12] = 6
	for _, tc := range []struct {
		b        []byte
		n, steps int
		want     string
	}{
		{good[:8], 10, 5, "header"},
		{append([]byte("XXXX"), good[4:]...), 10, 5, "header"},
		{good, 10, 4, "in 5 steps, this run has 10 in 4"},
		{good, 11, 5, "10 elements"},
		{over, 10, 5, "6 steps done of 5"},
		{good[:len(good)-1], 10, 5, "bytes"},
		{append(good, 0), 10, 5, "bytes"},
	} {
		if _, _, err := parseState(tc.b, tc.n, tc.steps); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%d bytes, n %d, steps %d: %v, want an error containing %q", len(tc.b), tc.n, tc.steps, err, tc.want)
		}
	}
}

func FuzzParseState(f *testing.F) {
	dir := f.TempDir()
	if err := writeState(dir, []int64{1, -2, 3}, 2, 1); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "state"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b, 3, 2)
	f.Add([]byte("ARS1"), 0, 0)
	f.Fuzz(func(t *testing.T, b []byte, n, steps int) {
		v, done, err := parseState(b, n, steps)
		if err != nil {
			return
		}
		if len(v) != n || done < 0 || done > steps {
			t.Fatalf("accepted %d elements, %d of %d steps done, for n %d", len(v), done, steps, n)
		}
	})
}
