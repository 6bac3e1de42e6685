package ring

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"
)

// MaxSteps bounds RunSteps' steps.
const MaxSteps = 1 << 16

// stateMagic opens a state file; its version is the last byte.
const stateMagic = "ARS1"

// stateHeader is the magic, then n, steps and done as uint32s.
const stateHeader = len(stateMagic) + 12

// RunSteps is Run in steps, with its state kept in dir so that a run
// killed in the middle resumes there: the vector is reduced one slice
// (about n/steps elements) at a time, each step followed by pause (a
// stand-in for a long job's work), and after each step the slices reduced
// so far are written atomically to dir/state. A run that finds a state
// resumes from it. The processes' states need not be from the same step
// (each member's checkpoint is taken on its own clock), so the ranks first
// tell each other how many steps each has kept and all go on from the
// fewest. It returns the result and the step it resumed at (0: from the
// beginning). With dir "" nothing is kept or read.
func RunSteps(ctx context.Context, e Env, seed uint64, n, steps int, pause time.Duration, dir string) ([]int64, int, error) {
	if steps < 1 || steps > MaxSteps || steps > n {
		return nil, 0, fmt.Errorf("steps %d: want 1 to %d and at most n (%d)", steps, MaxSteps, n)
	}
	var lc net.ListenConfig
	var d net.Dialer
	next, prev, err := Connect(ctx, e,
		func(a string) (net.Listener, error) { return lc.Listen(ctx, "tcp", a) },
		func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) })
	if err != nil {
		return nil, 0, err
	}
	if next != nil {
		defer next.Close()
		defer prev.Close()
		// A peer that vanishes (its member's network gone with its
		// machine) sends no reset: end the blocked reads with ctx.
		stop := context.AfterFunc(ctx, func() { next.Close(); prev.Close() })
		defer stop()
	}
	v := Input(seed, e.Rank, n)
	kept, done := []int64(nil), 0
	if dir != "" {
		b, err := os.ReadFile(filepath.Join(dir, "state"))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, 0, err
		default:
			if kept, done, err = parseState(b, n, steps); err != nil {
				return nil, 0, fmt.Errorf("%s: %w", filepath.Join(dir, "state"), err)
			}
		}
	}
	// Every rank's count of kept steps, summed into each rank's slot.
	counts := make([]int64, e.WorldSize)
	counts[e.Rank] = int64(done)
	if err := AllReduce(next, prev, e.Rank, e.WorldSize, counts); err != nil {
		return nil, 0, err
	}
	from := done
	for _, c := range counts {
		from = min(from, int(c))
	}
	bounds := func(s int) (int, int) { return s * n / steps, (s + 1) * n / steps }
	if from > 0 {
		_, hi := bounds(from - 1)
		copy(v[:hi], kept[:hi])
	}
	for s := from; s < steps; s++ {
		lo, hi := bounds(s)
		if err := AllReduce(next, prev, e.Rank, e.WorldSize, v[lo:hi]); err != nil {
			return nil, from, fmt.Errorf("step %d: %w", s, err)
		}
		if dir != "" {
			if err := writeState(dir, v, steps, s+1); err != nil {
				return nil, from, err
			}
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return nil, from, ctx.Err()
		}
	}
	return v, from, nil
}

// writeState writes v after done of steps to dir/state atomically.
func writeState(dir string, v []int64, steps, done int) error {
	b := make([]byte, stateHeader+8*len(v))
	copy(b, stateMagic)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(v)))
	binary.LittleEndian.PutUint32(b[8:], uint32(steps))
	binary.LittleEndian.PutUint32(b[12:], uint32(done))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[stateHeader+8*i:], uint64(x))
	}
	tmp := filepath.Join(dir, "state.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "state"))
}

// parseState reads a state written by writeState for a run of n elements
// in steps, returning its vector and its count of steps done.
func parseState(b []byte, n, steps int) ([]int64, int, error) {
	if len(b) < stateHeader || string(b[:len(stateMagic)]) != stateMagic {
		return nil, 0, errors.New("not an allreduce state (no " + stateMagic + " header)")
	}
	gotN := binary.LittleEndian.Uint32(b[4:])
	gotSteps := binary.LittleEndian.Uint32(b[8:])
	done := binary.LittleEndian.Uint32(b[12:])
	if uint64(gotN) != uint64(n) || uint64(gotSteps) != uint64(steps) {
		return nil, 0, fmt.Errorf("a state of a run of %d elements in %d steps, this run has %d in %d", gotN, gotSteps, n, steps)
	}
	if done > gotSteps {
		return nil, 0, fmt.Errorf("%d steps done of %d", done, gotSteps)
	}
	if len(b) != stateHeader+8*n {
		return nil, 0, fmt.Errorf("%d bytes, want %d for %d elements", len(b), stateHeader+8*n, n)
	}
	v := make([]int64, n)
	for i := range v {
		v[i] = int64(binary.LittleEndian.Uint64(b[stateHeader+8*i:]))
	}
	return v, int(done), nil
}
