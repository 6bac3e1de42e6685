// Package cuda is a minimal binding of the NVIDIA CUDA driver API
// (libcuda.so.1), loaded at run time with purego: gpunet builds without
// the CUDA toolkit and without cgo for this part, and runs on a machine
// without a driver (Load then says why there is no GPU).
//
// It covers what gpunet's kernels need: devices and their identity,
// primary contexts, loading PTX (which the driver compiles for the GPU at
// hand), device memory, copies and kernel launches. CUDA binds a context to
// the calling OS thread, so each Device runs every driver call on one
// goroutine locked to its own thread (Device.Do).
package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// ErrNoDriver is wrapped by Load's error when the driver library is
// missing or unusable.
var ErrNoDriver = errors.New("no NVIDIA CUDA driver")

// Error is a failed driver call.
type Error struct {
	Call string
	Code int32
	Name string // e.g. CUDA_ERROR_INVALID_PTX
	Text string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (%d): %s", e.Call, e.Name, e.Code, e.Text)
}

// driver holds the library's entry points.
type driver struct {
	cuInit                    func(flags uint32) int32
	cuDriverGetVersion        func(v *int32) int32
	cuDeviceGetCount          func(n *int32) int32
	cuDeviceGet               func(d *int32, ordinal int32) int32
	cuDeviceGetName           func(name *byte, n int32, d int32) int32
	cuDeviceGetUuid           func(uuid *[16]byte, d int32) int32
	cuDeviceGetAttribute      func(v *int32, attr int32, d int32) int32
	cuDeviceTotalMem          func(b *uint64, d int32) int32
	cuDevicePrimaryCtxRetain  func(ctx *uintptr, d int32) int32
	cuDevicePrimaryCtxRelease func(d int32) int32
	cuCtxSetCurrent           func(ctx uintptr) int32
	cuCtxSynchronize          func() int32
	cuMemGetInfo              func(free, total *uint64) int32
	cuModuleLoadDataEx        func(mod *uintptr, image *byte, n uint32, opts *int32, vals *uintptr) int32
	cuModuleUnload            func(mod uintptr) int32
	cuModuleGetFunction       func(fn *uintptr, mod uintptr, name *byte) int32
	cuFuncSetAttribute        func(fn uintptr, attr int32, v int32) int32
	cuMemAlloc                func(p *uint64, n uint64) int32
	cuMemFree                 func(p uint64) int32
	cuMemcpyHtoD              func(dst uint64, src unsafe.Pointer, n uint64) int32
	cuMemcpyDtoH              func(dst unsafe.Pointer, src uint64, n uint64) int32
	cuMemcpyDtoD              func(dst, src uint64, n uint64) int32
	cuMemsetD8                func(dst uint64, v uint8, n uint64) int32
	cuLaunchKernel            func(fn uintptr, gx, gy, gz, bx, by, bz, shmem uint32, stream uintptr, params *unsafe.Pointer, extra *unsafe.Pointer) int32
	cuGetErrorName            func(code int32, s **byte) int32
	cuGetErrorString          func(code int32, s **byte) int32
}

var (
	loadOnce sync.Once
	loaded   *driver
	loadErr  error
)

// Library names tried, in order.
var libraryNames = []string{"libcuda.so.1", "libcuda.so"}

// Load opens the driver library and initialises it, once per process.
func Load() (*Driver, error) {
	loadOnce.Do(func() { loaded, loadErr = load() })
	if loadErr != nil {
		return nil, loadErr
	}
	return &Driver{d: loaded}, nil
}

