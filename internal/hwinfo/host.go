package hwinfo

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// rootFS is the host filesystem the host fingerprinters read /proc and /sys
// from unless they are given another.
func rootFS(fsys fs.FS) fs.FS {
	if fsys != nil {
		return fsys
	}
	return os.DirFS("/")
}

// CPUFingerprinter finds the CPU model and how many logical CPUs this process
// may use: runtime.NumCPU (the affinity mask), lowered to a cgroup CPU quota
// when there is a smaller one (rounded up: a 2.5-CPU quota can keep 3 cores
// busy part of the time).
type CPUFingerprinter struct {
	FS fs.FS // the host's root filesystem; nil: os.DirFS("/")
}

// Name returns "cpu".
func (CPUFingerprinter) Name() string { return "cpu" }

// Fingerprint fills inv.CPUModel and inv.CPUCores.
func (f CPUFingerprinter) Fingerprint(ctx context.Context, inv *Inventory) error {
	fsys := rootFS(f.FS)
	inv.CPUCores = runtime.NumCPU()
	if limit := cgroupCPULimit(fsys); limit > 0 && limit < float64(inv.CPUCores) {
		cores := max(1, int(math.Ceil(limit)))
		inv.Notef("cgroup CPU quota %.2f CPUs: counting %d of %d CPUs", limit, cores, inv.CPUCores)
		inv.CPUCores = cores
	}
	data, err := fs.ReadFile(fsys, "proc/cpuinfo")
	if err != nil {
		if runtime.GOOS == "linux" {
			return fmt.Errorf("CPU model: %w", err)
		}
		return nil // no /proc to read the model from
	}
	inv.CPUModel = parseCPUModel(data)
	if inv.CPUModel == "" {
		return errors.New("CPU model: not found in /proc/cpuinfo")
	}
	return nil
}

// parseCPUModel returns the CPU's model from /proc/cpuinfo: "model name" on
// x86, "Model" or "Hardware" on ARM boards, "cpu model" on MIPS, "cpu" on POWER.
func parseCPUModel(data []byte) string {
	fields := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.Join(strings.Fields(v), " ")
		if _, dup := fields[k]; !dup && v != "" {
			fields[k] = v
		}
	}
	for _, k := range []string{"model name", "Model", "Hardware", "cpu model", "cpu"} {
		if v := fields[k]; v != "" {
			return v
		}
	}
	return ""
}

// MemoryFingerprinter finds physical memory: MemTotal from /proc/meminfo, or
// sysinfo(2) where that cannot be read, capped by a cgroup memory limit.
type MemoryFingerprinter struct {
	FS fs.FS // the host's root filesystem; nil: os.DirFS("/")
}

// Name returns "memory".
func (MemoryFingerprinter) Name() string { return "memory" }

// Fingerprint fills inv.RAMBytes.
func (f MemoryFingerprinter) Fingerprint(ctx context.Context, inv *Inventory) error {
	fsys := rootFS(f.FS)
	total, err := meminfoTotal(fsys)
	if err != nil {
		var serr error
		if total, serr = sysinfoRAM(); serr != nil {
			return fmt.Errorf("RAM size: %w; %w", err, serr)
		}
	}
	inv.RAMBytes = total
	if limit := cgroupMemoryLimit(fsys); limit > 0 && limit < total {
		inv.Notef("cgroup memory limit %s: counting it instead of %s RAM", humanBytes(limit), humanBytes(total))
		inv.RAMBytes = limit
	}
	return nil
}

func meminfoTotal(fsys fs.FS) (uint64, error) {
	data, err := fs.ReadFile(fsys, "proc/meminfo")
	if err != nil {
		return 0, err
	}
	return parseMemTotal(data)
}

// parseMemTotal reads "MemTotal:  16318412 kB" from /proc/meminfo.
func parseMemTotal(data []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			break
		}
		v, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/meminfo MemTotal %q: %w", f[0], err)
		}
		mult := uint64(1)
		if len(f) > 1 {
			switch strings.ToLower(f[1]) {
			case "kb":
				mult = 1 << 10
			case "mb":
				mult = 1 << 20
			case "gb":
				mult = 1 << 30
			}
		}
		if v > math.MaxUint64/mult {
			return 0, fmt.Errorf("/proc/meminfo MemTotal %s %s: out of range", f[0], f[1])
		}
		return v * mult, nil
	}
	return 0, errors.New("/proc/meminfo has no MemTotal")
}

// DiskFingerprinter measures the disk space available to this (unprivileged)
// process on the filesystem holding Path.
type DiskFingerprinter struct {
	Path string // "" = "/"
}

// Name returns "disk".
func (DiskFingerprinter) Name() string { return "disk" }

// Fingerprint fills inv.DiskFreeBytes.
func (f DiskFingerprinter) Fingerprint(ctx context.Context, inv *Inventory) error {
	p := f.Path
	if p == "" {
		p = "/"
	}
	free, err := diskFree(p)
	if err != nil {
		return fmt.Errorf("free space on %s: %w", p, err)
	}
	inv.DiskFreeBytes = free
	return nil
}

// OSFingerprinter records the operating system and architecture this binary
// runs on (GOOS and GOARCH).
type OSFingerprinter struct{}

// Name returns "os".
func (OSFingerprinter) Name() string { return "os" }

// Fingerprint fills inv.OS and inv.Arch.
func (OSFingerprinter) Fingerprint(ctx context.Context, inv *Inventory) error {
	inv.OS, inv.Arch = runtime.GOOS, runtime.GOARCH
	return nil
}
