package devnet

import (
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
)

// TestRegistryServesTheExample: the devnet's registry serves the container
// example's image, built from this repository, under a tag whose digest is
// the one the written specs name; a second build gives the same digest
// (the specs stay valid across starts); the home keeps the registry's
// address, and a start that finds it taken serves elsewhere and says so.
// Running the image on a provider is TestREADME's (test/e2e), with runc.
func TestRegistryServesTheExample(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("the example image is linux/amd64")
	}
	repo, err := FindRepo(".")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	r, moved, err := StartRegistry(home, "127.0.0.1:0")
	if err != nil || moved != "" {
		t.Fatalf("StartRegistry: %v, moved %q", err, moved)
	}
	ex, err := PublishExample(t.Context(), home, r, repo)
	if err != nil {
		t.Fatal(err)
	}
	got, err := oci.Resolve(t.Context(), ex.Tag, oci.RegistryOptions{})
	if err != nil || got.Ref != ex.Image || !strings.HasPrefix(ex.Image, r.Addr+"/gpunet/gpugemm@sha256:") {
		t.Fatalf("the tag %s resolves to %+v (%v); the specs name %s", ex.Tag, got, err, ex.Image)
	}
	for path, wantGPU := range map[string]int{ex.Spec: 0, ex.GPUSpec: 1} {
		s, err := jobspec.Load(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if s.Executor != "oci" || s.Image != ex.Image || s.Resources.GPU.Count != wantGPU || !s.IsDeterministic() {
			t.Errorf("%s: %+v", filepath.Base(path), s)
		}
	}
	again, err := PublishExample(t.Context(), home, r, repo)
	if err != nil || again.Image != ex.Image {
		t.Errorf("a second build: %+v, %v; want the same digest %s", again, err, ex.Image)
	}

	// The home remembers the address; taken, the next start moves.
	addr := r.Addr
	r2, moved, err := StartRegistry(home, "")
	if err != nil || r2.Addr == addr || !strings.Contains(moved, addr) {
		t.Fatalf("a second registry while the first holds %s: %v, moved %q", addr, err, moved)
	}
	r2.Close()
	r.Close()
	if s, _ := readState(home); s.Registry != r2.Addr {
		t.Errorf("the home keeps %q, want the last address %s", s.Registry, r2.Addr)
	}
}

// TestRegistryServesTheServiceExample: the devnet's registry serves the
// services example's image (examples/tinylm), built from this repository,
// under a tag whose digest the written service spec names; the spec is a
// valid service for the OpenAI model tinylm; a second build gives the
// same digest. Deploying it is the e2e tests'.
func TestRegistryServesTheServiceExample(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("the example image is linux/amd64")
	}
	repo, err := FindRepo(".")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	r, _, err := StartRegistry(home, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ex, err := PublishServiceExample(t.Context(), home, r, repo)
	if err != nil {
		t.Fatal(err)
	}
	got, err := oci.Resolve(t.Context(), ex.Tag, oci.RegistryOptions{})
	if err != nil || got.Ref != ex.Image || !strings.HasPrefix(ex.Image, r.Addr+"/gpunet/tinylm@sha256:") {
		t.Fatalf("the tag %s resolves to %+v (%v); the spec names %s", ex.Tag, got, err, ex.Image)
	}
	if want := filepath.Join(home, "examples", "service", "tinylm.yaml"); ex.Spec != want {
		t.Errorf("the spec is at %s, want %s", ex.Spec, want)
	}
	s, err := jobspec.Load(ex.Spec)
	if err != nil {
		t.Fatalf("%s: %v", ex.Spec, err)
	}
	ss := s.ServiceSpec()
	if !s.IsService() || s.Image != ex.Image || ss.OpenAI == nil || len(ss.OpenAI.Models) != 1 || ss.OpenAI.Models[0] != ex.Model ||
		ss.Readiness.Path != "/health" || len(ss.Ports) != 1 || ss.Ports[0].Port != ss.OpenAI.Port || ss.GPUCount != 0 {
		t.Errorf("the service spec: %+v", ss)
	}
	// The int8 network's spec: the same image, its own model, bit-exact.
	s8, err := jobspec.Load(ex.Int8Spec)
	if err != nil {
		t.Fatalf("%s: %v", ex.Int8Spec, err)
	}
	if ss8 := s8.ServiceSpec(); s8.Image != ex.Image || ss8.OpenAI == nil || len(ss8.OpenAI.Models) != 1 || ss8.OpenAI.Models[0] != ex.Int8Model ||
		!ss8.OpenAI.Exact || !slices.Contains(s8.Args, "tinylm-int8") {
		t.Errorf("the int8 service spec: %+v, args %q", ss8, s8.Args)
	}
	again, err := PublishServiceExample(t.Context(), home, r, repo)
	if err != nil || again.Image != ex.Image {
		t.Errorf("a second build: %+v, %v; want the same digest %s", again, err, ex.Image)
	}
}
