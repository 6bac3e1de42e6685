package hwinfo

import (
	"testing"
	"testing/fstest"
)

func TestParseCPUModel(t *testing.T) {
	tests := []struct {
		name, cpuinfo, want string
	}{
		{"x86", "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7763 64-Core Processor\nmodel\t\t: 1\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 7763 64-Core Processor\n", "AMD EPYC 7763 64-Core Processor"},
		{"x86 spaces", "model name\t:   Intel(R)  Xeon(R) CPU   \n", "Intel(R) Xeon(R) CPU"},
		{"arm board", "processor\t: 0\nBogoMIPS\t: 108.00\nCPU implementer\t: 0x41\n\nHardware\t: BCM2835\nModel\t\t: Raspberry Pi 4 Model B Rev 1.4\n", "Raspberry Pi 4 Model B Rev 1.4"},
		{"arm hardware only", "Hardware\t: Qualcomm Technologies, Inc SM8150\n", "Qualcomm Technologies, Inc SM8150"},
		{"power", "processor\t: 0\ncpu\t\t: POWER9 (raw), altivec supported\n", "POWER9 (raw), altivec supported"},
		{"arm server", "processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n", ""},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		if got := parseCPUModel([]byte(tt.cpuinfo)); got != tt.want {
			t.Errorf("%s: parseCPUModel = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestParseMemTotal(t *testing.T) {
	tests := []struct {
		meminfo string
		want    uint64
		wantErr bool
	}{
		{"MemTotal:       16318412 kB\nMemFree:         1234 kB\n", 16318412 << 10, false},
		{"MemFree: 1 kB\nMemTotal: 2048\n", 2048, false},
		{"MemTotal: 4 MB\n", 4 << 20, false},
		{"MemFree: 1 kB\n", 0, true},
		{"MemTotal: lots kB\n", 0, true},
		{"MemTotal: 18446744073709551615 kB\n", 0, true},
		{"MemTotal:\n", 0, true},
	}
	for _, tt := range tests {
		got, err := parseMemTotal([]byte(tt.meminfo))
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("parseMemTotal(%q) = %d, %v; want %d, error %v", tt.meminfo, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseCgroupLimits(t *testing.T) {
	cpu := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"max 100000\n", 0, false},
		{"250000 100000\n", 2.5, true},
		{"50000\n", 0.5, true},
		{"", 0, false},
		{"abc 100000", 0, false},
		{"100000 0", 0, false},
	}
	for _, tt := range cpu {
		if got, ok := parseCPUMax(tt.in); got != tt.want || ok != tt.ok {
			t.Errorf("parseCPUMax(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
	if got, ok := parseCPUQuota("-1\n", "100000\n"); ok {
		t.Errorf("parseCPUQuota(-1) = %v, true; want no limit", got)
	}
	mem := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"max\n", 0, false},
		{"9223372036854771712\n", 0, false}, // v1's "unlimited"
		{"8589934592\n", 8 << 30, true},
		{"0\n", 0, false},
		{"-1", 0, false},
	}
	for _, tt := range mem {
		if got, ok := parseMemoryLimit(tt.in); got != tt.want || ok != tt.ok {
			t.Errorf("parseMemoryLimit(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// hostFS builds a root filesystem from path → content.
func hostFS(files map[string]string) fstest.MapFS {
	m := fstest.MapFS{}
	for p, c := range files {
		m[p] = &fstest.MapFile{Data: []byte(c)}
	}
	return m
}

func TestCgroupLimits(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		wantCPU float64
		wantMem uint64
	}{
		{
			name: "v2 nested, tighter parent",
			files: map[string]string{
				"proc/self/cgroup":                            "0::/kubepods/pod1/ctr\n",
				"sys/fs/cgroup/kubepods/pod1/ctr/cpu.max":     "400000 100000\n",
				"sys/fs/cgroup/kubepods/pod1/cpu.max":         "150000 100000\n",
				"sys/fs/cgroup/kubepods/cpu.max":              "max 100000\n",
				"sys/fs/cgroup/kubepods/pod1/ctr/memory.max":  "4294967296\n",
				"sys/fs/cgroup/kubepods/pod1/memory.max":      "max\n",
				"sys/fs/cgroup/kubepods/memory.max":           "17179869184\n",
				"sys/fs/cgroup/cgroup.controllers":            "cpu memory\n",
				"sys/fs/cgroup/kubepods/pod1/ctr/cgroup.type": "domain\n",
			},
			wantCPU: 1.5,
			wantMem: 4 << 30,
		},
		{
			name: "v2 namespaced: limits at the mount root",
			files: map[string]string{
				"proc/self/cgroup":         "0::/\n",
				"sys/fs/cgroup/cpu.max":    "200000 100000\n",
				"sys/fs/cgroup/memory.max": "max\n",
			},
			wantCPU: 2,
		},
		{
			name: "v1 host path not visible in the container",
			files: map[string]string{
				"proc/self/cgroup":                                "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n",
				"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us":      "300000\n",
				"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us":     "100000\n",
				"sys/fs/cgroup/memory/memory.limit_in_bytes":      "1073741824\n",
				"sys/fs/cgroup/memory/docker/other/limit_in_byte": "1\n",
			},
			wantCPU: 3,
			wantMem: 1 << 30,
		},
		{
			name: "v1 unlimited (this build machine)",
			files: map[string]string{
				"proc/self/cgroup":                                            "4:memory:/process_api/0e2e\n1:cpu:/\n0::/\n",
				"sys/fs/cgroup/cpu/cpu.cfs_quota_us":                          "-1\n",
				"sys/fs/cgroup/cpu/cpu.cfs_period_us":                         "100000\n",
				"sys/fs/cgroup/memory/memory.limit_in_bytes":                  "9223372036854771712\n",
				"sys/fs/cgroup/memory/process_api/0e2e/memory.limit_in_bytes": "9223372036854771712\n",
			},
		},
		{name: "no /proc", files: map[string]string{}},
	}
	for _, tt := range tests {
		fsys := hostFS(tt.files)
		if got := cgroupCPULimit(fsys); got != tt.wantCPU {
			t.Errorf("%s: cgroupCPULimit = %v, want %v", tt.name, got, tt.wantCPU)
		}
		if got := cgroupMemoryLimit(fsys); got != tt.wantMem {
			t.Errorf("%s: cgroupMemoryLimit = %v, want %v", tt.name, got, tt.wantMem)
		}
	}
}

func TestHostFingerprintersFromFS(t *testing.T) {
	fsys := hostFS(map[string]string{
		"proc/cpuinfo":             "model name\t: Test CPU 9000\n",
		"proc/meminfo":             "MemTotal: 33554432 kB\n", // 32 GiB
		"proc/self/cgroup":         "0::/\n",
		"sys/fs/cgroup/cpu.max":    "50000 100000\n",
		"sys/fs/cgroup/memory.max": "8589934592\n",
	})
	inv, err := Collect(t.Context(), CPUFingerprinter{FS: fsys}, MemoryFingerprinter{FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	if inv.CPUModel != "Test CPU 9000" || inv.CPUCores != 1 || inv.RAMBytes != 8<<30 {
		t.Errorf("model %q, cores %d, RAM %d; want Test CPU 9000, 1, 8 GiB", inv.CPUModel, inv.CPUCores, inv.RAMBytes)
	}
	if !hasNote(inv, "cgroup memory limit 8 GiB", "32 GiB") {
		t.Errorf("Notes = %q, want the cgroup memory limit explained", inv.Notes)
	}

	// Without /proc/meminfo the memory fingerprinter falls back to sysinfo(2);
	// without /proc/cpuinfo on linux the CPU model is a note.
	inv, err = Collect(t.Context(), CPUFingerprinter{FS: hostFS(nil)}, MemoryFingerprinter{FS: hostFS(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if inv.CPUCores < 1 {
		t.Errorf("CPUCores = %d without /proc, want NumCPU", inv.CPUCores)
	}
	if _, serr := sysinfoRAM(); serr == nil && inv.RAMBytes == 0 {
		t.Error("RAMBytes = 0: sysinfo fallback not used")
	}
}

func TestDiskFingerprinter(t *testing.T) {
	inv, err := Collect(t.Context(), DiskFingerprinter{Path: t.TempDir()}, DiskFingerprinter{Path: "/does/not/exist"})
	if err != nil {
		t.Fatal(err)
	}
	if !hasNote(inv, "disk: free space on /does/not/exist") {
		t.Errorf("Notes = %q, want one about the missing path", inv.Notes)
	}
	inv, _ = Collect(t.Context(), DiskFingerprinter{Path: t.TempDir()})
	if inv.DiskFreeBytes == 0 {
		t.Errorf("DiskFreeBytes = 0 for a temp dir (notes %q)", inv.Notes)
	}
}

func FuzzHostParsers(f *testing.F) {
	f.Add([]byte("model name\t: X\nMemTotal: 1 kB\n0::/a\n4:cpu,cpuacct:/b:c\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		parseCPUModel(data)
		parseMemTotal(data)
		parseProcCgroup(data)
		parseCPUMax(string(data))
		parseMemoryLimit(string(data))
	})
}
