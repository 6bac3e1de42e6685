//go:build cgo && (linux || darwin) && (amd64 || arm64)

package wasm

// The Go end of the WASI host calls on wasmtime (gpunet_wasi in
// engine_wasmtime.go calls it). A file of its own: cgo allows only
// declarations in the preamble of a file that exports.

/*
#include <stddef.h>
#include <stdint.h>
*/
import "C"

import "unsafe"

//export gpunetWasiCall
func gpunetWasiCall(fn C.size_t, av, mem unsafe.Pointer, memLen C.size_t, caller unsafe.Pointer) C.uint32_t {
	return C.uint32_t(wasmtimeHostCall(uintptr(fn), av, mem, uintptr(memLen), caller))
}
