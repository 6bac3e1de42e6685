package containerbench

import (
	"os"
	"path/filepath"
	"strings"
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
	res, err := Run(t.Context(), Options{Reps: 3, PullMiB: 4, PullLayers: 2, PullReps: 1, Dir: t.TempDir()})
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
	res, err := Run(b.Context(), Options{Reps: max(b.N, 5), PullMiB: 1, PullLayers: 1, PullReps: 1, Dir: b.TempDir()})
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
	res, err := Run(b.Context(), Options{Reps: 1, PullReps: max(b.N, 1), Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(res.Pull.CompressedMBps, "compressed-MB/s")
	b.ReportMetric(res.Pull.UnpackedMBps, "unpacked-MB/s")
	b.ReportMetric(0, "ns/op")
}

// TestRegistryServesPulls: the benchmark's own registry serves what the
// executor's store pulls, by digest, with no runc needed: the unpacked
// files are the image's.
func TestRegistryServesPulls(t *testing.T) {
	reg, err := serveRegistry()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.close()
	img, err := imageOf(map[string][]byte{"hello.txt": []byte("hello\n")}, []string{"/hello"})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := reg.add("bench/hello", img)
	if err != nil {
		t.Fatal(err)
	}
	s, err := oci.NewStore(t.TempDir(), oci.RegistryOptions{}, oci.UnpackLimits{}, oci.CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	im, _, err := s.Get(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(im.Rootfs, "hello.txt"))
	if err != nil || string(b) != "hello\n" {
		t.Errorf("hello.txt in the pulled rootfs: %q, %v", b, err)
	}
	// A tag, or a digest it does not hold, is not found.
	if _, _, err := s.Get(t.Context(), reg.addr+"/bench/hello@sha256:"+strings.Repeat("0", 64)); err == nil {
		t.Error("pulled an image the registry does not hold")
	}
}
