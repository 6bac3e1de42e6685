package wasm

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/gpunet/gpunet/internal/sandbox/wasm/wasi"
)

// EngineWazero is wazero (github.com/tetratelabs/wazero), pure Go: the
// engine for programs built without cgo or for a platform wasmtime-go
// ships no library for. Its code runs 1.7–3× slower than native on
// LLVM-compiled guests (`gpunet bench wasm`), and it keeps no compiled
// modules on disk (its cache would hold them unencrypted), so each
// sandbox process compiles its module afresh.
const EngineWazero = "wazero"

// wazeroVersion is the wazero release in go.mod.
const wazeroVersion = "1.12.0"

type wazeroEngine struct{}

// wazeroProgram is a module compiled by wazero.
type wazeroProgram struct {
	rt  wazero.Runtime
	mod wazero.CompiledModule
	sys *wasi.System // the run's, for the host functions
}

func (wazeroEngine) prepare(bin []byte, _ string, fuel bool) (program, *childMessage) {
	if fuel {
		// wazero has no fuel, and counting instructions by a listener
		// on every function would not bound a loop without calls: a
		// judge program does not run here (Executor.MetersFuel).
		return nil, &childMessage{Error: ErrNoFuel.Error() + ": " + EngineWazero}
	}
	ctx := context.Background()
	// No WithCloseOnContextDone: the parent stops a guest by killing this
	// process, so the compiled code needs no termination checks. The
	// runtime's memory limit is wasm32's whole 4 GiB; the job's is
	// enforced by a memoryCap, which tells us when the job ran out of
	// memory.
	cfg := wazero.NewRuntimeConfig().WithMemoryLimitPages(65536)
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	p := &wazeroProgram{rt: rt}
	if err := p.bindWASI(ctx); err != nil {
		return nil, &childMessage{Error: "bind WASI: " + err.Error()}
	}
	mod, err := rt.CompileModule(ctx, bin)
	if err != nil {
		return nil, &childMessage{Failed: true, Reason: "invalid module: " + err.Error()}
	}
	p.mod = mod
	return p, nil
}

// bindWASI defines wasi.Funcs as the host module wasi_snapshot_preview1.
func (p *wazeroProgram) bindWASI(ctx context.Context) error {
	b := p.rt.NewHostModuleBuilder(wasi.Module)
	for i := range wasi.Funcs {
		f := &wasi.Funcs[i]
		params := make([]api.ValueType, len(f.Params))
		for j, c := range f.Params {
			params[j] = api.ValueTypeI32
			if c == 'I' {
				params[j] = api.ValueTypeI64
			}
		}
		var results []api.ValueType
		if !f.NoResult {
			results = []api.ValueType{api.ValueTypeI32}
		}
		n := len(params)
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
			var m wasi.Memory
			if mem := mod.Memory(); mem != nil {
				m, _ = mem.Read(0, mem.Size())
			}
			for j, c := range f.Params {
				if c == 'i' {
					stack[j] = uint64(uint32(stack[j]))
				}
			}
			errno := p.sys.Call(f, m, stack[:n])
			if errno == wasi.ErrnoExit {
				code, _ := p.sys.ExitCode()
				_ = mod.CloseWithExitCode(ctx, code)
				panic(sys.NewExitError(code))
			}
			if !f.NoResult {
				stack[0] = uint64(errno)
			}
		}), params, results).Export(f.Name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

func (p *wazeroProgram) run(s *wasi.System, limit, _ uint64, started func(), grew func(uint64)) outcome {
	ctx := context.Background()
	p.sys = s
	if _, ok := p.mod.ExportedFunctions()["_start"]; !ok {
		return outcome{invalid: noStart}
	}
	memCap := &memoryCap{limit: limit, onGrow: grew}
	cfg := wazero.NewModuleConfig().WithName("").WithStartFunctions()
	started()
	inst, err := instantiate(experimental.WithMemoryAllocator(ctx, memCap), p.rt, p.mod, cfg)
	if err == nil {
		_, err = inst.ExportedFunction("_start").Call(ctx)
	}
	out := outcome{peak: memCap.peakBytes(), oom: memCap.wasRefused()}
	var exit *sys.ExitError
	switch {
	case err == nil:
		out.exited = true
	case errors.As(err, &exit):
		out.exited, out.code = true, int32(exit.ExitCode())
	case errors.Is(err, errInstantiate):
		out.invalid = strings.TrimPrefix(err.Error(), errInstantiate.Error()+": ")
	default:
		msg, trace, _ := strings.Cut(err.Error(), "\n")
		out.trap = strings.TrimPrefix(msg, "wasm error: ")
		out.trace = strings.TrimSpace(trace)
	}
	return out
}

var errInstantiate = errors.New("instantiate")

// instantiate links and initialises the module without running _start. A
// failure here is the module's (a missing import, a bad segment) and is
// reported as an invalid module. It turns wazero's panic on an initial
// memory the allocator refused into an error.
func instantiate(ctx context.Context, rt wazero.Runtime, mod wazero.CompiledModule, cfg wazero.ModuleConfig) (inst api.Module, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: initial memory: %v", errInstantiate, p)
		}
	}()
	inst, err = rt.InstantiateModule(ctx, mod, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errInstantiate, err)
	}
	return inst, nil
}
