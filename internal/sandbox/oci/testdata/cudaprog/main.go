// Command cudaprog is the program of the oci executor's real-GPU test: it
// loads the CUDA driver by name, dlopen("libcuda.so.1"), as CUDA programs
// do, counts the GPUs it sees, JIT-compiles a PTX kernel (the driver's
// libnvidia-ptxjitcompiler) and runs it. Built without cgo, it still needs
// glibc's dynamic linker in the image: purego loads libraries through it.
package main

import (
	"fmt"
	"os"
	"unsafe"

	"github.com/ebitengine/purego"
)

const ptx = `.version 7.0
.target sm_50
.address_size 64
.visible .entry store42(.param .u64 out) {
	.reg .u64 %rd<2>;
	.reg .u32 %r<2>;
	ld.param.u64 %rd1, [out];
	cvta.to.global.u64 %rd1, %rd1;
	mov.u32 %r1, 42;
	st.global.u32 [%rd1], %r1;
	ret;
}
`

func main() {
	lib, err := purego.Dlopen("libcuda.so.1", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		fmt.Println("cuda: dlopen libcuda.so.1:", err)
		os.Exit(1)
	}
	var (
		cuInit           func(uint32) int32
		cuDeviceGetCount func(*int32) int32
		cuDeviceGet      func(*int32, int32) int32
		cuCtxCreate      func(*uintptr, uint32, int32) int32
		cuModuleLoadData func(*uintptr, unsafe.Pointer) int32
		cuModuleGetFunc  func(*uintptr, uintptr, string) int32
		cuMemAlloc       func(*uint64, uint64) int32
		cuLaunchKernel   func(uintptr, uint32, uint32, uint32, uint32, uint32, uint32, uint32, uintptr, unsafe.Pointer, unsafe.Pointer) int32
		cuCtxSynchronize func() int32
		cuMemcpyDtoH     func(unsafe.Pointer, uint64, uint64) int32
	)
	purego.RegisterLibFunc(&cuInit, lib, "cuInit")
	purego.RegisterLibFunc(&cuDeviceGetCount, lib, "cuDeviceGetCount")
	purego.RegisterLibFunc(&cuDeviceGet, lib, "cuDeviceGet")
	purego.RegisterLibFunc(&cuCtxCreate, lib, "cuCtxCreate_v2")
	purego.RegisterLibFunc(&cuModuleLoadData, lib, "cuModuleLoadData")
	purego.RegisterLibFunc(&cuModuleGetFunc, lib, "cuModuleGetFunction")
	purego.RegisterLibFunc(&cuMemAlloc, lib, "cuMemAlloc_v2")
	purego.RegisterLibFunc(&cuLaunchKernel, lib, "cuLaunchKernel")
	purego.RegisterLibFunc(&cuCtxSynchronize, lib, "cuCtxSynchronize")
	purego.RegisterLibFunc(&cuMemcpyDtoH, lib, "cuMemcpyDtoH_v2")
	check := func(what string, r int32) {
		if r != 0 {
			fmt.Printf("cuda: %s: error %d\n", what, r)
			os.Exit(1)
		}
	}
	check("cuInit", cuInit(0))
	var n, dev int32
	check("cuDeviceGetCount", cuDeviceGetCount(&n))
	fmt.Printf("cuda: %d devices\n", n)
	check("cuDeviceGet", cuDeviceGet(&dev, 0))
	var ctx, mod, fn uintptr
	check("cuCtxCreate", cuCtxCreate(&ctx, 0, dev))
	src := append([]byte(ptx), 0)
	check("cuModuleLoadData (PTX JIT)", cuModuleLoadData(&mod, unsafe.Pointer(&src[0])))
	check("cuModuleGetFunction", cuModuleGetFunc(&fn, mod, "store42"))
	var out uint64
	check("cuMemAlloc", cuMemAlloc(&out, 4))
	params := []unsafe.Pointer{unsafe.Pointer(&out)}
	check("cuLaunchKernel", cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, 0, unsafe.Pointer(&params[0]), nil))
	check("cuCtxSynchronize", cuCtxSynchronize())
	var v uint32
	check("cuMemcpyDtoH", cuMemcpyDtoH(unsafe.Pointer(&v), out, 4))
	fmt.Printf("cuda: PTX kernel ran, wrote %d\n", v)
}
