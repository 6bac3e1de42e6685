// gpugemm is the GPU example job: an exact int8 matrix product C = A·B on
// the GPU it is given, the matrices expanded from a seed and the result
// committed by its Merkle root (the hardware challenges' construction,
// package challenge). The result is one line, the same on every GPU and on
// the CPU, so the consumer can check it and Proof of Sync can compare
// replicas:
//
//	gpugemm -out /out 4096 4096 4096 SEED      on the job's GPU (CUDA driver, no toolkit)
//	gpugemm -cpu 4096 4096 4096 SEED           the same line from the CPU, to check
//
// SEED is any text; N, K, M are multiples of 64 (K ≤ 65536, M ≤ 16384).
// It runs in a container that CDI gives the driver's libraries; the image
// is built from this repository by ./publish.
package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gpunet/gpunet/internal/challenge"
	"github.com/gpunet/gpunet/internal/challenge/prove"
	"github.com/gpunet/gpunet/internal/gpu"
)

func main() {
	out := flag.String("out", "", "directory to write result.txt to (default: stdout only)")
	cpu := flag.Bool("cpu", false, "compute on the CPU instead (to check a GPU's result)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: gpugemm [-cpu] [-out DIR] N K M SEED\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*out, *cpu, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "gpugemm:", err)
		os.Exit(1)
	}
}

func run(out string, cpu bool, args []string) error {
	if len(args) != 4 {
		return errors.New("want N K M SEED (see -h)")
	}
	var dims [3]int
	for i, a := range args[:3] {
		v, err := strconv.Atoi(a)
		if err != nil {
			return fmt.Errorf("%q: want a number", a)
		}
		dims[i] = v
	}
	size := challenge.Size{N: dims[0], K: dims[1], M: dims[2]}
	if err := size.Validate(); err != nil {
		return err
	}
	ch := challenge.Challenge{Seed: sha256.Sum256([]byte(args[3])), Size: size, Openings: 1}
	var p prove.Prover
	device := "cpu"
	if cpu {
		p = &prove.CPU{}
	} else {
		devs, err := gpu.Open()
		if len(devs) == 0 {
			if err == nil {
				err = errors.New("the driver reports no GPU")
			}
			return fmt.Errorf("no GPU (run with -cpu to compute on the CPU): %w", err)
		}
		defer func() {
			for _, d := range devs {
				d.Close()
			}
		}()
		d := devs[0]
		p, device = &gpu.Prover{Dev: d}, d.Describe()+", kernel "+d.GEMMKernels()[0]
	}
	fmt.Printf("gpugemm: %s on %s\n", size, device)
	t0 := time.Now()
	cm, err := p.Commit(context.Background(), ch)
	if err != nil {
		return err
	}
	defer cm.Close()
	dt := time.Since(t0)
	root := cm.Root()
	line := fmt.Sprintf("int8 GEMM %s seed %q: C's Merkle root %x\n", size, args[3], root)
	fmt.Printf("gpugemm: %.2f s, %.1f int8 TOPS end to end (expansion, product and hashing)\n", dt.Seconds(), float64(size.Ops())/dt.Seconds()/1e12)
	fmt.Print(line)
	if out != "" {
		return os.WriteFile(filepath.Join(out, "result.txt"), []byte(line), 0o644)
	}
	return nil
}
