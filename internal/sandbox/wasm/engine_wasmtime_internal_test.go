//go:build cgo && (linux || darwin) && (amd64 || arm64)

package wasm

import (
	"reflect"
	"testing"

	"github.com/bytecodealliance/wasmtime-go/v39"
)

// TestWasmtimeGoLayout: the wasmtime engine reads the C pointers of
// wasmtime-go's Config, Linker and FuncType as their first fields, and
// makes a Caller from the C caller pointer alone (engine_wasmtime.go). A
// wasmtime-go upgrade that changes those structs must fail here, not
// crash a sandbox process.
func TestWasmtimeGoLayout(t *testing.T) {
	for _, tc := range []struct {
		v      any
		fields int // at least
		first  string
	}{
		{wasmtime.Config{}, 1, "_ptr"},
		{wasmtime.Linker{}, 1, "_ptr"},
		{wasmtime.FuncType{}, 1, "_ptr"},
		{wasmtime.Caller{}, 1, "ptr"},
	} {
		ty := reflect.TypeOf(tc.v)
		if ty.NumField() < tc.fields {
			t.Errorf("%s has %d fields", ty, ty.NumField())
			continue
		}
		f := ty.Field(0)
		if f.Name != tc.first || f.Type.Kind() != reflect.Pointer || f.Offset != 0 {
			t.Errorf("%s's first field is %s %s, want %s, a C pointer", ty, f.Name, f.Type, tc.first)
		}
	}
	if n := reflect.TypeOf(wasmtime.Caller{}).NumField(); n != 1 {
		t.Errorf("wasmtime.Caller has %d fields, want the C pointer alone", n)
	}
}
