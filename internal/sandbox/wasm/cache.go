package wasm

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The compiled-module cache.
//
// A compiled module is native code the sandbox process maps and runs, so a
// cache entry is trusted code: the cache accepts only entries it sealed
// itself, and it must not keep a consumer's module readable on the
// provider's disk after the job (issue 19). Both follow from convergent
// encryption under a key of the provider's own:
//
//   - The cache directory holds a random 32-byte secret (cacheKeyFile,
//     mode 0600), made by the executor the first time.
//   - An entry is named HMAC-SHA256(secret, nameLabel ‖ engine key ‖
//     SHA-256(module)), and sealed with AES-256-GCM under the key
//     HMAC-SHA256(secret, sealLabel ‖ engine key ‖ SHA-256(module)), the
//     name as additional data. The engine key names the engine, its
//     version and every setting that changes the code it generates.
//
// So what stays on disk after a job tells nothing about the module to
// whoever does not hold both the module and the secret: a cache copied
// from elsewhere, or an entry altered on disk, fails authentication and is
// removed and recompiled before the engine ever parses it. Only the
// sandbox process that runs a job sees the artifact in the clear, in
// memory.

const (
	cacheKeyFile = "key"
	cacheSuffix  = ".sealed"
	nameLabel    = "gpunet/sandbox/wasm cache name v1"
	sealLabel    = "gpunet/sandbox/wasm cache seal v1"
)

// cacheMagic starts every entry.
var cacheMagic = []byte("gpunet-wasm-cache\x00v1\x00")

// DefaultCacheBytes bounds the compiled-module cache; the oldest entries
// (by last use) go first.
const DefaultCacheBytes = 512 << 20

// moduleCache is a cache directory, as the sandbox process uses it.
type moduleCache struct {
	dir      string
	secret   []byte
	maxBytes int64
}

// initCache makes dir and its secret if they are missing (the executor
// does, once, before any sandbox process uses it).
func initCache(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	p := filepath.Join(dir, cacheKeyFile)
	if b, err := os.ReadFile(p); err == nil && len(b) == 32 {
		return nil
	}
	secret := make([]byte, 32)
	rand.Read(secret)
	tmp, err := os.CreateTemp(dir, ".key-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(secret); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p)
}

// openCache opens dir's cache, which initCache made.
func openCache(dir string, maxBytes int64) (*moduleCache, error) {
	secret, err := os.ReadFile(filepath.Join(dir, cacheKeyFile))
	if err != nil {
		return nil, err
	}
	if len(secret) != 32 {
		return nil, errors.New("cache key: wrong size")
	}
	if maxBytes <= 0 {
		maxBytes = DefaultCacheBytes
	}
	return &moduleCache{dir: dir, secret: secret, maxBytes: maxBytes}, nil
}

func (c *moduleCache) derive(label, engineKey string, module []byte) []byte {
	sum := sha256.Sum256(module)
	mac := hmac.New(sha256.New, c.secret)
	mac.Write([]byte(label + "\x00" + engineKey + "\x00"))
	mac.Write(sum[:])
	return mac.Sum(nil)
}

func (c *moduleCache) path(engineKey string, module []byte) (string, []byte) {
	name := hex.EncodeToString(c.derive(nameLabel, engineKey, module))
	return filepath.Join(c.dir, name+cacheSuffix), []byte(name)
}

func (c *moduleCache) aead(engineKey string, module []byte) cipher.AEAD {
	block, err := aes.NewCipher(c.derive(sealLabel, engineKey, module))
	if err != nil {
		panic(err) // a 32-byte key
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return gcm
}

// errTampered is load's error for an entry that failed authentication.
var errTampered = errors.New("cache entry failed authentication")

// load returns the artifact cached for module, or nil if there is none.
// An entry that does not authenticate is removed, with errTampered.
func (c *moduleCache) load(engineKey string, module []byte) ([]byte, error) {
	p, name := c.path(engineKey, module)
	sealed, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	gcm := c.aead(engineKey, module)
	n := len(cacheMagic) + gcm.NonceSize()
	var plain []byte
	if len(sealed) >= n && bytes.Equal(sealed[:len(cacheMagic)], cacheMagic) {
		plain, err = gcm.Open(nil, sealed[len(cacheMagic):n], sealed[n:], name)
	}
	if plain == nil || err != nil {
		os.Remove(p)
		return nil, errTampered
	}
	now := time.Now()
	os.Chtimes(p, now, now) // last use, for eviction
	return plain, nil
}

// store seals artifact as the entry for module, then evicts the oldest
// entries while the cache is over its bound.
func (c *moduleCache) store(engineKey string, module, artifact []byte) error {
	p, name := c.path(engineKey, module)
	gcm := c.aead(engineKey, module)
	nonce := make([]byte, gcm.NonceSize())
	rand.Read(nonce)
	sealed := slices.Concat(cacheMagic, nonce)
	sealed = gcm.Seal(sealed, nonce, artifact, name)
	tmp, err := os.CreateTemp(c.dir, ".entry-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(sealed); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return err
	}
	c.evict()
	return nil
}

// evict removes the least recently used entries while the entries take
// more than maxBytes.
func (c *moduleCache) evict() {
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return
	}
	type entry struct {
		path string
		size int64
		used time.Time
	}
	var all []entry
	var total int64
	for _, d := range ents {
		if !strings.HasSuffix(d.Name(), cacheSuffix) {
			continue
		}
		fi, err := d.Info()
		if err != nil {
			continue
		}
		all = append(all, entry{filepath.Join(c.dir, d.Name()), fi.Size(), fi.ModTime()})
		total += fi.Size()
	}
	slices.SortFunc(all, func(a, b entry) int { return a.used.Compare(b.used) })
	for _, e := range all {
		if total <= c.maxBytes {
			break
		}
		if os.Remove(e.path) == nil {
			total -= e.size
		}
	}
}
