package bench

import (
	"os"
	"testing"

	"github.com/gpunet/gpunet/internal/sandbox/oci"
)

// requireRunc skips without runc, except with CI=true, where runc is
// installed and its absence fails the test.
func requireRunc(t testing.TB) {
	t.Helper()
	if _, err := oci.Probe(t.Context(), oci.Options{Dir: t.TempDir()}); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("this machine cannot run containers: %v", err)
		}
		t.Skipf("this machine cannot run containers: %v (install runc: apt-get install runc)", err)
	}
}

// TestContainerSmall runs the container benchmark small: every figure is
// positive and plausible.
func TestContainerSmall(t *testing.T) {
	requireRunc(t)
	res, err := RunContainer(t.Context(), ContainerOptions{Reps: 3, PullMiB: 4, PullLayers: 2, PullReps: 1, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s, p := res.Start, res.Pull
	if s.Reps != 3 || s.FirstOutputP50Ms <= 0 || s.FirstOutputMinMs > s.FirstOutputMaxMs || s.RunP50Ms < s.FirstOutputMinMs {
		t.Errorf("start %+v", s)
	}
	if p.Layers != 2 || p.Files != 4 || p.UnpackedBytes != 4<<20 || p.CompressedBytes <= 0 || p.CompressedBytes >= p.UnpackedBytes || p.UnpackedMBps <= 0 {
		t.Errorf("pull %+v", p)
	}
	t.Logf("%+v", res)
}

// BenchmarkContainerStart is `gpunet bench container`'s start phase: each
// iteration is one run of the probe image with its rootfs cached; the
// metric is the median time to its first output.
func BenchmarkContainerStart(b *testing.B) {
	requireRunc(b)
	res, err := RunContainer(b.Context(), ContainerOptions{Reps: max(b.N, 5), PullMiB: 1, PullLayers: 1, PullReps: 1, Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(res.Start.FirstOutputP50Ms, "first-output-p50-ms")
	b.ReportMetric(res.Start.RunP50Ms, "run-p50-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkContainerPull is the pull phase at its defaults (256 MiB, 4
// layers) from a loopback registry into an empty cache, per iteration.
func BenchmarkContainerPull(b *testing.B) {
	requireRunc(b)
	res, err := RunContainer(b.Context(), ContainerOptions{Reps: 1, PullReps: max(b.N, 1), Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(res.Pull.CompressedMBps, "compressed-MB/s")
	b.ReportMetric(res.Pull.UnpackedMBps, "unpacked-MB/s")
	b.ReportMetric(0, "ns/op")
}
