package blob

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"
)

// seededReader yields n deterministic pseudo-random bytes.
func seededReader(seed uint64, n int64) io.Reader {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	return io.LimitReader(rand.NewChaCha8(s), n)
}

// hashCounter is an io.Writer that only hashes and counts, so the test
// holds nothing of the blob it receives.
type hashCounter struct {
	h hash.Hash
	n int64
}

func (w *hashCounter) Write(p []byte) (int, error) {
	w.h.Write(p)
	w.n += int64(len(p))
	return len(p), nil
}

// memWatch samples the heap while a transfer runs.
type memWatch struct {
	stop      chan struct{}
	done      sync.WaitGroup
	peakInuse uint64
	startTA   uint64
	totalA    uint64
}

func watchMemory() *memWatch {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := &memWatch{stop: make(chan struct{}), startTA: ms.TotalAlloc, peakInuse: ms.HeapInuse}
	m.done.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-tick.C:
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				m.peakInuse = max(m.peakInuse, ms.HeapInuse)
			}
		}
	})
	return m
}

func (m *memWatch) finish() {
	close(m.stop)
	m.done.Wait()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.peakInuse = max(m.peakInuse, ms.HeapInuse)
	m.totalA = ms.TotalAlloc - m.startTA
}

// TestGatewayStreamsLargeBlob pushes a 2 GiB blob through HTTP PUT and GET
// and checks that neither end ever holds more than a sliver of it.
func TestGatewayStreamsLargeBlob(t *testing.T) {
	const (
		full     = 2 << 30
		small    = 512 << 20
		memLimit = 64 << 20
	)
	store, c, _ := newGateway(t, full)
	size := int64(full)
	free, known := freeBytes(store.Dir())
	switch {
	case !known:
		size = small
		t.Logf("cannot tell free disk space here; streaming %d MiB instead of 2 GiB", size>>20)
	case free < 5<<30:
		size = small
		t.Logf("only %d MiB free under %s; streaming %d MiB instead of 2 GiB", free>>20, store.Dir(), size>>20)
	}
	if known && free < size+size/2 {
		t.Fatalf("only %d MiB free under %s: this test needs at least %d MiB for its %d MiB blob; free some space or point TMPDIR elsewhere",
			free>>20, store.Dir(), (size+size/2)>>20, size>>20)
	}

	// The expected hash, computed independently of the code under test.
	start := time.Now()
	want := &hashCounter{h: sha256.New()}
	io.Copy(want, seededReader(42, size))
	var wantHash Hash
	want.h.Sum(wantHash[:0])
	t.Logf("reference hash of %d MiB: %v", size>>20, time.Since(start).Round(time.Millisecond))

	mem := watchMemory()
	start = time.Now()
	h, n, err := c.Put(t.Context(), seededReader(42, size))
	putTime := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if h != wantHash || n != size {
		t.Fatalf("Put = %v, %d; want %v, %d", h, n, wantHash, size)
	}
	if onDisk, err := store.Stat(h); err != nil || onDisk != size {
		t.Fatalf("Stat = %d, %v", onDisk, err)
	}

	start = time.Now()
	got := &hashCounter{h: sha256.New()}
	n, err = c.Get(t.Context(), h, got)
	getTime := time.Since(start)
	mem.finish()
	if err != nil {
		t.Fatal(err)
	}
	var gotHash Hash
	got.h.Sum(gotHash[:0])
	if n != size || got.n != size || gotHash != wantHash {
		t.Fatalf("Get wrote %d bytes (%d counted) hashing to %v; want %d hashing to %v", n, got.n, gotHash, size, wantHash)
	}
	mib := float64(size) / (1 << 20)
	t.Logf("PUT %d MiB in %v (%.0f MiB/s), GET in %v (%.0f MiB/s); peak HeapInuse %d MiB, allocated %d MiB in all",
		size>>20, putTime.Round(time.Millisecond), mib/putTime.Seconds(), getTime.Round(time.Millisecond), mib/getTime.Seconds(),
		mem.peakInuse>>20, mem.totalA>>20)
	if mem.peakInuse > memLimit {
		t.Errorf("peak HeapInuse %d MiB during the transfer; want < %d MiB (the blob is %d MiB)", mem.peakInuse>>20, memLimit>>20, size>>20)
	}
	if mem.totalA > memLimit {
		t.Errorf("allocated %d MiB during the transfer; want < %d MiB (the blob is %d MiB)", mem.totalA>>20, memLimit>>20, size>>20)
	}
}
