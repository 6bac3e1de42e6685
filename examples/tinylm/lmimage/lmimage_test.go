package lmimage

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/examples/tinylm/model"
	"github.com/gpunet/gpunet/examples/tinylm/server"
	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/oci"
	"github.com/gpunet/gpunet/internal/sandbox/oci/ocitest"
)

// TestImage builds the example's image as the devnet does, checks that
// the program is static (no interpreter: no libc needed), that a second
// build gives the same digest, that the spec is a valid service spec
// naming it, and then runs it with runc: as a batch job (-prompt) and as
// a provider runs a service.
func TestImage(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("the example image is linux/amd64")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "tinylm")
	if err := BuildProgram(t.Context(), "../../..", bin); err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the program has an ELF interpreter: it is not static")
		}
	}
	f.Close()
	img, err := Build(bin)
	if err != nil {
		t.Fatal(err)
	}
	bin2 := filepath.Join(dir, "tinylm2")
	if err := BuildProgram(t.Context(), "../../..", bin2); err != nil {
		t.Fatal(err)
	}
	img2, err := Build(bin2)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := img2.Digest()
	if d1 != d2 {
		t.Errorf("two builds: digests %s and %s", d1, d2)
	}
	reg := ocitest.Registry(t, nil)
	ref := ocitest.Push(t, reg, Repo, img)

	spec, err := jobspec.Parse([]byte(Spec(ref)), t.TempDir())
	if err != nil {
		t.Fatalf("the spec: %v\n%s", err, Spec(ref))
	}
	ss := spec.ServiceSpec()
	if !spec.IsService() || spec.Image != ref || spec.Name != "tinylm" || !strings.Contains(ref, "@sha256:") ||
		ss.OpenAI == nil || ss.OpenAI.Port != Port || ss.Readiness.Port != Port || ss.Readiness.Path != "/health" {
		t.Fatalf("the spec: %+v", spec)
	}
	spec8, err := jobspec.Parse([]byte(Int8Spec(ref)), t.TempDir())
	if err != nil {
		t.Fatalf("the int8 spec: %v\n%s", err, Int8Spec(ref))
	}
	if ss8 := spec8.ServiceSpec(); spec8.Name != Int8Model || spec8.Image != ref || ss8.OpenAI == nil || !ss8.OpenAI.Exact ||
		len(ss8.OpenAI.Models) != 1 || ss8.OpenAI.Models[0] != Int8Model {
		t.Fatalf("the int8 spec: %+v", spec8)
	}

	ex, err := oci.New(t.Context(), oci.Options{Dir: t.TempDir()})
	ocitest.RequireRunc(t, nil, err)
	defer ex.Close()
	// As a batch job: -prompt prints the completion the model here gives.
	work := filepath.Join(t.TempDir(), "w")
	os.Mkdir(work, 0o700)
	var jobLogs bytes.Buffer
	res, err := ex.Run(t.Context(), &sandbox.Job{
		ID: t.Name(), Image: ref, Args: []string{"-prompt", "Is not Fire a Body?", "-seed", "3", "-max-tokens", "20"}, WorkDir: work,
		Limits: sandbox.Limits{Timeout: time.Minute, MemoryBytes: 128 << 20},
	}, &jobLogs)
	if err != nil {
		t.Fatal(err)
	}
	m := model.Default()
	want := m.Generate(m.Tokenize("Is not Fire a Body?"), model.Options{Temperature: 1, Seed: 3, MaxTokens: 20}).Run()
	if res.Failed || !strings.Contains(jobLogs.String(), want+"\n") {
		t.Fatalf("-prompt in the container: %+v, want %q in the logs:\n%s", res, want, jobLogs.String())
	}

	// The int8 network from the same image, on the container's CPU: the
	// completion this process's int8 model gives.
	jobLogs.Reset()
	res, err = ex.Run(t.Context(), &sandbox.Job{
		ID: t.Name() + "-int8", Image: ref, Args: append(spec8.Args[2:], "-prompt", "Is not Fire a Body?", "-seed", "3", "-max-tokens", "20"), WorkDir: work,
		Limits: sandbox.Limits{Timeout: time.Minute, MemoryBytes: 128 << 20},
	}, &jobLogs)
	if err != nil {
		t.Fatal(err)
	}
	m8, err := model.DefaultInt8(model.CPU{})
	if err != nil {
		t.Fatal(err)
	}
	want8 := m8.Generate(m8.Tokenize("Is not Fire a Body?"), model.Options{Temperature: 1, Seed: 3, MaxTokens: 20}).Run()
	if res.Failed || want8 == want || !strings.Contains(jobLogs.String(), want8+"\n") {
		t.Fatalf("-model %s -prompt in the container: %+v, want %q in the logs:\n%s", Int8Model, res, want8, jobLogs.String())
	}

	t.Run("service", func(t *testing.T) {
		if ex.Capabilities().Rootless {
			t.Skip("services need a root agent (dialling into the container's network namespace)")
		}
		testService(t, ex, ref, spec.Args, "tinylm", server.New(model.Default(), server.Options{}))
		testService(t, ex, ref, spec8.Args, Int8Model, server.New(m8, server.Options{Name: Int8Model}))
	})
}

// testService runs the image as a provider runs a service's replica (with
// args): its /health answers, and a chat completion of model name through
// the container's port is the one here (this process's server of that
// model) gives for the same request.
func testService(t *testing.T, ex *oci.Executor, ref string, args []string, name string, here http.Handler) {
	scratch := filepath.Join(t.TempDir(), "scratch")
	os.Mkdir(scratch, 0o700)
	logs := &syncBuffer{}
	h, err := ex.StartService(t.Context(), &sandbox.Service{
		ID: t.Name() + "-" + name, Image: ref, Args: args, WorkDir: scratch,
		Limits: sandbox.Limits{MemoryBytes: 128 << 20, CPU: 0.5, DiskBytes: 256 << 20},
	}, logs)
	if err != nil {
		t.Fatalf("StartService: %v\n%s", err, logs)
	}
	defer h.Stop()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return h.Dial(ctx, Port) },
	}}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := client.Get("http://replica/health")
		if err == nil && resp.StatusCode == 200 {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/health in the container: %v\n%s", err, logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	body := `{"model":"` + name + `","messages":[{"role":"user","content":"Is not Fire a Body?"}],"max_tokens":20,"seed":3}`
	resp, err := client.Post("http://replica/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("a completion from the container: %v\n%s", err, logs)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	rec := httptest.NewRecorder()
	here.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body)))
	if a, b := content(t, got), content(t, rec.Body.Bytes()); a == "" || a != b {
		t.Errorf("the container answers %q (%s), this process %q", a, got, b)
	}
}

func content(t *testing.T, b []byte) string {
	t.Helper()
	var c struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &c); err != nil || len(c.Choices) != 1 {
		t.Fatalf("%s: %v", b, err)
	}
	return c.Choices[0].Message.Content
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
