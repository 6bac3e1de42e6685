// Package gpubench is the GPU benchmark (`gpunet bench gpu`): it measures
// every NVIDIA GPU of this machine as a provider's agent does (gpu.Report:
// each int8 GEMM kernel checked against the CPU, then timed, then a
// hardware challenge sized for the fastest kernel's figure proved on the
// device and verified as validators do) and sets each figure against its
// class's datasheet peak.
package gpubench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gpunet/gpunet/internal/bench/measure"
	"github.com/gpunet/gpunet/internal/gpu"
	"github.com/gpunet/gpunet/internal/hwinfo"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Defaults of Options.
const (
	DefaultBudget    = 10 * time.Second
	DefaultOverclaim = 3
)

// Options tune a run.
type Options struct {
	// Budget is the benchmark time per GPU.
	Budget time.Duration
	// Overclaim, if not 0, also proves a challenge sized for this many
	// times the measured figure, which an honest GPU misses.
	Overclaim float64
	// Progress, if set, receives a line as each GPU's measurement starts.
	Progress io.Writer
}

// Result is what each GPU gave.
type Result struct {
	Date    time.Time           `json:"date"`
	Devices []*gpu.DeviceReport `json:"devices"`
	// PeakTOPS is each device's datasheet dense int8 peak, 0 if its class
	// is not in the ledger's table.
	PeakTOPS []float64 `json:"peak_tops"`
}

// Run measures every GPU the driver reports; without a driver or a GPU the
// error says why.
func Run(ctx context.Context, o Options) (*Result, error) {
	devs, err := gpu.Open()
	if len(devs) == 0 {
		if err == nil {
			err = errors.New("the driver reports no GPU")
		}
		return nil, fmt.Errorf("no GPU to measure: %w", err)
	}
	progress := measure.Progress(o.Progress)
	res := &Result{Date: time.Now().UTC()}
	for _, d := range devs {
		defer d.Close()
		progress("measuring %s …", d.Describe())
		r, err := gpu.Report(ctx, d, gpu.ReportOptions{Budget: o.Budget, OverclaimFactor: o.Overclaim})
		if err != nil {
			return nil, err
		}
		info := d.Device()
		peak, _ := ledger.ClassPeakGOPS(hwinfo.ClassOf(info.Name, info.MemoryBytes))
		res.Devices = append(res.Devices, r)
		res.PeakTOPS = append(res.PeakTOPS, float64(peak)/1000)
	}
	return res, nil
}

// WriteText prints the result as `gpunet bench gpu` does.
func (r *Result) WriteText(w io.Writer) error {
	p := measure.NewReport(w)
	p.Printf("gpunet bench gpu  %s\n", r.Date.Format(time.RFC3339))
	for i, d := range r.Devices {
		p.Printf("\n%s\n", d.Device)
		p.Printf("memory bandwidth %.0f GB/s (device-to-device copy)\n", d.Figures.MemBandwidthGBs)
		tw := p.Table()
		fmt.Fprintln(tw, "kernel\tint8 TOPS\tof dense peak\tbest shape\t")
		for _, k := range d.Figures.Kernels {
			if k.Error != "" {
				fmt.Fprintf(tw, "%s\tfailed: %s\t\t\t\n", k.Kernel, k.Error)
				continue
			}
			share := "?"
			if peak := r.PeakTOPS[i]; peak > 0 {
				share = fmt.Sprintf("%.1f%% of %.0f", 100*k.Int8TOPS/peak, peak)
			}
			fmt.Fprintf(tw, "%s\t%.1f\t%s\t%s\t\n", k.Kernel, k.Int8TOPS, share, k.Shape)
		}
		tw.Flush()
		p.Printf("declared figure: %.1f TOPS (%s)\n", d.Figures.Int8TOPS, d.Figures.Kernel)
		if d.Honest != nil {
			p.Printf("challenge at the figure:  %s\n", d.Honest)
		}
		if d.Overclaim != nil {
			p.Printf("challenge at an overclaim: %s\n", d.Overclaim)
		}
	}
	return p.Err()
}
