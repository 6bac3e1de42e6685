package oci

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultImageCacheBytes bounds a Store's unpacked images when its owner
// gives no bound: twice the largest image it unpacks by default
// (DefaultMaxRootfsBytes), so that the largest image and another fit.
const DefaultImageCacheBytes = 2 * DefaultMaxRootfsBytes

// entryDiskBytes is what each file and directory of an unpacked image is
// counted on disk besides its contents: a file system block, which small
// files and directories take at least.
const entryDiskBytes = 4096

// DiskBytes is what the image is counted against its store's bound: its
// files' sizes and a block for each file and directory.
func (img *Image) DiskBytes() int64 {
	return img.UnpackedBytes + entryDiskBytes*int64(img.Stats.Files+img.Stats.Dirs+img.Stats.Symlinks)
}

// Release says the caller no longer uses the image's rootfs (its container
// is gone), so that the store may evict it. Later calls do nothing.
func (img *Image) Release() {
	img.releaseOnce.Do(func() {
		if img.use != nil {
			img.use.Close() // drops the shared lock
		}
	})
}

// acquire opens the cached image of digest and takes a shared lock on its
// image.json for the caller's use, which eviction (from this process or
// another sharing the directory) respects: it takes the lock exclusively
// and never waits for it. It marks the image used now (image.json's
// modification time), for the least-recently-used order. ok is false when
// the image is not cached (or was evicted meanwhile).
func (s *Store) acquire(digest string) (img *Image, ok bool, err error) {
	dir := s.imageDir(digest)
	meta := filepath.Join(dir, "image.json")
	f, err := os.Open(meta)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	keep := false
	defer func() {
		if !keep {
			f.Close()
		}
	}()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
		return nil, false, fmt.Errorf("lock %s: %w", meta, err)
	}
	// An eviction that held the lock before us moved the directory away:
	// then what we hold is not the cache's any more.
	held, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	if now, err := os.Stat(meta); err != nil || !os.SameFile(held, now) {
		return nil, false, nil
	}
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil, false, err
	}
	img = &Image{}
	if err := json.Unmarshal(b, img); err != nil {
		return nil, false, fmt.Errorf("%s: %w", meta, err)
	}
	img.Dir, img.Rootfs, img.use = dir, filepath.Join(dir, "rootfs"), f
	now := time.Now()
	os.Chtimes(meta, now, now) // best effort: a failure only skews the order
	keep = true
	return img, true, nil
}

// cached is one unpacked image as eviction sees it.
type cached struct {
	digest string // hex
	bytes  int64
	used   time.Time
}

// evict removes least recently used images not in use until the cached
// images take at most s.maxBytes; keep (a digest) is never removed: the
// image just pulled, for the caller that wants it. An image in use (a
// caller has not released it, in this process or another) stays, so the
// bound can be passed while the images in use take more.
func (s *Store) evict(keep string) {
	if s.maxBytes <= 0 {
		return
	}
	s.evictMu.Lock()
	defer s.evictMu.Unlock()
	root := filepath.Join(s.dir, "sha256")
	ents, err := os.ReadDir(root)
	if err != nil {
		s.logf("image cache: %v", err)
		return
	}
	var all []cached
	var total int64
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		img, err := s.load("sha256:" + e.Name())
		if err != nil {
			continue // not complete: pulls rename whole directories in
		}
		st, err := os.Stat(filepath.Join(root, e.Name(), "image.json"))
		if err != nil {
			continue
		}
		all = append(all, cached{e.Name(), img.DiskBytes(), st.ModTime()})
		total += img.DiskBytes()
	}
	slices.SortFunc(all, func(a, b cached) int {
		if c := a.used.Compare(b.used); c != 0 {
			return c
		}
		return strings.Compare(a.digest, b.digest)
	})
	for _, c := range all {
		if total <= s.maxBytes {
			return
		}
		if "sha256:"+c.digest == keep {
			continue
		}
		removed, err := s.remove(c.digest)
		if err != nil {
			s.logf("image cache: evict sha256:%s: %v", c.digest, err)
		}
		if removed {
			total -= c.bytes
		}
	}
	if total > s.maxBytes {
		s.logf("image cache: %d bytes cached, over the bound of %d: the rest is in use", total, s.maxBytes)
	}
}

// remove evicts one image unless it is in use: it takes image.json's lock
// exclusively without waiting, moves the directory out of the cache while
// holding it (a caller that was waiting for a shared lock then sees the
// image gone), and deletes it.
func (s *Store) remove(digest string) (bool, error) {
	dir := filepath.Join(s.dir, "sha256", digest)
	f, err := os.Open(filepath.Join(dir, "image.json"))
	if err != nil {
		return false, err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return false, nil // in use
		}
		return false, err
	}
	gone := filepath.Join(s.dir, "tmp", "evict-"+digest+"-"+newID(4))
	if err := os.Rename(dir, gone); err != nil {
		return false, err
	}
	f.Close()
	return true, os.RemoveAll(gone)
}

func (s *Store) logf(format string, args ...any) {
	if s.log != nil {
		s.log.Warn(fmt.Sprintf(format, args...))
	}
}