func load() (*driver, error) {
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("%w: CUDA is supported on Linux only", ErrNoDriver)
	}
	var lib uintptr
	var errs []error
	for _, n := range libraryNames {
		h, err := purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			lib = h
			break
		}
		errs = append(errs, err)
	}
	if lib == 0 {
		return nil, fmt.Errorf("%w: libcuda.so.1 not found (%v)", ErrNoDriver, errors.Join(errs...))
	}
	d := &driver{}
	syms := []struct {
		fn   any
		name string
	}{
		{&d.cuInit, "cuInit"},
		{&d.cuDriverGetVersion, "cuDriverGetVersion"},
		{&d.cuDeviceGetCount, "cuDeviceGetCount"},
		{&d.cuDeviceGet, "cuDeviceGet"},
		{&d.cuDeviceGetName, "cuDeviceGetName"},
		{&d.cuDeviceGetUuid, "cuDeviceGetUuid"},
		{&d.cuDeviceGetAttribute, "cuDeviceGetAttribute"},
		{&d.cuDeviceTotalMem, "cuDeviceTotalMem_v2"},
		{&d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
		{&d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"},
		{&d.cuCtxSetCurrent, "cuCtxSetCurrent"},
		{&d.cuCtxSynchronize, "cuCtxSynchronize"},
		{&d.cuMemGetInfo, "cuMemGetInfo_v2"},
		{&d.cuModuleLoadDataEx, "cuModuleLoadDataEx"},
		{&d.cuModuleUnload, "cuModuleUnload"},
		{&d.cuModuleGetFunction, "cuModuleGetFunction"},
		{&d.cuFuncSetAttribute, "cuFuncSetAttribute"},
		{&d.cuMemAlloc, "cuMemAlloc_v2"},
		{&d.cuMemFree, "cuMemFree_v2"},
		{&d.cuMemcpyHtoD, "cuMemcpyHtoD_v2"},
		{&d.cuMemcpyDtoH, "cuMemcpyDtoH_v2"},
		{&d.cuMemcpyDtoD, "cuMemcpyDtoD_v2"},
		{&d.cuMemsetD8, "cuMemsetD8_v2"},
		{&d.cuLaunchKernel, "cuLaunchKernel"},
		{&d.cuGetErrorName, "cuGetErrorName"},
		{&d.cuGetErrorString, "cuGetErrorString"},
	}
	for _, s := range syms {
		if _, err := purego.Dlsym(lib, s.name); err != nil {
			return nil, fmt.Errorf("%w: libcuda.so.1 lacks %s (driver too old?)", ErrNoDriver, s.name)
		}
		purego.RegisterLibFunc(s.fn, lib, s.name)
	}
	if err := d.check("cuInit", d.cuInit(0)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoDriver, err)
	}
	return d, nil
}

func (d *driver) check(call string, code int32) error {
	if code == 0 {
		return nil
	}
	e := &Error{Call: call, Code: code, Name: "CUDA_ERROR", Text: "unknown error"}
	var s *byte
	if d.cuGetErrorName(code, &s) == 0 && s != nil {
		e.Name = cString(s)
	}
	if d.cuGetErrorString(code, &s) == 0 && s != nil {
		e.Text = cString(s)
	}
	return e
}

func cString(p *byte) string {
	var b []byte
	for ptr := unsafe.Pointer(p); *(*byte)(ptr) != 0; ptr = unsafe.Add(ptr, 1) {
		b = append(b, *(*byte)(ptr))
	}
	return string(b)
}

// Driver is the loaded driver.
type Driver struct{ d *driver }

// Version returns the CUDA version the driver supports, e.g. "13.0".
func (dr *Driver) Version() (string, error) {
	var v int32
	if err := dr.d.check("cuDriverGetVersion", dr.d.cuDriverGetVersion(&v)); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10), nil
}

