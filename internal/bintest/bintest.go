// Package bintest builds a Go program for tests once per content: every test
// binary of `go test ./...` that runs the gpunet binary (or another program
// of this module) as a subprocess asks Build for it, and all of them get the
// same file, linked once, from a cache keyed by a hash of the sources it is
// made of. A second `go test` run over unchanged sources links nothing.
//
// It is for tests only: no package that a shipped binary links may import it
// (its name ends in "test": internal/archtest bans such packages from every
// binary).
package bintest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// CacheEnv names the environment variable that chooses the cache directory;
// by default it is gpunet-bintest under the user's cache directory (as
// os.UserCacheDir), beside Go's own build cache.
const CacheEnv = "GPUNET_BINTEST_CACHE"

// keep is how long a cached program not asked for is kept: longer than any
// test run that might still start it.
const keep = 12 * time.Hour

// Build returns the path of the program that `go build` makes of the main
// package pkg (an import path, or a directory relative to the working
// directory) with env added to the go command's environment (GOOS=wasip1,
// CGO_ENABLED=0, …). The file is shared: callers must not write to it or
// remove it. Processes that ask at once for the same program wait for one
// build (a file lock); programs unused for half a day are removed.
func Build(ctx context.Context, pkg string, env ...string) (string, error) {
	root, err := cacheDir()
	if err != nil {
		return "", err
	}
	environ := append(os.Environ(), env...)
	key, name, err := sourceKey(ctx, pkg, environ)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, key)
	bin := filepath.Join(dir, name)
	if _, err := os.Stat(bin); err == nil {
		touch(dir)
		return bin, nil
	}

	unlock, err := lock(ctx, dir+".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(bin); err == nil { // built while we waited
		touch(dir)
		return bin, nil
	}
	tmp, err := os.MkdirTemp(root, key+".tmp-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(tmp, name), pkg)
	cmd.Env = environ
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	// A whole directory renamed into place: nobody sees a half-written file.
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("bintest: %w", err)
	}
	prune(root, key)
	return bin, nil
}

func cacheDir() (string, error) {
	dir := os.Getenv(CacheEnv)
	if dir == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("bintest: no cache directory (set %s): %w", CacheEnv, err)
		}
		dir = filepath.Join(c, "gpunet-bintest")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("bintest: %w", err)
	}
	return dir, nil
}

// listed is what sourceKey reads of `go list -deps -json`.
type listed struct {
	ImportPath string
	Name       string
	Dir        string
	Standard   bool
	Module     *struct {
		Path, Version string
		Replace       *struct{ Path, Version string }
	}
	GoFiles, CgoFiles, CFiles, CXXFiles, HFiles, SFiles, SysoFiles, EmbedFiles []string
}

// sourceKey hashes what the program is built from: the go command's version
// and settings, and for each package it links either its module's version
// (from the module cache, immutable) or the contents of its files (this
// module and local replacements). It returns the hash and the program's file
// name.
func sourceKey(ctx context.Context, pkg string, environ []string) (key, name string, err error) {
	h := sha256.New()
	goenv := exec.CommandContext(ctx, "go", "env", "GOVERSION", "GOOS", "GOARCH", "CGO_ENABLED", "GOFLAGS", "GOAMD64", "GOARM64", "CC")
	goenv.Env = environ
	goenvOut, err := goenv.Output()
	if err != nil {
		return "", "", fmt.Errorf("go env: %w%s", err, stderr(err))
	}
	fmt.Fprintf(h, "go env\n%s\n", goenvOut)

	list := exec.CommandContext(ctx, "go", "list", "-deps", "-json=ImportPath,Name,Dir,Standard,Module,GoFiles,CgoFiles,CFiles,CXXFiles,HFiles,SFiles,SysoFiles,EmbedFiles", pkg)
	list.Env = environ
	out, err := list.Output()
	if err != nil {
		return "", "", fmt.Errorf("go list %s: %w%s", pkg, err, stderr(err))
	}
	var main *listed
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		p := new(listed)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return "", "", fmt.Errorf("go list %s: %w", pkg, err)
		}
		main = p // -deps lists the package asked for last
		fmt.Fprintf(h, "package %s\n", p.ImportPath)
		if p.Standard {
			continue // the go version covers it
		}
		if m := p.Module; m != nil && m.Version != "" && (m.Replace == nil || m.Replace.Version != "") {
			fmt.Fprintf(h, "module %s@%s", m.Path, m.Version)
			if m.Replace != nil {
				fmt.Fprintf(h, " => %s@%s", m.Replace.Path, m.Replace.Version)
			}
			fmt.Fprintln(h)
			continue
		}
		files := slices.Concat(p.GoFiles, p.CgoFiles, p.CFiles, p.CXXFiles, p.HFiles, p.SFiles, p.SysoFiles, p.EmbedFiles)
		slices.Sort(files)
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join(p.Dir, f))
			if err != nil {
				return "", "", fmt.Errorf("bintest: %w", err)
			}
			fmt.Fprintf(h, "file %s %d\n", f, len(b))
			h.Write(b)
		}
	}
	if main == nil || main.Name != "main" {
		return "", "", fmt.Errorf("bintest: %s is not a main package", pkg)
	}
	name = filepath.Base(main.ImportPath)
	if lines := strings.Split(string(goenvOut), "\n"); len(lines) > 1 && lines[1] == "windows" {
		name += ".exe"
	}
	return hex.EncodeToString(h.Sum(nil))[:32], name, nil
}

func stderr(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return "\n" + string(ee.Stderr)
	}
	return ""
}

// touch marks dir as used now, so that prune keeps it.
func touch(dir string) {
	now := time.Now()
	_ = os.Chtimes(dir, now, now)
}

// prune removes the programs (and stale locks and temporary directories)
// not used for keep, except key's.
func prune(root, key string) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), key) {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > keep {
			os.RemoveAll(filepath.Join(root, e.Name()))
		}
	}
}
