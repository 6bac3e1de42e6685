// Package kernels holds gpunet's CUDA kernels as PTX (generated from
// kernels.cu by gen.sh and committed), and checks a module's entry points
// against what the launcher passes.
package kernels

import (
	_ "embed"
	"fmt"
	"regexp"
	"strings"
)

//go:embed kernels_sm_61.ptx
var ptxSM61 []byte

//go:embed kernels_sm_80.ptx
var ptxSM80 []byte

// Source is kernels.cu, for the record.
//
//go:embed kernels.cu
var Source string

// Module is one committed PTX module.
type Module struct {
	Target string // "sm_61" or "sm_80": the lowest compute capability it runs on
	PTX    []byte
}

// For returns the module for a GPU of compute capability major.minor: the
// tensor-core build from 8.0, the dp4a build from 6.1; false below.
func For(major, minor int) (Module, bool) {
	switch {
	case major >= 8:
		return Module{"sm_80", ptxSM80}, true
	case major > 6 || major == 6 && minor >= 1:
		return Module{"sm_61", ptxSM61}, true
	}
	return Module{}, false
}

// All returns every committed module.
func All() []Module { return []Module{{"sm_61", ptxSM61}, {"sm_80", ptxSM80}} }

// Param types as the launcher passes them.
const (
	Ptr = "u64" // a device address
	U64 = "u64"
	U32 = "u32"
)

// Signatures are the kernels and their parameter types, in order, as the
// launcher (package gpu) calls them. The GEMM kernels share one.
var Signatures = map[string][]string{
	"aes256_ctr":          {Ptr, Ptr, U64, U64},
	"hash_leaves":         {Ptr, Ptr, U64},
	"hash_nodes":          {Ptr, Ptr, U64},
	"gemm_dp4a":           {Ptr, Ptr, Ptr, U32, U32, U32, U32},
	"gemm_mma_128x128":    {Ptr, Ptr, Ptr, U32, U32, U32, U32},
	"gemm_mma_128x128_s4": {Ptr, Ptr, Ptr, U32, U32, U32, U32},
	"gemm_mma_128x256":    {Ptr, Ptr, Ptr, U32, U32, U32, U32},
	"gemm_mma_256x128":    {Ptr, Ptr, Ptr, U32, U32, U32, U32},
}

// TensorCoreKernels are in the sm_80 module only.
var TensorCoreKernels = []string{"gemm_mma_128x128", "gemm_mma_128x128_s4", "gemm_mma_128x256", "gemm_mma_256x128"}

// GEMMTile is a GEMM kernel's tile of C (rows × columns per block of 256
// threads) and the dynamic shared memory it needs.
type GEMMTile struct {
	Rows, Cols   uint32
	SharedMemory uint32
}

// GEMMKernels are the GEMM kernels with their tiles, the launcher's order
// of preference before the benchmark measures them.
var GEMMKernels = []struct {
	Name string
	GEMMTile
}{
	{"gemm_mma_128x256", GEMMTile{128, 256, 3 * (128 + 256) * 80}},
	{"gemm_mma_256x128", GEMMTile{256, 128, 3 * (256 + 128) * 80}},
	{"gemm_mma_128x128_s4", GEMMTile{128, 128, 4 * (128 + 128) * 80}},
	{"gemm_mma_128x128", GEMMTile{128, 128, 3 * (128 + 128) * 80}},
	{"gemm_dp4a", GEMMTile{128, 128, 0}},
}

var (
	headerRE = regexp.MustCompile(`(?m)^\.version (\d+)\.(\d+)\s*\n\.target (sm_\d+)`)
	entryRE  = regexp.MustCompile(`\.visible \.entry (\w+)\(([^)]*)\)`)
	paramRE  = regexp.MustCompile(`\.param \.(\w+) (\w+)`)
)

// Entries parses a PTX module's target and its entry points' parameter
// types.
func Entries(ptx []byte) (target string, entries map[string][]string, err error) {
	h := headerRE.FindSubmatch(ptx)
	if h == nil {
		return "", nil, fmt.Errorf("PTX: no .version and .target header")
	}
	target = string(h[3])
	entries = map[string][]string{}
	for _, m := range entryRE.FindAllSubmatch(ptx, -1) {
		var types []string
		for _, p := range paramRE.FindAllSubmatch(m[2], -1) {
			types = append(types, string(p[1]))
		}
		entries[string(m[1])] = types
	}
	return target, entries, nil
}

// Check verifies that m declares its target and every kernel the launcher
// calls on it, with the parameter types it passes.
func (m Module) Check() error {
	target, entries, err := Entries(m.PTX)
	if err != nil {
		return err
	}
	if target != m.Target {
		return fmt.Errorf("PTX module for %s declares .target %s", m.Target, target)
	}
	for name, want := range Signatures {
		tc := false
		for _, k := range TensorCoreKernels {
			tc = tc || k == name
		}
		got, ok := entries[name]
		switch {
		case !ok && tc && m.Target == "sm_61":
			continue
		case !ok:
			return fmt.Errorf("PTX module %s has no kernel %s", m.Target, name)
		case strings.Join(got, ",") != strings.Join(want, ","):
			return fmt.Errorf("PTX module %s: kernel %s takes (%s), the launcher passes (%s)", m.Target, name, strings.Join(got, ", "), strings.Join(want, ", "))
		}
	}
	return nil
}
