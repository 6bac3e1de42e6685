package ledger

// Hardware classes the ledger knows, with the physical peak of each: the
// vendor's dense int8 tensor throughput (no sparsity). A registration that
// reports more measured throughput for a device (a GPU, or the CPU) than
// that device can physically deliver is rejected. Classes not listed are accepted with a generous generic cap,
// so new hardware can join before this table learns about it.

// hardwareClass describes one GPU class.
type hardwareClass struct {
	PeakGOPS uint64 // dense int8, giga-ops per second, per GPU
	VRAMGiB  uint64 // nominal memory per GPU, 0 = not fixed
}

var gpuClasses = map[string]hardwareClass{
	"H100_80GB":    {1_979_000, 80},
	"H200_141GB":   {1_979_000, 141},
	"A100_80GB":    {624_000, 80},
	"A100_40GB":    {624_000, 40},
	"L40S":         {733_000, 48},
	"L40":          {362_000, 48},
	"L4":           {242_000, 24},
	"A10":          {250_000, 24},
	"A10G":         {280_000, 24},
	"T4":           {130_000, 16},
	"V100_32GB":    {63_000, 32},
	"V100_16GB":    {63_000, 16},
	"RTX_4090":     {661_000, 24},
	"RTX_4080":     {390_000, 16},
	"RTX_3090":     {284_000, 24},
	"RTX_3080":     {238_000, 10},
	"RTX_A6000":    {310_000, 48},
	"RTX_6000_ADA": {729_000, 48},
}

// Generic caps for hardware the table does not list.
const (
	unknownGPUPeakGOPS = 2_500_000 // more than any GPU shipping today
	cpuCorePeakGOPS    = 2_000     // int8 per core, well above AVX-512 VNNI
)

// CPUClass is the hardware class of CPU-only providers and of the CPU
// resources of any provider.
const CPUClass = "cpu"

// gpuPeakGOPS is the physical ceiling of one GPU's int8 throughput: its
// class's dense peak, or the generic cap for a class not listed.
func gpuPeakGOPS(class string) uint64 {
	if c, ok := gpuClasses[class]; ok {
		return c.PeakGOPS
	}
	return unknownGPUPeakGOPS
}

// cpuPeakGOPS is the physical ceiling of a CPU's int8 throughput.
func cpuPeakGOPS(cores uint64) uint64 { return cores * cpuCorePeakGOPS }

// ClassPeakGOPS returns the datasheet's dense int8 peak of one GPU of a
// known hardware class (hardware.go), for reports that compare a measured
// figure with it.
func ClassPeakGOPS(class string) (uint64, bool) {
	c, ok := gpuClasses[class]
	return c.PeakGOPS, ok
}
