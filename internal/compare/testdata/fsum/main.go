// Command fsum is a float job for the comparator's tests: it sums
// 1/(k²+j) over k = 1…N for each j < 16, adding the terms in an order
// shuffled by SEED, so that honest replicas with different seeds differ in
// the low bits. Its cheating modes skip half the terms (-half) or add in
// float32 (-f32). It writes /out/sums.npy, /out/sums.f64 and /out/total.txt.
//
//	fsum [-half|-f32] SEED N
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
)

const rows = 16

func main() {
	half := flag.Bool("half", false, "cheat: add only half of the terms")
	f32 := flag.Bool("f32", false, "cheat: add in float32")
	flag.Parse()
	seed, err1 := strconv.ParseUint(flag.Arg(0), 10, 64)
	n, err2 := strconv.Atoi(flag.Arg(1))
	if err1 != nil || err2 != nil || n < 1 {
		fmt.Fprintln(os.Stderr, "usage: fsum [-half|-f32] SEED N")
		os.Exit(2)
	}
	order := rand.New(rand.NewPCG(seed, 0)).Perm(n)
	if *half {
		order = order[:n/2]
	}
	sums := make([]float64, rows)
	for j := range sums {
		var s float64
		var s32 float32
		for _, k := range order {
			kk := float64(k + 1)
			term := 1 / (kk*kk + float64(j))
			if *f32 {
				s32 += float32(term)
			} else {
				s += term
			}
		}
		if *f32 {
			s = float64(s32)
		}
		sums[j] = s
	}
	if err := os.MkdirAll("/out", 0o755); err != nil {
		fail(err)
	}
	hdr := fmt.Sprintf("{'descr': '<f8', 'fortran_order': False, 'shape': (%d,), }", rows)
	for (10+len(hdr)+1)%64 != 0 {
		hdr += " "
	}
	hdr += "\n"
	npy := append([]byte("\x93NUMPY\x01\x00"), byte(len(hdr)), byte(len(hdr)>>8))
	npy = append(npy, hdr...)
	var raw []byte
	total := 0.0
	for _, s := range sums {
		raw = binary.LittleEndian.AppendUint64(raw, math.Float64bits(s))
		total += s
	}
	npy = append(npy, raw...)
	write("/out/sums.npy", npy)
	write("/out/sums.f64", raw)
	write("/out/total.txt", []byte(fmt.Sprintf("rows,total\n%d,%.17g\n", rows, total)))
}

func write(name string, b []byte) {
	if err := os.WriteFile(name, b, 0o644); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
