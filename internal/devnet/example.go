package devnet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gpunet/gpunet/examples"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/jobclient"
	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
)

// ExampleResult is the outcome of the bundled example job.
type ExampleResult struct {
	Job    *ledger.Job
	OutDir string // where its decrypted outputs are
	Output []byte // its main output file (wordcount's counts.txt)
}

// RunExample submits the bundled wordcount example as alice, follows it on
// the devnet's providers, and fetches and decrypts its output into
// home/examples/job-ID. The example's files are written to
// home/examples/wordcount so the user can run it again with
// `gpunet job run`.
func RunExample(ctx context.Context, home, api string, onState func(*ledger.Job)) (*ExampleResult, error) {
	dir := filepath.Join(home, "examples", "wordcount")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for name, data := range map[string][]byte{
		"wordcount.wasm": examples.WordcountWASM,
		"input.txt":      examples.WordcountInput,
		"job.yaml":       []byte(examples.WordcountJob),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return nil, err
		}
	}
	spec, err := jobspec.Load(filepath.Join(dir, "job.yaml"))
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
	res.Output, err = os.ReadFile(filepath.Join(res.OutDir, "out", "counts.txt"))
	return res, err
}
