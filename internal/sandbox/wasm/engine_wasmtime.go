//go:build cgo && (linux || darwin) && (amd64 || arm64)

package wasm

/*
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/mman.h>

// The parts of wasmtime's C API (wasmtime/config.h) that wasmtime-go does
// not wrap: a custom memory creator. The symbols come from the static
// library wasmtime-go links.
typedef struct wasm_config_t wasm_config_t;
typedef struct wasmtime_error wasmtime_error_t;
typedef struct wasm_memorytype_t wasm_memorytype_t;
typedef uint8_t *(*gpunet_get_cb)(void *env, size_t *byte_size, size_t *byte_capacity);
typedef wasmtime_error_t *(*gpunet_grow_cb)(void *env, size_t new_size);
typedef struct {
	void *env;
	gpunet_get_cb get_memory;
	gpunet_grow_cb grow_memory;
	void (*finalizer)(void *);
} gpunet_linear_memory;
typedef wasmtime_error_t *(*gpunet_new_cb)(void *env, const wasm_memorytype_t *ty, size_t minimum,
	size_t maximum, size_t reserved, size_t guard, gpunet_linear_memory *ret);
typedef struct {
	void *env;
	gpunet_new_cb new_memory;
	void (*finalizer)(void *);
} gpunet_memory_creator;
extern void wasmtime_config_host_memory_creator_set(wasm_config_t *, gpunet_memory_creator *);
extern wasmtime_error_t *wasmtime_error_new(const char *);

// One job per process: the limit and what the guest did are globals.
static size_t gpunet_limit = (size_t)-1;
static int gpunet_refused;
static size_t gpunet_peak;

struct gpunet_mem { uint8_t *base; size_t size, cap, total; };

static void gpunet_note(size_t n) {
	if (n > __atomic_load_n(&gpunet_peak, __ATOMIC_RELAXED))
		__atomic_store_n(&gpunet_peak, n, __ATOMIC_RELAXED);
}

static wasmtime_error_t *gpunet_refuse(void) {
	__atomic_store_n(&gpunet_refused, 1, __ATOMIC_RELAXED);
	return wasmtime_error_new("memory limit reached");
}

static uint8_t *gpunet_get(void *env, size_t *size, size_t *cap) {
	struct gpunet_mem *m = env;
	*size = m->size;
	*cap = m->cap;
	return m->base;
}

static wasmtime_error_t *gpunet_grow(void *env, size_t n) {
	struct gpunet_mem *m = env;
	if (n > gpunet_limit || n > m->cap) return gpunet_refuse();
	if (n > m->size) {
		if (mprotect(m->base + m->size, n - m->size, PROT_READ | PROT_WRITE) != 0)
			return wasmtime_error_new("mprotect failed");
		m->size = n;
	}
	gpunet_note(n);
	return NULL;
}

// The memories made, so that a host call can find the guest's by its base
// (which never moves: each grows in place) and read its size without a
// call into wasmtime.
#define GPUNET_MAX_MEMS 16
static struct gpunet_mem *gpunet_mems[GPUNET_MAX_MEMS];

static void gpunet_free(void *env) {
	struct gpunet_mem *m = env;
	for (int i = 0; i < GPUNET_MAX_MEMS; i++)
		if (gpunet_mems[i] == m) gpunet_mems[i] = NULL;
	munmap(m->base, m->total);
	free(m);
}

static struct gpunet_mem *gpunet_mem_at(uint8_t *base) {
	for (int i = 0; i < GPUNET_MAX_MEMS; i++)
		if (gpunet_mems[i] != NULL && gpunet_mems[i]->base == base) return gpunet_mems[i];
	return NULL;
}

// A linear memory as wasmtime makes its own: the whole reservation (4 GiB
// for wasm32 by default) and the guard after it mapped inaccessible, the
// accessible part growing in place, so compiled code needs no bounds
// checks; but the limit is the job's, and a refusal is remembered.
static wasmtime_error_t *gpunet_new(void *env, const wasm_memorytype_t *ty, size_t minimum,
	size_t maximum, size_t reserved, size_t guard, gpunet_linear_memory *ret) {
	if (minimum > gpunet_limit) return gpunet_refuse();
	size_t cap = reserved;
	if (cap < minimum) cap = minimum;
	if (reserved == 0) cap = gpunet_limit < maximum ? gpunet_limit : maximum;
	size_t total = cap + guard;
	uint8_t *b = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (b == MAP_FAILED) return wasmtime_error_new("mmap failed");
	if (minimum > 0 && mprotect(b, minimum, PROT_READ | PROT_WRITE) != 0) {
		munmap(b, total);
		return wasmtime_error_new("mprotect failed");
	}
	struct gpunet_mem *m = malloc(sizeof *m);
	if (m == NULL) {
		munmap(b, total);
		return wasmtime_error_new("out of host memory");
	}
	m->base = b;
	m->size = minimum;
	m->cap = cap;
	m->total = total;
	for (int i = 0; i < GPUNET_MAX_MEMS; i++)
		if (gpunet_mems[i] == NULL) { gpunet_mems[i] = m; break; }
	gpunet_note(minimum);
	ret->env = m;
	ret->get_memory = gpunet_get;
	ret->grow_memory = gpunet_grow;
	ret->finalizer = gpunet_free;
	return NULL;
}

static void gpunet_set_creator(void *cfg) {
	gpunet_memory_creator c = { NULL, gpunet_new, NULL };
	wasmtime_config_host_memory_creator_set(cfg, &c);
}
static void gpunet_set_limit(size_t n) { gpunet_limit = n; }
static int gpunet_was_refused(void) { return __atomic_load_n(&gpunet_refused, __ATOMIC_RELAXED); }
static size_t gpunet_peak_bytes(void) { return __atomic_load_n(&gpunet_peak, __ATOMIC_RELAXED); }

// The WASI imports, bound with wasmtime's unchecked host functions
// (wasmtime/linker.h): the arguments come as raw 16-byte slots, results go
// in the first, and the call goes straight to gpunetWasiCall
// (engine_wasmtime_call.go) with the guest's memory, rather than through
// wasmtime-go's typed callbacks (a registry lookup under a lock and a few
// allocations each) and three more calls into wasmtime for the memory:
// the host-call cost of every read and write the guest makes.
typedef struct wasmtime_linker wasmtime_linker_t;
typedef struct wasmtime_caller wasmtime_caller_t;
typedef struct wasm_functype_t wasm_functype_t;
typedef struct wasm_trap_t wasm_trap_t;
typedef union { int32_t i32; int64_t i64; uint8_t v128[16]; void *ref; } gpunet_val_raw;
typedef wasm_trap_t *(*gpunet_unchecked_cb)(void *env, wasmtime_caller_t *caller, gpunet_val_raw *av, size_t n);
extern wasmtime_error_t *wasmtime_linker_define_func_unchecked(wasmtime_linker_t *linker,
	const char *module, size_t module_len, const char *name, size_t name_len,
	const wasm_functype_t *ty, gpunet_unchecked_cb cb, void *data, void (*finalizer)(void *));
extern wasm_trap_t *wasmtime_trap_new(const char *msg, size_t msg_len);
extern void wasmtime_error_delete(wasmtime_error_t *);
extern uint32_t gpunetWasiCall(size_t fn, void *av, void *mem, size_t mem_len, void *caller);

// The guest's memory once a call found it (see wasmtimeHostCall).
static struct gpunet_mem *gpunet_guest;
static void gpunet_set_guest(struct gpunet_mem *m) { gpunet_guest = m; }

static wasm_trap_t *gpunet_wasi(void *env, wasmtime_caller_t *caller, gpunet_val_raw *av, size_t n) {
	struct gpunet_mem *m = gpunet_guest;
	uint32_t r = gpunetWasiCall((size_t)env, av, m ? m->base : NULL, m ? m->size : 0, caller);
	if (r == 0xffffffffu) return wasmtime_trap_new("exit", 4); // proc_exit
	if (n > 0) av[0].i32 = (int32_t)r;
	return NULL;
}

static wasmtime_error_t *gpunet_define(void *linker, _GoString_ module, _GoString_ name, void *ty, size_t fn) {
	return wasmtime_linker_define_func_unchecked(linker, _GoStringPtr(module), _GoStringLen(module),
		_GoStringPtr(name), _GoStringLen(name), ty, gpunet_wasi, (void *)fn, NULL);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"
	"unsafe"

	"github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/gpunet/gpunet/internal/sandbox/wasm/wasi"
)

// wasmtimeBuiltIn is wasmtime, built in.
var wasmtimeBuiltIn engine = wasmtimeEngine{}

type wasmtimeEngine struct{}

type wasmtimeProgram struct {
	engine *wasmtime.Engine
	module *wasmtime.Module
	fuel   bool // compiled to count fuel
}

// newWasmtimeEngine is the engine of wasmtimeSettings; with fuel, its
// compiled code also counts fuel (wasmtimeFuelSetting): wasmtime adds each
// operator's cost as it runs and traps when the store's fuel is spent, a
// count that depends only on the module and what its host calls return,
// not on the machine or its load.
func newWasmtimeEngine(fuel bool) *wasmtime.Engine {
	cfg := wasmtime.NewConfig()
	cfg.SetConsumeFuel(fuel)
	cfg.SetCraneliftOptLevel(wasmtime.OptLevelSpeed)
	cfg.SetWasmRelaxedSIMDDeterministic(true)
	cfg.SetWasmThreads(false)
	// Our memory creator makes each linear memory; wasmtime's copy-on-write
	// initialisation needs its own.
	cfg.SetMemoryInitCOWSet(false)
	// wasmtime-go's Config holds the C config as its one field.
	C.gpunet_set_creator(*(*unsafe.Pointer)(unsafe.Pointer(cfg)))
	return wasmtime.NewEngineWithConfig(cfg)
}

func (wasmtimeEngine) prepare(bin []byte, cacheDir string, fuel bool) (program, *childMessage) {
	defer clear(bin) // wasmtime keeps what it needs; the plaintext module goes
	eng := newWasmtimeEngine(fuel)
	key := wasmtimeKey()
	if fuel {
		key = wasmtimeFuelKey()
	}
	var cache *moduleCache
	if cacheDir != "" {
		var err error
		if cache, err = openCache(cacheDir, 0); err != nil {
			return nil, &childMessage{Error: "compiled-module cache: " + err.Error()}
		}
	}
	if cache != nil {
		art, err := cache.load(key, bin)
		if art != nil {
			mod, derr := wasmtime.NewModuleDeserialize(eng, art)
			clear(art)
			if derr == nil {
				return &wasmtimeProgram{engine: eng, module: mod, fuel: fuel}, nil
			}
			// Sealed by us but not loadable (the CPU changed under a
			// provider?): compile afresh and replace it.
		} else if err != nil && !errors.Is(err, errTampered) {
			return nil, &childMessage{Error: "compiled-module cache: " + err.Error()}
		}
	}
	mod, err := wasmtime.NewModule(eng, bin)
	if err != nil {
		return nil, &childMessage{Failed: true, Reason: "invalid module: " + firstLine(err.Error())}
	}
	if cache != nil {
		if art, err := mod.Serialize(); err == nil {
			cache.store(key, bin, art) // best effort: a job runs without it
			clear(art)
		}
	}
	return &wasmtimeProgram{engine: eng, module: mod, fuel: fuel}, nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}

// maxTableElements bounds a guest's tables (their memory is outside the
// linear memory's limit).
const maxTableElements = 1 << 20

func (p *wasmtimeProgram) run(sys *wasi.System, limit, fuel uint64, started func(), grew func(uint64)) outcome {
	hasStart := false
	for _, e := range p.module.Exports() {
		if e.Name() == "_start" && e.Type().FuncType() != nil {
			hasStart = true
		}
	}
	if !hasStart {
		return outcome{invalid: noStart}
	}
	C.gpunet_set_limit(C.size_t(limit))
	store := wasmtime.NewStore(p.engine)
	store.Limiter(-1, maxTableElements, -1, -1, -1)
	if p.fuel {
		if err := store.SetFuel(fuel); err != nil {
			return outcome{invalid: "set fuel: " + firstLine(err.Error())}
		}
	}
	linker := wasmtime.NewLinker(p.engine)
	hostSys = sys
	C.gpunet_set_guest(nil)
	defer func() { hostSys = nil }()
	for i := range wasi.Funcs {
		f := &wasi.Funcs[i]
		params := make([]*wasmtime.ValType, len(f.Params))
		for j, c := range f.Params {
			params[j] = wasmtime.NewValType(wasmtime.KindI32)
			if c == 'I' {
				params[j] = wasmtime.NewValType(wasmtime.KindI64)
			}
		}
		var results []*wasmtime.ValType
		if !f.NoResult {
			results = []*wasmtime.ValType{wasmtime.NewValType(wasmtime.KindI32)}
		}
		ty := wasmtime.NewFuncType(params, results)
		// wasmtime-go's Linker and FuncType hold their C pointers as
		// their first fields.
		if cerr := C.gpunet_define(*(*unsafe.Pointer)(unsafe.Pointer(linker)), wasi.Module, f.Name,
			*(*unsafe.Pointer)(unsafe.Pointer(ty)), C.size_t(i)); cerr != nil {
			C.wasmtime_error_delete(cerr)
			return outcome{invalid: "bind WASI: " + f.Name}
		}
		runtime.KeepAlive(ty)
		runtime.KeepAlive(linker)
	}

	// The guest's peak memory, streamed while it runs (a job killed at its
	// timeout still reports it).
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		var last uint64
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if p := uint64(C.gpunet_peak_bytes()); p > last {
				last = p
				grew(p)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	defer func() {
		close(stop)
		<-watched
	}()

	started()
	inst, err := linker.Instantiate(store, p.module)
	instantiated := err == nil
	if instantiated {
		_, err = inst.GetFunc(store, "_start").Call(store)
	}
	var fuelUsed uint64
	if p.fuel {
		// Fuel spent in a start function counts too. A run that failed
		// with none left ran out of it (wasmtime's error then carries no
		// trap code through wasmtime-go).
		left, ferr := store.GetFuel()
		if ferr == nil && left <= fuel {
			fuelUsed = fuel - left
		}
		if err != nil && ferr == nil && left == 0 {
			if _, exited := sys.ExitCode(); !exited {
				return outcome{outOfFuel: true, fuelUsed: fuelUsed, peak: uint64(C.gpunet_peak_bytes())}
			}
		}
	}
	if !instantiated {
		if _, ok := sys.ExitCode(); !ok {
			var trap *wasmtime.Trap
			if !errors.As(err, &trap) || trap.Code() == nil {
				return outcome{invalid: firstLine(err.Error()), oom: C.gpunet_was_refused() != 0, peak: uint64(C.gpunet_peak_bytes()), fuelUsed: fuelUsed}
			}
			// A start function that trapped: a trap like any other.
		}
	}
	out := outcome{peak: uint64(C.gpunet_peak_bytes()), oom: C.gpunet_was_refused() != 0, fuelUsed: fuelUsed}
	if code, ok := sys.ExitCode(); ok {
		out.exited, out.code = true, int32(code)
		return out
	}
	if err == nil {
		out.exited = true
		return out
	}
	var trap *wasmtime.Trap
	if errors.As(err, &trap) {
		out.trap = trapMessage(trap)
		var frames []string
		for _, f := range trap.Frames() {
			name := fmt.Sprintf("$%d", f.FuncIndex())
			if n := f.FuncName(); n != nil {
				name = *n
			}
			frames = append(frames, fmt.Sprintf("%s() at module offset 0x%x", name, f.ModuleOffset()))
		}
		out.trace = wasmStackTrace(frames)
		return out
	}
	out.trap = firstLine(err.Error())
	return out
}

// trapMessage names a trap as wazero (and the WebAssembly spec tests) do.
func trapMessage(t *wasmtime.Trap) string {
	code := t.Code()
	if code == nil {
		return firstLine(t.Message())
	}
	switch *code {
	case wasmtime.StackOverflow:
		return "stack overflow"
	case wasmtime.MemoryOutOfBounds:
		return "out of bounds memory access"
	case wasmtime.HeapMisaligned:
		return "unaligned atomic"
	case wasmtime.TableOutOfBounds:
		return "invalid table access"
	case wasmtime.IndirectCallToNull:
		return "uninitialized element"
	case wasmtime.BadSignature:
		return "indirect call type mismatch"
	case wasmtime.IntegerOverflow:
		return "integer overflow"
	case wasmtime.IntegerDivisionByZero:
		return "integer divide by zero"
	case wasmtime.BadConversionToInteger:
		return "invalid conversion to integer"
	case wasmtime.UnreachableCodeReached:
		return "unreachable"
	}
	return firstLine(t.Message())
}

// hostSys is the System of the job this process runs (one job per
// process), for wasmtimeHostCall.
var hostSys *wasi.System

// wasmtimeHostCall is WASI function fn of wasi.Funcs, called by the guest
// (through gpunet_wasi and gpunetWasiCall) with its arguments in raw
// 16-byte slots at av, and its memory at mem (nil before a call has
// found it, which caller then does).
func wasmtimeHostCall(fn uintptr, av, mem unsafe.Pointer, memLen uintptr, caller unsafe.Pointer) uint32 {
	f := &wasi.Funcs[fn]
	var a [10]uint64
	raw := unsafe.Slice((*[2]uint64)(av), len(f.Params))
	for j, c := range f.Params {
		a[j] = raw[j][0] // little-endian slots; an i32's upper half is not the guest's
		if c == 'i' {
			a[j] = uint64(uint32(a[j]))
		}
	}
	var m wasi.Memory
	if mem != nil {
		m = unsafe.Slice((*byte)(mem), memLen)
	} else {
		m = findMemory(caller)
	}
	return uint32(hostSys.Call(f, m, a[:len(f.Params)]))
}

// findMemory is the guest's exported memory, through wasmtime-go, and
// remembers it for the next calls when our memory creator made it (its
// base never moves, and its size is ours to read).
func findMemory(caller unsafe.Pointer) wasi.Memory {
	// wasmtime-go's Caller is the C caller pointer alone.
	c := (*wasmtime.Caller)(unsafe.Pointer(&caller))
	ext := c.GetExport("memory")
	if ext == nil || ext.Memory() == nil {
		return nil
	}
	m := wasi.Memory(ext.Memory().UnsafeData(c))
	if len(m) > 0 {
		C.gpunet_set_guest(C.gpunet_mem_at((*C.uint8_t)(unsafe.Pointer(&m[0]))))
	}
	return m
}
