//go:build !(cgo && (linux || darwin) && (amd64 || arm64))

package wasm

// wasmtimeBuiltIn is nil: this build has no wasmtime (no cgo, or a
// platform without the memory creator engine_wasmtime.go needs).
var wasmtimeBuiltIn engine