// Count returns the number of CUDA devices.
func (dr *Driver) Count() (int, error) {
	var n int32
	if err := dr.d.check("cuDeviceGetCount", dr.d.cuDeviceGetCount(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// Device attributes (CUdevice_attribute).
const (
	attrMaxSharedPerBlock      = 8
	attrClockRateKHz           = 13
	attrMultiprocessors        = 16
	attrMemoryClockRateKHz     = 36
	attrMemoryBusWidth         = 37
	attrComputeCapabilityMajor = 75
	attrComputeCapabilityMinor = 76
	attrMaxSharedPerBlockOptin = 97
)

// Info describes a device.
type Info struct {
	Ordinal int
	Name    string
	// UUID in NVML's form, "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
	UUID                string
	Major, Minor        int // compute capability
	Multiprocessors     int
	ClockKHz            int
	MemoryBytes         uint64
	MaxSharedOptinBytes int
}

// CC returns the compute capability as "9.0".
func (i Info) CC() string { return fmt.Sprintf("%d.%d", i.Major, i.Minor) }

// Info describes device ordinal.
func (dr *Driver) Info(ordinal int) (Info, error) {
	d := dr.d
	var dev int32
	if err := d.check("cuDeviceGet", d.cuDeviceGet(&dev, int32(ordinal))); err != nil {
		return Info{}, err
	}
	info := Info{Ordinal: ordinal}
	name := make([]byte, 256)
	if err := d.check("cuDeviceGetName", d.cuDeviceGetName(&name[0], int32(len(name)), dev)); err != nil {
		return Info{}, err
	}
	info.Name = cString(&name[0])
	var u [16]byte
	if err := d.check("cuDeviceGetUuid", d.cuDeviceGetUuid(&u, dev)); err != nil {
		return Info{}, err
	}
	info.UUID = FormatUUID(u)
	for _, a := range []struct {
		attr int32
		v    *int
	}{
		{attrComputeCapabilityMajor, &info.Major}, {attrComputeCapabilityMinor, &info.Minor},
		{attrMultiprocessors, &info.Multiprocessors}, {attrClockRateKHz, &info.ClockKHz},
		{attrMaxSharedPerBlockOptin, &info.MaxSharedOptinBytes},
	} {
		var v int32
		if err := d.check("cuDeviceGetAttribute", d.cuDeviceGetAttribute(&v, a.attr, dev)); err != nil {
			return Info{}, err
		}
		*a.v = int(v)
	}
	if err := d.check("cuDeviceTotalMem", d.cuDeviceTotalMem(&info.MemoryBytes, dev)); err != nil {
		return Info{}, err
	}
	return info, nil
}

// FormatUUID formats a device UUID as NVML does.
func FormatUUID(u [16]byte) string {
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// Device is an open device: its primary context, current on one locked
// thread that runs every call.
type Device struct {
	Info
	d    *driver
	dev  int32
	ctx  uintptr
	work chan func()
	done chan struct{}
	once sync.Once
}

// Open retains device ordinal's primary context and starts its thread.
func (dr *Driver) Open(ordinal int) (*Device, error) {
	info, err := dr.Info(ordinal)
	if err != nil {
		return nil, err
	}
	dv := &Device{Info: info, d: dr.d, work: make(chan func()), done: make(chan struct{})}
	started := make(chan error, 1)
	go dv.loop(started)
	if err := <-started; err != nil {
		return nil, err
	}
	return dv, nil
}

func (dv *Device) loop(started chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	d := dv.d
	err := d.check("cuDeviceGet", d.cuDeviceGet(&dv.dev, int32(dv.Ordinal)))
	if err == nil {
		err = d.check("cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain(&dv.ctx, dv.dev))
	}
	if err == nil {
		err = d.check("cuCtxSetCurrent", d.cuCtxSetCurrent(dv.ctx))
	}
	started <- err
	if err != nil {
		return
	}
	for {
		select {
		case f := <-dv.work:
			f()
		case <-dv.done:
			d.cuCtxSynchronize()
			d.cuDevicePrimaryCtxRelease(dv.dev)
			return
		}
	}
}

// ErrClosed is returned by calls on a closed Device.
var ErrClosed = errors.New("cuda: device closed")

// Do runs f on the device's thread, with its context current.
func (dv *Device) Do(f func() error) error {
	var err error
	ran := make(chan struct{})
	select {
	case dv.work <- func() { err = f(); close(ran) }:
	case <-dv.done:
		return ErrClosed
	}
	<-ran
	return err
}

// Close releases the context. Memory and modules it held are gone.
func (dv *Device) Close() {
	dv.once.Do(func() { close(dv.done) })
}

// The calls below must run inside Do.

// MemInfo returns free and total device memory.
func (dv *Device) MemInfo() (free, total uint64, err error) {
	err = dv.d.check("cuMemGetInfo", dv.d.cuMemGetInfo(&free, &total))
	return free, total, err
}

// Synchronize waits for all work on the device.
func (dv *Device) Synchronize() error {
	return dv.d.check("cuCtxSynchronize", dv.d.cuCtxSynchronize())
}

// Ptr is a device address.
type Ptr uint64

// Alloc allocates n bytes of device memory.
func (dv *Device) Alloc(n uint64) (Ptr, error) {
	var p uint64
	if err := dv.d.check(fmt.Sprintf("cuMemAlloc(%d bytes)", n), dv.d.cuMemAlloc(&p, n)); err != nil {
		return 0, err
	}
	return Ptr(p), nil
}

// Free frees an allocation.
func (dv *Device) Free(p Ptr) error { return dv.d.check("cuMemFree", dv.d.cuMemFree(uint64(p))) }

// CopyIn copies src to device address dst.
func (dv *Device) CopyIn(dst Ptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	err := dv.d.check("cuMemcpyHtoD", dv.d.cuMemcpyHtoD(uint64(dst), unsafe.Pointer(&src[0]), uint64(len(src))))
	runtime.KeepAlive(src)
	return err
}

// CopyOut copies len(dst) bytes from device address src.
func (dv *Device) CopyOut(dst []byte, src Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	err := dv.d.check("cuMemcpyDtoH", dv.d.cuMemcpyDtoH(unsafe.Pointer(&dst[0]), uint64(src), uint64(len(dst))))
	runtime.KeepAlive(dst)
	return err
}

// CopyDevice copies n bytes between device addresses.
func (dv *Device) CopyDevice(dst, src Ptr, n uint64) error {
	return dv.d.check("cuMemcpyDtoD", dv.d.cuMemcpyDtoD(uint64(dst), uint64(src), n))
}

// Memset sets n bytes at p to v.
func (dv *Device) Memset(p Ptr, v byte, n uint64) error {
	return dv.d.check("cuMemsetD8", dv.d.cuMemsetD8(uint64(p), v, n))
}

// Module is a loaded module.
type Module struct {
	dv  *Device
	mod uintptr
}

// JIT options (CUjit_option).
const (
	jitErrorLogBuffer          = 5
	jitErrorLogBufferSizeBytes = 6
)

// LoadPTX loads a PTX module, which the driver compiles for this device.
// A compilation error carries the driver's log.
func (dv *Device) LoadPTX(ptx []byte) (*Module, error) {
	img := make([]byte, len(ptx)+1) // NUL-terminated
	copy(img, ptx)
	logBuf := make([]byte, 8192)
	opts := []int32{jitErrorLogBuffer, jitErrorLogBufferSizeBytes}
	vals := []uintptr{uintptr(unsafe.Pointer(&logBuf[0])), uintptr(len(logBuf))}
	var mod uintptr
	code := dv.d.cuModuleLoadDataEx(&mod, &img[0], uint32(len(opts)), &opts[0], &vals[0])
	runtime.KeepAlive(img)
	runtime.KeepAlive(logBuf)
	if err := dv.d.check("cuModuleLoadDataEx", code); err != nil {
		if l := cString(&logBuf[0]); l != "" {
			return nil, fmt.Errorf("%w\n%s", err, l)
		}
		return nil, err
	}
	return &Module{dv: dv, mod: mod}, nil
}

// Unload unloads the module.
func (m *Module) Unload() error { return m.dv.d.check("cuModuleUnload", m.dv.d.cuModuleUnload(m.mod)) }

// Function is a kernel.
type Function struct {
	Name string
	dv   *Device
	fn   uintptr
}

// Function looks up a kernel by name.
func (m *Module) Function(name string) (*Function, error) {
	b := append([]byte(name), 0)
	var fn uintptr
	if err := m.dv.d.check("cuModuleGetFunction("+name+")", m.dv.d.cuModuleGetFunction(&fn, m.mod, &b[0])); err != nil {
		return nil, err
	}
	return &Function{Name: name, dv: m.dv, fn: fn}, nil
}

const funcAttrMaxDynamicShared = 8 // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES

// SetMaxDynamicShared lets the kernel use up to n bytes of dynamic shared
// memory (needed above 48 KiB).
func (f *Function) SetMaxDynamicShared(n int) error {
	return f.dv.d.check("cuFuncSetAttribute("+f.Name+")", f.dv.d.cuFuncSetAttribute(f.fn, funcAttrMaxDynamicShared, int32(n)))
}

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z uint32 }

// Launch launches f on the default stream. Each argument is a Ptr, a
// uint64 or a uint32, and must match the kernel's parameter of the same
// position in type and size.
func (f *Function) Launch(grid, block Dim3, shared uint32, args ...any) error {
	vals := make([]uint64, len(args))
	params := make([]unsafe.Pointer, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case Ptr:
			vals[i] = uint64(v)
		case uint64:
			vals[i] = v
		case uint32:
			vals[i] = uint64(v) // little-endian: the kernel reads the low 4 bytes
		default:
			return fmt.Errorf("launch %s: argument %d has type %T, want cuda.Ptr, uint64 or uint32", f.Name, i, a)
		}
		params[i] = unsafe.Pointer(&vals[i])
	}
	var pp *unsafe.Pointer
	if len(params) > 0 {
		pp = &params[0]
	}
	one := func(v uint32) uint32 { return max(v, 1) }
	code := f.dv.d.cuLaunchKernel(f.fn, one(grid.X), one(grid.Y), one(grid.Z), one(block.X), one(block.Y), one(block.Z), shared, 0, pp, nil)
	runtime.KeepAlive(vals)
	runtime.KeepAlive(params)
	return f.dv.d.check("cuLaunchKernel("+f.Name+")", code)
}
