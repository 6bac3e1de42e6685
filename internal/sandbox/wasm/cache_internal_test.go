package wasm

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpunet/gpunet/examples"
	"github.com/gpunet/gpunet/internal/sandbox"
)

// TestCacheLeavesNothingReadable runs a job and then reads every file the
// executor's cache directory holds: none contains a piece of the module,
// nor a compiled module in the clear (an ELF image, as wasmtime
// serializes them).
func TestCacheLeavesNothingReadable(t *testing.T) {
	dir := t.TempDir()
	e, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	mod := examples.SHA256CWASM
	job := moduleJob(t, mod, "1", "1")
	res, err := e.Run(t.Context(), job, nil)
	if err != nil || res.Failed {
		t.Fatalf("%v %+v", err, res)
	}
	os.RemoveAll(res.OutputDir)
	// Pieces of the module: its code, from a few places.
	var pieces [][]byte
	for _, at := range []int{len(mod) / 4, len(mod) / 2, 3 * len(mod) / 4} {
		pieces = append(pieces, mod[at:at+48])
	}
	sealed := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, piece := range pieces {
			if bytes.Contains(b, piece) {
				t.Errorf("%s holds the module's bytes", p)
			}
		}
		if bytes.Contains(b, []byte("\x7fELF")) || bytes.Contains(b, []byte(".wasmtime")) {
			t.Errorf("%s holds a compiled module in the clear", p)
		}
		if filepath.Ext(p) == cacheSuffix {
			sealed++
		}
		return nil
	})
	if e.engine == EngineWasmtime && sealed != 1 {
		t.Errorf("%d sealed entries, want 1", sealed)
	}
}

// TestTamperedCacheEntry alters a sealed entry on disk: the next run
// refuses it (it is never handed to wasmtime), compiles the module afresh
// and seals a new entry.
func TestTamperedCacheEntry(t *testing.T) {
	if DefaultEngine != EngineWasmtime {
		t.Skip("no wasmtime in this build: nothing cached")
	}
	dir := t.TempDir()
	mod := examples.SHA256CWASM
	runOnce := func() *sandbox.Result {
		e, err := New(dir, WithSpares(0))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		res, err := e.Run(t.Context(), moduleJob(t, mod, "1", "1"), nil)
		if err != nil || res.Failed {
			t.Fatalf("%v %+v", err, res)
		}
		os.RemoveAll(res.OutputDir)
		return res
	}
	runOnce()
	c, err := openCache(filepath.Join(dir, cacheLayout), 0)
	if err != nil {
		t.Fatal(err)
	}
	entry, _ := c.path(wasmtimeKey(), mod)
	good, err := os.ReadFile(entry)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(good)
	bad[len(bad)-100] ^= 1 // inside the sealed artifact
	if err := os.WriteFile(entry, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.load(wasmtimeKey(), mod); !errors.Is(err, errTampered) {
		t.Fatalf("load of a tampered entry: %v, want errTampered", err)
	}
	if _, err := os.Stat(entry); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the tampered entry is still there: %v", err)
	}
	if err := os.WriteFile(entry, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	runOnce() // must not load it
	now, err := os.ReadFile(entry)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(now, bad) {
		t.Fatal("the tampered entry was kept")
	}
	if art, err := c.load(wasmtimeKey(), mod); err != nil || art == nil {
		t.Errorf("the entry sealed again does not load: %v", err)
	}

	// An entry sealed by another provider's cache (another secret) does
	// not open here, even under the right name.
	other := t.TempDir()
	if err := initCache(other); err != nil {
		t.Fatal(err)
	}
	oc, err := openCache(other, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := oc.store(wasmtimeKey(), mod, []byte("native code from elsewhere")); err != nil {
		t.Fatal(err)
	}
	foreign, _ := oc.path(wasmtimeKey(), mod)
	b, _ := os.ReadFile(foreign)
	os.WriteFile(entry, b, 0o600)
	if art, err := c.load(wasmtimeKey(), mod); art != nil || !errors.Is(err, errTampered) {
		t.Errorf("a foreign entry loaded: %q, %v", art, err)
	}
}

// TestCacheEviction: past its bound the cache drops the entries used
// longest ago.
func TestCacheEviction(t *testing.T) {
	dir := t.TempDir()
	if err := initCache(dir); err != nil {
		t.Fatal(err)
	}
	c, err := openCache(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	c.maxBytes = 2500
	art := bytes.Repeat([]byte{1}, 1000)
	mods := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	for i, m := range mods[:2] {
		if err := c.store("k", m, art); err != nil {
			t.Fatal(err)
		}
		p, _ := c.path("k", m)
		old := time.Now().Add(time.Duration(i-10) * time.Minute)
		os.Chtimes(p, old, old)
	}
	c.load("k", mods[0]) // a is now the most recently used
	if err := c.store("k", mods[2], art); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false, true} {
		got, _ := c.load("k", mods[i])
		if (got != nil) != want {
			t.Errorf("entry %s cached %v, want %v", mods[i], got != nil, want)
		}
	}
}

// moduleJob is a deterministic job of the module bytes mod, with an
// output dir.
func moduleJob(t *testing.T, mod []byte, args ...string) *sandbox.Job {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "module.wasm")
	if err := os.WriteFile(p, mod, 0o644); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	return &sandbox.Job{ID: "cache", Module: p, Args: args, WorkDir: work, Outputs: []string{"/out"},
		Limits: sandbox.Limits{Timeout: time.Minute}, Deterministic: true}
}
