package provider

import (
	"strings"
	"testing"
)

// TestLogQueue: a replica's unsent log is bounded, drops its oldest bytes
// first and says how many, and sent removes only what was returned, even
// when more was written (and dropped) meanwhile.
func TestLogQueue(t *testing.T) {
	q := &logQueue{max: 10}
	q.Write([]byte("0123456789"))
	got := string(q.unsent(4))
	if got != "0123" {
		t.Fatalf("unsent = %q, want %q", got, "0123")
	}
	q.Write([]byte("abc")) // drops "012" while "0123" is being sent
	q.sent(4)
	if got, want := string(q.unsent(100)), "[gpunet: 3 bytes of log dropped: the node did not take them fast enough]\n456789abc"; got != want {
		t.Fatalf("after the overflow: unsent = %q, want %q", got, want)
	}
	q.sent(len("[gpunet: 3 bytes of log dropped: the node did not take them fast enough]\n456789abc"))
	if got := q.unsent(100); len(got) != 0 {
		t.Fatalf("after sending everything: unsent = %q", got)
	}
	q.Write([]byte(strings.Repeat("x", 25)))
	if got := string(q.unsent(100)); !strings.HasPrefix(got, "[gpunet: 15 bytes") || !strings.HasSuffix(got, strings.Repeat("x", 10)) {
		t.Fatalf("a write larger than the bound: unsent = %q", got)
	}
}

// TestCappedCursor: a job's relay reads its capped log from where it left
// off.
func TestCappedCursor(t *testing.T) {
	b := &cappedBuffer{max: 1 << 10}
	c := &cappedCursor{buf: b}
	b.Write([]byte("hello "))
	if got := string(c.unsent(3)); got != "hel" {
		t.Fatalf("unsent = %q", got)
	}
	c.sent(3)
	b.Write([]byte("world"))
	if got := string(c.unsent(100)); got != "lo world" {
		t.Fatalf("unsent = %q", got)
	}
}
