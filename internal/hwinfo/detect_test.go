package hwinfo

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"testing"
)

// TestDetectThisMachine runs the real fingerprinters, real NVML included. On a
// machine without the NVIDIA driver it must give a CPU-only inventory that
// says why.
func TestDetectThisMachine(t *testing.T) {
	inv, err := Detect(t.Context(), Options{DiskPath: t.TempDir()})
	if err != nil {
		t.Fatalf("Detect: %v", err)
	}
	js, _ := json.MarshalIndent(inv, "", "  ")
	t.Logf("Summary:\n%s\nJSON:\n%s", inv.Summary(), js)

	if len(inv.GPUs) == 0 && !hasNote(inv, "CPU-only provider") {
		t.Errorf("no GPUs and no note saying CPU-only: %q", inv.Notes)
	}
	if inv.CPUCores < 1 || inv.CPUCores > runtime.NumCPU() {
		t.Errorf("CPUCores = %d, want 1..%d", inv.CPUCores, runtime.NumCPU())
	}
	if inv.OS != runtime.GOOS || inv.Arch != runtime.GOARCH {
		t.Errorf("OS/Arch = %s/%s, want %s/%s", inv.OS, inv.Arch, runtime.GOOS, runtime.GOARCH)
	}
	if runtime.GOOS == "linux" {
		if inv.CPUModel == "" || inv.RAMBytes == 0 || inv.DiskFreeBytes == 0 {
			t.Errorf("CPU model %q, RAM %d, disk free %d: want all set on linux", inv.CPUModel, inv.RAMBytes, inv.DiskFreeBytes)
		}
	}
}

// fakeFingerprinter sets CPUModel, or fails, or panics.
type fakeFingerprinter struct {
	name  string
	model string
	err   error
	panic bool
}

func (f fakeFingerprinter) Name() string { return f.name }

func (f fakeFingerprinter) Fingerprint(ctx context.Context, inv *Inventory) error {
	if f.panic {
		panic("boom")
	}
	if f.err != nil {
		return f.err
	}
	inv.CPUModel = f.model
	return nil
}

func TestCollectTurnsFailuresIntoNotes(t *testing.T) {
	inv, err := Collect(t.Context(),
		fakeFingerprinter{name: "first", err: errors.New("cannot read")},
		fakeFingerprinter{name: "second", panic: true},
		fakeFingerprinter{name: "third", model: "Z80"},
	)
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	if inv.CPUModel != "Z80" {
		t.Errorf("CPUModel = %q: the fingerprinter after the failures did not run", inv.CPUModel)
	}
	for _, want := range []string{"first: cannot read", "second: panic: boom"} {
		if !hasNote(inv, want) {
			t.Errorf("Notes = %q, want %q", inv.Notes, want)
		}
	}
	if inv.GPUs == nil {
		t.Error("GPUs is nil; want an empty list so JSON says [] not null")
	}
}

func TestCollectStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	inv, err := Collect(ctx, fakeFingerprinter{name: "cpu", model: "Z80"})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if inv == nil || inv.CPUModel != "" {
		t.Errorf("inventory = %+v, want an empty one", inv)
	}
}
