package testnet

import (
	"errors"
	"io"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// fakeTUN is an in-memory interface: what the host "sends" is queued for
// the router's Read; what the router writes is recorded with its time.
type fakeTUN struct {
	out    chan []byte
	closed chan struct{}
	once   sync.Once

	mu   sync.Mutex
	got  [][]byte
	when []time.Time
}

func newFakeTUN() *fakeTUN {
	return &fakeTUN{out: make(chan []byte, 1024), closed: make(chan struct{})}
}

func (f *fakeTUN) Read(b []byte) (int, error) {
	select {
	case p := <-f.out:
		return copy(b, p), nil
	case <-f.closed:
		return 0, io.EOF
	}
}

func (f *fakeTUN) Write(b []byte) (int, error) {
	select {
	case <-f.closed:
		return 0, errors.New("closed")
	default:
	}
	f.mu.Lock()
	f.got = append(f.got, append([]byte(nil), b...))
	f.when = append(f.when, time.Now())
	f.mu.Unlock()
	return len(b), nil
}

func (f *fakeTUN) Close() error {
	f.once.Do(func() { close(f.closed) })
	return nil
}

func (f *fakeTUN) received() ([][]byte, []time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.got...), append([]time.Time(nil), f.when...)
}

// ipv4 returns a minimal IPv4 header from src to dst whose byte 4 (the
// identification field) carries seq.
func ipv4(src, dst netip.Addr, seq byte) []byte {
	b := make([]byte, 20)
	b[0] = 0x45
	b[4] = seq
	s, d := src.As4(), dst.As4()
	copy(b[12:16], s[:])
	copy(b[16:20], d[:])
	return b
}

var (
	addrA = netip.MustParseAddr("10.77.0.2")
	addrB = netip.MustParseAddr("10.77.0.3")
)

// TestRouterDelaysInOrder sends 50 packets from A to B with a jitter as
// large as the delay: each arrives no earlier than its sending time plus
// delay minus jitter, and all arrive in the order they were sent.
func TestRouterDelaysInOrder(t *testing.T) {
	const delay, jitter = 20 * time.Millisecond, 20 * time.Millisecond
	r := newRouter(delay, jitter, 128)
	a, b := newFakeTUN(), newFakeTUN()
	r.attach(addrA, a, false)
	r.attach(addrB, b, false)
	defer r.close()

	sent := make([]time.Time, 50)
	for i := range sent {
		sent[i] = time.Now()
		a.out <- ipv4(addrA, addrB, byte(i))
		time.Sleep(time.Millisecond)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if got, _ := b.received(); len(got) == len(sent) {
			break
		}
		if time.Now().After(deadline) {
			got, _ := b.received()
			t.Fatalf("B received %d of %d packets", len(got), len(sent))
		}
		time.Sleep(5 * time.Millisecond)
	}
	got, when := b.received()
	var late int
	for i, p := range got {
		if p[4] != byte(i) {
			t.Fatalf("packet %d arrived carrying seq %d: reordered", i, p[4])
		}
		if d := when[i].Sub(sent[i]); d < delay-jitter {
			t.Errorf("packet %d took %s, want ≥ %s", i, d, delay-jitter)
		} else if d > delay+jitter+50*time.Millisecond {
			late++
		}
	}
	if late > len(got)/5 {
		t.Errorf("%d of %d packets took more than delay+jitter+50ms", late, len(got))
	}
	if s := r.stats(); s.Forwarded != int64(len(sent)) || s.Dropped != 0 {
		t.Errorf("stats %+v, want %d forwarded and none dropped", s, len(sent))
	}
}

// TestRouterDropsWhenFull: a link's queue holds QueueLen packets; the rest
// of a burst is dropped and counted, and packets to no host are counted
// as unroutable.
func TestRouterDropsWhenFull(t *testing.T) {
	r := newRouter(time.Second, 0, 4)
	a, b := newFakeTUN(), newFakeTUN()
	r.attach(addrA, a, false)
	r.attach(addrB, b, false)
	defer r.close()
	for i := range 10 {
		a.out <- ipv4(addrA, addrB, byte(i))
	}
	a.out <- ipv4(addrA, netip.MustParseAddr("10.77.0.99"), 0)
	a.out <- []byte{0x60, 0, 0, 0} // IPv6: not routed
	waitFor(t, time.Second, func() bool { s := r.stats(); return s.Dropped+s.Unroutable >= 7 })
	// The carrier may hold one packet out of the queue while it waits.
	if s := r.stats(); s.Dropped < 5 || s.Dropped > 6 || s.Unroutable != 2 {
		t.Errorf("stats %+v: want 5 or 6 dropped of a burst of 10 into a queue of 4, and 2 unroutable", s)
	}
}

func waitFor(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
