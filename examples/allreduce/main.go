// Command allreduce is the cluster example: a ring all-reduce of int64
// vectors among the processes of a gang, reading torchrun's variables
// (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, NODE_RANK, LOCAL_WORLD_SIZE,
// LOCAL_RANK) and the members file (GPUNET_MEMBERS_FILE). It prints the
// result's digest, which equals that of a one-process run:
//
//	allreduce -n 1000000 -seed 7            # one process of the gang
//	allreduce -local 3 -n 1000000 -seed 7   # the same sum in one process
//
// and with -out writes the result (little-endian int64s) to a file. With
// -steps K it reduces the vector in K slices, pausing -pause after each,
// and keeps its progress under $GPUNET_CHECKPOINT_DIR (a job's
// checkpoint: path), so that a gang placed again resumes where its
// members' checkpoints left it (ring.RunSteps).
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/gpunet/gpunet/examples/allreduce/ring"
)

func main() {
	n := flag.Int("n", 1<<20, "elements per vector")
	seed := flag.Uint64("seed", 1, "seed of the inputs")
	local := flag.Int("local", 0, "compute the sum of this many ranks' inputs in one process instead")
	out := flag.String("out", "", "write the result here")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up after this long")
	hold := flag.Duration("hold", 0, "wait this long before the all-reduce (a stand-in for a long job's work: the gang tests stop a member meanwhile)")
	steps := flag.Int("steps", 0, "reduce in this many steps, keeping the progress under $GPUNET_CHECKPOINT_DIR when it is set and resuming from it")
	pause := flag.Duration("pause", 0, "with -steps, wait this long after each step (a stand-in for a long job's work)")
	flag.Parse()
	if *n < 1 || *n > 1<<28 {
		fail(fmt.Errorf("-n %d: want 1 to %d", *n, 1<<28))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	var v []int64
	label := ""
	if *local > 0 {
		if *local > ring.MaxWorld {
			fail(fmt.Errorf("-local %d: at most %d", *local, ring.MaxWorld))
		}
		v = ring.Sum(*seed, *local, *n)
		label = fmt.Sprintf("local world=%d", *local)
	} else {
		e, err := ring.EnvFromOS(os.Getenv, os.ReadFile)
		if err != nil {
			fail(err)
		}
		if *hold > 0 {
			fmt.Printf("allreduce rank=%d holding for %s\n", e.Rank, *hold)
			select {
			case <-time.After(*hold):
			case <-ctx.Done():
				fail(ctx.Err())
			}
		}
		start := time.Now()
		if *steps > 0 {
			var from int
			v, from, err = ring.RunSteps(ctx, e, *seed, *n, *steps, *pause, os.Getenv("GPUNET_CHECKPOINT_DIR"))
			if from > 0 {
				fmt.Printf("allreduce rank=%d resumed at step %d of %d (checkpoint %s)\n", e.Rank, from, *steps, os.Getenv("GPUNET_RESUME_SEQ"))
			}
		} else {
			v, err = ring.Run(ctx, e, *seed, *n)
		}
		if err != nil {
			fail(err)
		}
		label = fmt.Sprintf("rank=%d world=%d time=%s", e.Rank, e.WorldSize, time.Since(start).Round(time.Millisecond))
	}
	if *out != "" {
		b := make([]byte, 8*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
		}
		if err := os.WriteFile(*out, b, 0o644); err != nil {
			fail(err)
		}
	}
	fmt.Printf("allreduce %s n=%d seed=%d sha256=%s\n", label, *n, *seed, ring.Digest(v))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "allreduce:", err)
	os.Exit(1)
}
