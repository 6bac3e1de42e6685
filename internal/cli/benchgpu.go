package cli

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/gpu"
	"github.com/gpunet/gpunet/internal/hwinfo"
	"github.com/gpunet/gpunet/internal/ledger"
)

type gpuBenchResult struct {
	Date    time.Time           `json:"date"`
	Devices []*gpu.DeviceReport `json:"devices"`
	// PeakTOPS is each device's datasheet dense int8 peak, 0 if its class
	// is not in the ledger's table.
	PeakTOPS []float64 `json:"peak_tops"`
}

func benchGPUCmd(e *env) *cobra.Command {
	var (
		budget    time.Duration
		overclaim float64
	)
	c := &cobra.Command{
		Use:   "gpu",
		Short: "Measure each NVIDIA GPU's int8 kernels and prove a hardware challenge on it",
		Long: `Measure every NVIDIA GPU of this machine as a provider's agent does, then
prove hardware challenges on it.

For each GPU: each int8 GEMM kernel it runs (dp4a; mma.sync tensor-core
kernels from compute capability 8.0) is checked against the CPU on a small
product, then timed; the table shows TOPS against the datasheet's dense int8
peak. Then a challenge sized for the fastest kernel's figure is proved on
the GPU as the agent would (AES expansion, GEMM and Merkle hashing on the
device), opened and verified as validators do, with its time, the deadline,
and the device time challenges take an hour at the ledger's maximum rate.
With --overclaim F, a challenge sized for F times the figure shows that an
overclaiming GPU misses its deadline.

Needs the NVIDIA driver (libcuda.so.1), no CUDA toolkit.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if budget <= 0 {
				return usageError{fmt.Errorf("--budget %v: must be positive", budget)}
			}
			devs, err := gpu.Open()
			if len(devs) == 0 {
				if err == nil {
					err = errors.New("the driver reports no GPU")
				}
				return fmt.Errorf("no GPU to measure: %w", err)
			}
			res := &gpuBenchResult{Date: time.Now().UTC()}
			for _, d := range devs {
				defer d.Close()
				if e.output != "json" {
					fmt.Fprintf(e.stderr, "measuring %s …\n", d.Describe())
				}
				r, err := gpu.Report(cmd.Context(), d, gpu.ReportOptions{Budget: budget, OverclaimFactor: overclaim})
				if err != nil {
					return err
				}
				info := d.Device()
				peak, _ := ledger.ClassPeakGOPS(hwinfo.ClassOf(info.Name, info.MemoryBytes))
				res.Devices = append(res.Devices, r)
				res.PeakTOPS = append(res.PeakTOPS, float64(peak)/1000)
			}
			return e.print(res, func(w io.Writer) { printGPUBench(w, res) })
		},
	}
	f := c.Flags()
	f.DurationVar(&budget, "budget", 10*time.Second, "benchmark time per GPU")
	f.Float64Var(&overclaim, "overclaim", 3, "also prove a challenge sized for this many times the measured figure (0: skip)")
	return c
}

func printGPUBench(w io.Writer, r *gpuBenchResult) {
	fmt.Fprintf(w, "gpunet bench gpu  %s\n", r.Date.Format(time.RFC3339))
	for i, d := range r.Devices {
		fmt.Fprintf(w, "\n%s\n", d.Device)
		fmt.Fprintf(w, "memory bandwidth %.0f GB/s (device-to-device copy)\n", d.Figures.MemBandwidthGBs)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "kernel\tint8 TOPS\tof dense peak\tbest shape\t")
		for _, k := range d.Figures.Kernels {
			if k.Error != "" {
				fmt.Fprintf(tw, "%s\tfailed: %s\t\t\t\n", k.Kernel, k.Error)
				continue
			}
			share := "?"
			if p := r.PeakTOPS[i]; p > 0 {
				share = fmt.Sprintf("%.1f%% of %.0f", 100*k.Int8TOPS/p, p)
			}
			fmt.Fprintf(tw, "%s\t%.1f\t%s\t%s\t\n", k.Kernel, k.Int8TOPS, share, k.Shape)
		}
		tw.Flush()
		fmt.Fprintf(w, "declared figure: %.1f TOPS (%s)\n", d.Figures.Int8TOPS, d.Figures.Kernel)
		if d.Honest != nil {
			fmt.Fprintf(w, "challenge at the figure:  %s\n", d.Honest)
		}
		if d.Overclaim != nil {
			fmt.Fprintf(w, "challenge at an overclaim: %s\n", d.Overclaim)
		}
	}
}
