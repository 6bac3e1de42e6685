package wasm

import "runtime"

// engines are the engines built into this binary, by name. (A variable's
// initializer, not init functions: the sandbox process starts in this
// package's init, which needs them.)
var engines = func() map[string]engine {
	m := map[string]engine{EngineWazero: wazeroEngine{}}
	if wasmtimeBuiltIn != nil {
		m[EngineWasmtime] = wasmtimeBuiltIn
	}
	return m
}()

// EngineWasmtime is wasmtime (Cranelift) through wasmtime-go, the default
// where it is built in: cgo, on linux and darwin, amd64 and arm64, the
// platforms wasmtime-go ships a static library for (and has a memory
// creator here; its windows library is left out). Its code runs the C
// kernels of `gpunet bench wasm` at about native speed.
const EngineWasmtime = "wasmtime"

// wasmtimeVersion is the wasmtime-go release in go.mod (its major version
// is wasmtime's; TestEngineVersions checks it against the build).
const wasmtimeVersion = "39.0.1"

// wasmtimeSettings are the settings of the engine that change the code it
// generates or what a guest can observe; they are part of the cache's
// engine key and of Engine. Not set, on purpose: fuel and epoch
// interruption (in-guest checks, 1.7–1.9× slower; the executor kills the
// sandbox process instead; only judge programs count fuel, with an engine
// of their own: wasmtimeFuelKey) and NaN canonicalization (as slow; NaN bit
// patterns are then the CPU's, hence the architecture in Engine).
const wasmtimeSettings = "cranelift-speed,relaxed-simd-deterministic,no-threads"

// wasmtimeFuelSetting is added to wasmtimeSettings for a module compiled
// to count fuel (a judge program's, Executor.RunJudge): its code differs,
// so it is a separate engine configuration and cache key.
const wasmtimeFuelSetting = ",fuel"

func wasmtimeKey() string {
	return "wasmtime-" + wasmtimeVersion + "/" + runtime.GOOS + "-" + runtime.GOARCH + "/" + wasmtimeSettings
}

// wasmtimeFuelKey is the cache key of modules compiled to count fuel.
func wasmtimeFuelKey() string { return wasmtimeKey() + wasmtimeFuelSetting }
