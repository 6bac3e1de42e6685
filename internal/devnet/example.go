package devnet

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gpunet/gpunet/examples"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/jobclient"
	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/sandbox"
	"github.com/gpunet/gpunet/internal/sandbox/wasm"
)

// ExampleResult is the outcome of the bundled example job.
type ExampleResult struct {
	Job    *ledger.Job
	OutDir string // where its decrypted outputs are
	Output []byte // its main output file (wordcount's counts.txt)
}

// WriteExamples writes the bundled wordcount example's files (its module,
// input and job spec) to home/examples/wordcount, so that the user can run
// it with `gpunet job run`, and returns its job spec's path.
func WriteExamples(home string) (string, error) {
	dir := filepath.Join(home, "examples", "wordcount")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for name, data := range map[string][]byte{
		"wordcount.wasm": examples.WordcountWASM,
		"input.txt":      examples.WordcountInput,
		"job.yaml":       []byte(examples.WordcountJob),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return "", err
		}
	}
	return filepath.Join(dir, "job.yaml"), nil
}

// RunExample submits the bundled wordcount example as alice, follows it on
// the devnet's providers, and fetches and decrypts its output into
// home/examples/job-ID (WriteExamples writes its files first). When it
// succeeds, the home records it (ExampleRan).
func RunExample(ctx context.Context, home, api string, onState func(*ledger.Job)) (*ExampleResult, error) {
	path, err := WriteExamples(home)
	if err != nil {
		return nil, err
	}
	spec, err := jobspec.Load(path)
	if err != nil {
		return nil, fmt.Errorf("bundled example: %w", err)
	}
	kr, err := keys.Open(filepath.Join(home, "keyring"))
	if err != nil {
		return nil, err
	}
	alice, err := kr.Get(DevKeys[0])
	if err != nil {
		return nil, err
	}
	cl := chainclient.New(api)
	jc := jobclient.New(cl, alice, home, ChainID)
	id, err := jc.Submit(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("submit the example job: %w", err)
	}
	j, err := jc.Follow(ctx, id, 100*time.Millisecond, onState)
	if err != nil {
		return nil, err
	}
	res := &ExampleResult{Job: j, OutDir: filepath.Join(home, "examples", fmt.Sprintf("job-%d", id))}
	if j.State != ledger.JobSucceeded {
		return res, fmt.Errorf("example job %d %s: %s", id, j.State, j.Reason)
	}
	os.RemoveAll(res.OutDir)
	if err := jc.FetchOutputs(ctx, j, res.OutDir); err != nil {
		return res, err
	}
	if res.Output, err = os.ReadFile(filepath.Join(res.OutDir, "out", "counts.txt")); err != nil {
		return res, err
	}
	return res, updateState(home, func(s *state) { s.ExampleJob, s.ExampleOut = id, res.OutDir })
}

// ExampleRan returns the id of the example job RunExample last ran to
// success in home, and where its outputs are; 0 when it has not.
func ExampleRan(home string) (id uint64, out string) {
	s, _ := readState(home)
	return s.ExampleJob, s.ExampleOut
}

// WarmExample runs the bundled example's module once on the providers'
// wasm executor, outside any job, so that its compiled form is in their
// cache when the example job (or any wordcount job) reaches a provider:
// compiling it takes seconds, and a first-time user is watching. It runs
// while the providers come online; its outcome does not matter.
func (p *Providers) WarmExample(ctx context.Context) {
	if p.sandboxes == nil {
		return
	}
	ex := p.sandboxes.Executors[wasm.Name]
	if ex == nil {
		return
	}
	dir, err := os.MkdirTemp("", "gpunet-warm-")
	if err != nil {
		return
	}
	defer os.RemoveAll(dir)
	module := filepath.Join(dir, "wordcount.wasm")
	work := filepath.Join(dir, "work")
	if os.WriteFile(module, examples.WordcountWASM, 0o600) != nil || os.MkdirAll(filepath.Join(work, "in"), 0o700) != nil ||
		os.WriteFile(filepath.Join(work, "in", "input.txt"), []byte("warm\n"), 0o600) != nil {
		return
	}
	ex.Run(ctx, &sandbox.Job{ID: "devnet-warm", Module: module, Args: []string{"/in/input.txt"}, WorkDir: work,
		Outputs: []string{"/out"}, Limits: sandbox.Limits{Timeout: time.Minute}, Deterministic: true}, io.Discard)
}
