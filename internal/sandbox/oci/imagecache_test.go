package oci_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpunet/gpunet/internal/sandbox/oci"
	"github.com/gpunet/gpunet/internal/sandbox/oci/ocitest"
)

// TestStoreCacheBound fills a store past its bound: after each pull the
// least recently used images not in use are removed until the rest fit;
// an image in use (not released, in this store or another one on the same
// directory, as another process's) stays whatever the bound; a cached Get
// counts as a use; a store opened with a smaller bound evicts at once.
func TestStoreCacheBound(t *testing.T) {
	reg := ocitest.Registry(t, nil)
	refs := map[string]string{}
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		data := bytes.Repeat([]byte(n), 64<<10)
		refs[n] = ocitest.Push(t, reg, "cache/"+n, testImage(t, map[string]ocitest.File{"bin/app": {Data: data, Mode: 0o755}}))
	}
	dir := filepath.Join(t.TempDir(), "images")
	// Learn an image's size with an unbounded store, then start again.
	probe, err := oci.NewStore(dir, oci.RegistryOptions{}, oci.UnpackLimits{}, oci.CacheOptions{MaxBytes: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	img, _, err := probe.Get(t.Context(), refs["a"])
	if err != nil {
		t.Fatal(err)
	}
	size := img.DiskBytes()
	img.Release()
	probe.Close()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}

	bound := 2*size + size/2 // two images fit, three do not
	s, err := oci.NewStore(dir, oci.RegistryOptions{}, oci.UnpackLimits{}, oci.CacheOptions{MaxBytes: bound})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other, err := oci.NewStore(dir, oci.RegistryOptions{}, oci.UnpackLimits{}, oci.CacheOptions{MaxBytes: bound})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	get := func(st *oci.Store, n string) *oci.Image {
		t.Helper()
		img, _, err := st.Get(t.Context(), refs[n])
		if err != nil {
			t.Fatalf("get %s: %v", n, err)
		}
		return img
	}
	cachedNow := func(want ...string) {
		t.Helper()
		var got []string
		for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
			if _, ok := s.Lookup(refs[n]); ok {
				got = append(got, n)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("cached %v, want %v", got, want)
		}
	}

	a := get(s, "a") // in use until released
	get(s, "b").Release()
	get(s, "c").Release() // a, b, c: b is the oldest not in use
	cachedNow("a", "c")
	a.Release()
	get(s, "c").Release() // c used again: now a is the oldest
	get(s, "d").Release()
	cachedNow("c", "d")

	// In use through another store on the same directory, as by another
	// process: kept although it is the oldest, and past the bound.
	held := get(other, "c")
	get(s, "e").Release()
	cachedNow("c", "e")
	e := get(s, "e")
	get(s, "f").Release() // c and e in use: nothing can go
	cachedNow("c", "e", "f")
	if _, err := os.Stat(filepath.Join(held.Rootfs, "bin", "app")); err != nil {
		t.Fatalf("the rootfs of an image in use: %v", err)
	}
	held.Release()
	e.Release()

	// A smaller bound, at the next start: one image fits.
	small, err := oci.NewStore(dir, oci.RegistryOptions{}, oci.UnpackLimits{}, oci.CacheOptions{MaxBytes: size + size/2})
	if err != nil {
		t.Fatal(err)
	}
	small.Close()
	cachedNow("f")
	if left, _ := filepath.Glob(filepath.Join(dir, "tmp", "*")); len(left) != 0 {
		t.Errorf("left in tmp: %v", left)
	}
}
