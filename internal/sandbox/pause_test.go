package sandbox_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/sandbox"
)

// member is a run of a PauseSet whose freeze and thaw are recorded.
type member struct {
	mu           sync.Mutex
	frozen       bool
	calls        []string
	freezeErr    error
	thawFailures int // thaw fails this many times first
}

func (m *member) freeze() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, "freeze")
	if m.freezeErr != nil {
		return m.freezeErr
	}
	m.frozen = true
	return nil
}

func (m *member) thaw() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, "thaw")
	if m.thawFailures > 0 {
		m.thawFailures--
		return errors.New("transient")
	}
	m.frozen = false
	return nil
}

func (m *member) isFrozen() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.frozen
}

// TestPauseSet: Pause freezes the runs, nested pauses thaw them with the
// last resume, a run whose freeze finds nothing running is neither counted
// nor an error, a run that cannot be frozen is reported, a thaw that fails
// once is tried again, and Paused counts the pause.
func TestPauseSet(t *testing.T) {
	var s sandbox.PauseSet
	a, gone, broken := &member{thawFailures: 1}, &member{freezeErr: sandbox.ErrNotRunning}, &member{freezeErr: errors.New("no freezer")}
	pa, err := s.Join(t.Context(), a.freeze, a.thaw)
	if err != nil {
		t.Fatal(err)
	}
	defer pa.Leave()
	for _, m := range []*member{gone, broken} {
		p, err := s.Join(t.Context(), m.freeze, m.thaw)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Leave()
	}
	r1, n, err := s.Pause(t.Context())
	if n != 1 || err == nil || !errors.Is(err, broken.freezeErr) || !a.isFrozen() {
		t.Fatalf("Pause: %d paused, %v; want 1 and the broken run's error", n, err)
	}
	r2, n, err := s.Pause(t.Context())
	if n != 0 || err != nil {
		t.Errorf("a nested Pause: %d paused, %v; want 0, nil (already paused)", n, err)
	}
	time.Sleep(20 * time.Millisecond)
	if err := r1(); err != nil || !a.isFrozen() {
		t.Errorf("after the first of two resumes: %v, frozen %v; want still frozen", err, a.isFrozen())
	}
	if err := r1(); err != nil || !a.isFrozen() {
		t.Errorf("resume called twice counted twice: %v, frozen %v", err, a.isFrozen())
	}
	if err := r2(); err != nil || a.isFrozen() {
		t.Errorf("after the last resume: %v, frozen %v; want thawed (its thaw tried again)", err, a.isFrozen())
	}
	if got := pa.Paused(); got < 20*time.Millisecond || got > 5*time.Second {
		t.Errorf("Paused = %s, want the pause's length", got)
	}
	if len(gone.calls) != 1 || len(broken.calls) != 1 {
		t.Errorf("runs that were not frozen: %v, %v; want one freeze each and no thaw", gone.calls, broken.calls)
	}
}

// TestPauseSetHoldsStarts: a run that joins during a pause waits for its
// end, or for its own context.
func TestPauseSetHoldsStarts(t *testing.T) {
	var s sandbox.PauseSet
	resume, _, _ := s.Pause(t.Context())
	joined := make(chan error, 1)
	go func() {
		p, err := s.Join(t.Context(), func() error { return nil }, func() error { return nil })
		if err == nil {
			p.Leave()
		}
		joined <- err
	}()
	select {
	case err := <-joined:
		t.Fatalf("a run joined during the pause: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Join(ctx, nil, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Join with a cancelled context during a pause: %v", err)
	}
	resume()
	if err := <-joined; err != nil {
		t.Errorf("after resume: %v", err)
	}
}

// TestPauseSetTimeout: WithTimeout's clock stands still while its run is
// paused.
func TestPauseSetTimeout(t *testing.T) {
	var s sandbox.PauseSet
	m := &member{}
	p, err := s.Join(t.Context(), m.freeze, m.thaw)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Leave()
	cause := errors.New("timed out")
	const d = 200 * time.Millisecond
	t0 := time.Now()
	ctx, cancel := p.WithTimeout(t.Context(), d, cause)
	defer cancel()
	time.Sleep(50 * time.Millisecond)
	resume, _, _ := s.Pause(t.Context())
	time.Sleep(400 * time.Millisecond)
	if ctx.Err() != nil {
		t.Fatalf("the timeout passed during the pause, %s after the start", time.Since(t0))
	}
	resume()
	<-ctx.Done()
	if took := time.Since(t0); took < 600*time.Millisecond || context.Cause(ctx) != cause {
		t.Errorf("ended after %s with %v; want about %s (200 ms of run, 400 ms of pause) with the cause", took, context.Cause(ctx), 600*time.Millisecond)
	}
}
