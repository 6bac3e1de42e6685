package clocktest

import (
	"testing"
	"time"
)

func TestFakeFiresWhatItPasses(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	f := New(start)
	after := f.After(3 * time.Second)
	tick := f.NewTicker(time.Second)
	if got := f.Timers(); got != 2 {
		t.Fatalf("Timers = %d, want 2", got)
	}
	f.Advance(2 * time.Second)
	select {
	case <-after:
		t.Fatal("After(3s) fired after 2s")
	default:
	}
	// Two periods passed; the reader took none, so one tick waits.
	if got := <-tick.C(); !got.Equal(start.Add(time.Second)) {
		t.Errorf("first tick at %v, want %v", got, start.Add(time.Second))
	}
	select {
	case got := <-tick.C():
		t.Fatalf("a second tick (%v) was kept for a slow reader", got)
	default:
	}
	f.Advance(time.Second)
	if got := <-after; !got.Equal(start.Add(3 * time.Second)) {
		t.Errorf("After fired at %v, want %v", got, start.Add(3*time.Second))
	}
	if got := <-tick.C(); !got.Equal(start.Add(3 * time.Second)) {
		t.Errorf("tick at %v, want %v", got, start.Add(3*time.Second))
	}
	if got := f.Timers(); got != 1 {
		t.Errorf("Timers = %d after After fired, want 1 (the ticker)", got)
	}
	tick.Stop()
	if err := f.WaitTimers(t.Context(), 0); err != nil || f.Timers() != 0 {
		t.Errorf("Timers = %d after Stop, want 0", f.Timers())
	}
	if got := f.Now(); !got.Equal(start.Add(3 * time.Second)) {
		t.Errorf("Now = %v, want %v", got, start.Add(3*time.Second))
	}
	if got := <-f.After(0); !got.Equal(f.Now()) {
		t.Errorf("After(0) = %v, want at once", got)
	}
}

func TestWaitTimers(t *testing.T) {
	f := New(time.Unix(0, 0))
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-f.After(time.Minute)
	}()
	if err := f.WaitTimers(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	f.Advance(time.Minute)
	<-done
}
