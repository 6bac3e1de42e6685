package wasmbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/gpunet/gpunet/examples/mandelbrot/kernel"
)

// bareWazero is a wazero runtime set up directly, without the executor.
type bareWazero struct {
	rt      wazero.Runtime
	mod     wazero.CompiledModule
	compile time.Duration
}

// newBareWazero compiles module on a new runtime with WASI, timing the
// compilation; closeOnDone is its WithCloseOnContextDone.
func newBareWazero(ctx context.Context, module []byte, closeOnDone bool) (*bareWazero, error) {
	cfg := wazero.NewRuntimeConfig().WithCloseOnContextDone(closeOnDone)
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		rt.Close(ctx)
		return nil, err
	}
	t0 := time.Now()
	mod, err := rt.CompileModule(ctx, module)
	if err != nil {
		rt.Close(ctx)
		return nil, err
	}
	return &bareWazero{rt: rt, mod: mod, compile: time.Since(t0)}, nil
}

func (b *bareWazero) close() { b.rt.Close(context.Background()) }

// run runs the mandelbrot module with root as its "/" and checks its image.
func (b *bareWazero) run(ctx context.Context, root string, args []string, checksum string) (time.Duration, error) {
	d, img, err := b.runOutput(ctx, root, args, "mandelbrot.pgm")
	if err != nil {
		return 0, err
	}
	if kernel.Checksum(img) != checksum {
		return 0, errors.New("bare wazero's image differs from native's")
	}
	return d, nil
}

// runOutput runs the module with root as its "/" and returns the file it
// wrote as /out/output, timed from instantiation to _start's end.
func (b *bareWazero) runOutput(ctx context.Context, root string, args []string, output string) (time.Duration, []byte, error) {
	os.RemoveAll(root)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return 0, nil, err
	}
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithArgs(append([]string{"job"}, args...)...).
		WithStdout(io.Discard).WithStderr(io.Discard).
		WithFSConfig(wazero.NewFSConfig().WithDirMount(root, "/"))
	t0 := time.Now()
	inst, err := b.rt.InstantiateModule(ctx, b.mod, cfg) // runs _start
	d := time.Since(t0)
	var exit *sys.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 0) {
		return 0, nil, fmt.Errorf("bare wazero run: %w", err)
	}
	if inst != nil {
		inst.Close(ctx)
	}
	img, err := os.ReadFile(filepath.Join(root, "out", output))
	return d, img, err
}
