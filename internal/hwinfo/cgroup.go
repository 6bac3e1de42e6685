package hwinfo

import (
	"bufio"
	"bytes"
	"io/fs"
	"math"
	"path"
	"strconv"
	"strings"
)

// A cgroup limit is read from files under the host's root filesystem, given as
// an fs.FS so tests can supply their own /proc and /sys.

// cgroupUnlimited is v1's "no limit" for memory: it reports a page-aligned
// value near MaxInt64 rather than a keyword.
const cgroupUnlimited = 1 << 62

// cgroup is one line of /proc/self/cgroup.
type cgroup struct {
	controllers string // v1 controller list as mounted, e.g. "cpu,cpuacct"; "" for v2
	path        string // the process's cgroup, e.g. "/system.slice/gpunet.service"
}

// selfCgroups parses /proc/self/cgroup: controller name → its cgroup. The v2
// unified hierarchy is under the key "".
func selfCgroups(fsys fs.FS) map[string]cgroup {
	data, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return nil
	}
	return parseProcCgroup(data)
}

func parseProcCgroup(data []byte) map[string]cgroup {
	out := map[string]cgroup{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// "hierarchy-ID:controller-list:cgroup-path"; the path may hold ':'.
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			out[""] = cgroup{path: parts[2]}
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c != "" {
				out[c] = cgroup{controllers: parts[1], path: parts[2]}
			}
		}
	}
	return out
}

// cgroupDirs lists the directories to look in for a controller's limit files
// ("" for v2): from the process's own cgroup up to the root of the mount. A
// limit anywhere on that path applies, so callers take the smallest. When a
// container sees its host's cgroup path without a cgroup namespace, the
// nested path does not exist under its mount and only the mount root remains.
func cgroupDirs(fsys fs.FS, cgroups map[string]cgroup, controller string) []string {
	cg, ok := cgroups[controller]
	if !ok {
		return nil
	}
	mounts := []string{"sys/fs/cgroup"}
	if controller != "" {
		// v1 hierarchies are mounted under their controller list, usually
		// with a symlink per controller: /sys/fs/cgroup/cpu,cpuacct and cpu.
		mounts = []string{"sys/fs/cgroup/" + cg.controllers, "sys/fs/cgroup/" + controller}
	}
	var dirs []string
	seen := map[string]bool{}
	for _, m := range mounts {
		for d := path.Clean("/" + cg.path); ; d = path.Dir(d) {
			full := strings.TrimSuffix(m+d, "/")
			if !seen[full] {
				seen[full] = true
				if fi, err := fs.Stat(fsys, full); err == nil && fi.IsDir() {
					dirs = append(dirs, full)
				}
			}
			if d == "/" {
				break
			}
		}
	}
	return dirs
}

// cgroupCPULimit returns the tightest CPU quota on this process in CPUs (e.g.
// 2.5), or 0 when there is none or it cannot be read.
func cgroupCPULimit(fsys fs.FS) float64 {
	cg := selfCgroups(fsys)
	limit := math.Inf(1)
	for _, d := range cgroupDirs(fsys, cg, "") {
		if data, err := fs.ReadFile(fsys, d+"/cpu.max"); err == nil {
			if l, ok := parseCPUMax(string(data)); ok {
				limit = min(limit, l)
			}
		}
	}
	for _, d := range cgroupDirs(fsys, cg, "cpu") {
		q, err1 := fs.ReadFile(fsys, d+"/cpu.cfs_quota_us")
		p, err2 := fs.ReadFile(fsys, d+"/cpu.cfs_period_us")
		if err1 == nil && err2 == nil {
			if l, ok := parseCPUQuota(string(q), string(p)); ok {
				limit = min(limit, l)
			}
		}
	}
	if math.IsInf(limit, 1) {
		return 0
	}
	return limit
}

// parseCPUMax parses cgroup v2 cpu.max, "quota period" or "max period".
func parseCPUMax(s string) (float64, bool) {
	f := strings.Fields(s)
	if len(f) == 0 || f[0] == "max" {
		return 0, false
	}
	period := "100000"
	if len(f) > 1 {
		period = f[1]
	}
	return parseCPUQuota(f[0], period)
}

// parseCPUQuota parses cgroup v1 cpu.cfs_quota_us and cpu.cfs_period_us; a
// quota of -1 means none.
func parseCPUQuota(quota, period string) (float64, bool) {
	q, err1 := strconv.ParseInt(strings.TrimSpace(quota), 10, 64)
	p, err2 := strconv.ParseInt(strings.TrimSpace(period), 10, 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return 0, false
	}
	return float64(q) / float64(p), true
}

// cgroupMemoryLimit returns the tightest memory limit on this process in
// bytes, or 0 when there is none or it cannot be read.
func cgroupMemoryLimit(fsys fs.FS) uint64 {
	cg := selfCgroups(fsys)
	var limit uint64
	take := func(v uint64, ok bool) {
		if ok && (limit == 0 || v < limit) {
			limit = v
		}
	}
	for _, d := range cgroupDirs(fsys, cg, "") {
		if data, err := fs.ReadFile(fsys, d+"/memory.max"); err == nil {
			take(parseMemoryLimit(string(data)))
		}
	}
	for _, d := range cgroupDirs(fsys, cg, "memory") {
		if data, err := fs.ReadFile(fsys, d+"/memory.limit_in_bytes"); err == nil {
			take(parseMemoryLimit(string(data)))
		}
	}
	return limit
}

// parseMemoryLimit parses v2 memory.max ("max" or bytes) and v1
// memory.limit_in_bytes (bytes, near MaxInt64 for none).
func parseMemoryLimit(s string) (uint64, bool) {
	s = strings.TrimSpace(s)
	if s == "max" {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v == 0 || v >= cgroupUnlimited {
		return 0, false
	}
	return v, true
}
