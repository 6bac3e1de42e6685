package syncbench

import (
	"bytes"
	"strings"
	"testing"
)

// TestStateSyncSmall runs the benchmark on a tiny state, so that it keeps
// working: a snapshot of several chunks is restored into an app that then
// reports the source's app hash (Run checks it), and the text says so.
func TestStateSyncSmall(t *testing.T) {
	res, err := Run(t.Context(), Options{Providers: 40, Jobs: 400, Consumers: 5, ChunkBytes: 16 << 10, Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Chunks < 2 || res.Keys == 0 || res.SnapshotBytes == 0 || res.RestoreSeconds <= 0 || res.BuildSeconds <= 0 || res.Speedup <= 0 {
		t.Fatalf("result: %+v", res)
	}
	var b bytes.Buffer
	if err := res.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "faster than replay") {
		t.Fatalf("text:\n%s", b.String())
	}
	t.Logf("\n%s", b.String())
}
