package oci

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// cgroupHost is how the host's cgroups are laid out, from
// /proc/self/mountinfo.
type cgroupHost struct {
	// V2 is true when the unified hierarchy is the only one (runc then
	// uses it); Unified is its mount point.
	V2      bool
	Unified string
	// V1 maps a v1 controller (memory, pids, cpu, freezer) to its mount
	// point.
	V1 map[string]string
	// Controllers are the v2 controllers available at the root.
	Controllers []string
}

func detectCgroups() cgroupHost {
	h := cgroupHost{V1: map[string]string{}}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return h
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL…] - FSTYPE SOURCE SUPEROPTS
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, fl := range fields {
			if fl == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+3 > len(fields) || len(fields) < 5 {
			continue
		}
		mnt, fstype, super := fields[4], fields[sep+1], fields[sep+3]
		switch fstype {
		case "cgroup2":
			if h.Unified == "" || mnt == "/sys/fs/cgroup" {
				h.Unified = mnt
			}
		case "cgroup":
			for _, o := range strings.Split(super, ",") {
				switch o {
				case "memory", "pids", "cpu", "freezer":
					h.V1[o] = mnt
				}
			}
		}
	}
	if h.Unified == "/sys/fs/cgroup" {
		h.V2 = true
		if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil {
			h.Controllers = strings.Fields(string(b))
		}
	}
	return h
}

// has reports whether controller c can be used. In v2 the freezer is
// part of every cgroup (cgroup.freeze), not a controller.
func (h cgroupHost) has(c string) bool {
	if h.V2 && c == "freezer" {
		return true
	}
	if h.V2 {
		for _, x := range h.Controllers {
			if x == c {
				return true
			}
		}
		return false
	}
	_, ok := h.V1[c]
	return ok
}

// writable reports whether this process can create cgroups for the
// controllers it needs.
func (h cgroupHost) writable() bool {
	if os.Geteuid() != 0 {
		return false
	}
	if h.V2 {
		return unix.Access(h.Unified, unix.W_OK) == nil
	}
	for _, c := range []string{"memory", "pids", "cpu", "freezer"} {
		if m, ok := h.V1[c]; ok && unix.Access(m, unix.W_OK) != nil {
			return false
		}
	}
	return len(h.V1) > 0
}

func (h cgroupHost) version() string {
	switch {
	case h.V2:
		return "v2"
	case len(h.V1) > 0:
		return "v1"
	}
	return "none"
}

// cgroupStats are what a job's cgroup recorded.
type cgroupStats struct {
	OOMKills  int64
	PeakBytes uint64
	// PidsRefused counts forks refused at the pids limit.
	PidsRefused int64
}

// readStats reads a container's cgroup (path as in the spec) after it
// stopped and before it is deleted. Missing files leave zeros.
func (h cgroupHost) readStats(cgPath string) cgroupStats {
	var st cgroupStats
	rel := strings.TrimPrefix(cgPath, "/")
	if h.V2 {
		dir := filepath.Join(h.Unified, rel)
		st.OOMKills = keyed(filepath.Join(dir, "memory.events"), "oom_kill")
		st.PeakBytes = uint64(single(filepath.Join(dir, "memory.peak")))
		st.PidsRefused = keyed(filepath.Join(dir, "pids.events"), "max")
		return st
	}
	if m, ok := h.V1["memory"]; ok {
		dir := filepath.Join(m, rel)
		st.OOMKills = keyed(filepath.Join(dir, "memory.oom_control"), "oom_kill")
		st.PeakBytes = uint64(single(filepath.Join(dir, "memory.max_usage_in_bytes")))
	}
	if p, ok := h.V1["pids"]; ok {
		st.PidsRefused = keyed(filepath.Join(p, rel, "pids.events"), "max")
	}
	return st
}

// keyed reads "KEY VALUE" lines and returns key's value (0 if none).
func keyed(file, key string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

func single(file string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}
