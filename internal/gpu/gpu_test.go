package gpu

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/challenge"
	"github.com/gpunet/gpunet/internal/challenge/prove"
)

// TestRoundKeys checks the AES-256 key expansion against FIPS 197,
// appendix A.3.
func TestRoundKeys(t *testing.T) {
	key, _ := hex.DecodeString("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4")
	w := expandKey256([32]byte(key))
	for i, want := range map[int]uint32{8: 0x9ba35411, 9: 0x8e6925af, 59: 0x706c631e} {
		if w[i] != want {
			t.Errorf("w[%d] = %08x, want %08x", i, w[i], want)
		}
	}
	if b := roundKeyBytes([32]byte(key)); binary.LittleEndian.Uint32(b[59*4:]) != 0x706c631e {
		t.Error("roundKeyBytes does not lay out the words little-endian")
	}
}

func testChallenge(seed byte, n, k, m, openings int) challenge.Challenge {
	return challenge.Challenge{Seed: [32]byte{seed, 1, 2}, Size: challenge.Size{N: n, K: k, M: m}, Openings: openings}
}

// TestProverMatchesCPU: the GPU prover's pipeline (blocks of rows, hashing
// on the device up to the stored level, the tree above it on the host)
// commits to the same root as the CPU prover, and its openings verify,
// for shapes with a partial last block, rows that do not fill a stored
// node, and a tree shallower than the stored level.
func TestProverMatchesCPU(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		c          challenge.Challenge
		blockBytes uint64
	}{
		{"blocks", testChallenge(1, 576, 64, 192, 20), 300 << 10}, // 3 leaves a row, 256-row blocks, the last partial
		{"one block", testChallenge(2, 320, 128, 128, 10), 0},
		{"shallow", testChallenge(3, 64, 128, 64, 8), 0}, // 64 leaves: depth 6 < the stored level
		{"wide", testChallenge(4, 256, 64, 1024, 12), 0}, // 16 leaves a row
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := &Emulated{Name: "test GPU", ID: "GPU-test"}
			cpu, err := (&prove.CPU{}).Commit(ctx, tc.c)
			if err != nil {
				t.Fatal(err)
			}
			defer cpu.Close()
			cm, err := (&Prover{Dev: dev, BlockBytes: tc.blockBytes}).Commit(ctx, tc.c)
			if err != nil {
				t.Fatal(err)
			}
			defer cm.Close()
			if cm.Root() != cpu.Root() {
				t.Fatalf("root %x, the CPU prover's %x", cm.Root(), cpu.Root())
			}
			rnd := [32]byte{9, byte(tc.c.Size.N)}
			op, err := cm.Open(ctx, rnd)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.c.Verify(cm.Root(), rnd, op); err != nil {
				t.Fatal(err)
			}
			want, _ := cpu.Open(ctx, rnd)
			a, _ := op.MarshalBinary()
			b, _ := want.MarshalBinary()
			if string(a) != string(b) {
				t.Fatal("the opening differs from the CPU prover's")
			}
		})
	}
}

// TestProverUsesDevice: the work runs as device kernels, with the kernel
// asked for.
func TestProverUsesDevice(t *testing.T) {
	dev := &Emulated{Name: "test GPU"}
	cm, err := (&Prover{Dev: dev, Kernel: "gemm_dp4a", BlockBytes: 300 << 10}).Commit(context.Background(), testChallenge(5, 576, 64, 192, 4))
	if err != nil {
		t.Fatal(err)
	}
	cm.Close()
	if dev.Launches["gemm_dp4a"] != 3 || dev.Launches["aes256_ctr"] != 4 || dev.Launches["hash_leaves"] != 3 || dev.Launches["hash_nodes"] != 3*storedLevel {
		t.Fatalf("launches %v", dev.Launches)
	}
	if _, err := (&Prover{Dev: dev, Kernel: "gemm_nope"}).Commit(context.Background(), testChallenge(5, 64, 64, 64, 4)); err == nil || !strings.Contains(err.Error(), "gemm_nope") {
		t.Fatalf("unknown kernel: %v", err)
	}
}

// TestProverMemory: a challenge whose B does not fit the device is refused
// with the numbers.
func TestProverMemory(t *testing.T) {
	dev := &Emulated{Name: "small GPU", Memory: 200 << 20}
	_, err := (&Prover{Dev: dev}).Commit(context.Background(), testChallenge(6, 64, 1<<16, 1<<12, 4))
	if err == nil || !strings.Contains(err.Error(), "device memory") {
		t.Fatalf("err = %v", err)
	}
}

// TestProverCancel: a cancelled context stops the commit.
func TestProverCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := (&Prover{Dev: &Emulated{Name: "g"}}).Commit(ctx, testChallenge(7, 512, 64, 64, 4))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

// brokenGEMM is a device whose mma kernel computes a wrong product.
type brokenGEMM struct{ *Emulated }

func (b brokenGEMM) GEMM(kernel string, c, a, bt Buf, n, k, m, ldc uint32) error {
	if err := b.Emulated.GEMM(kernel, c, a, bt, n, k, m, ldc); err != nil {
		return err
	}
	if kernel == "gemm_mma_128x256" {
		return b.Emulated.Memset(c.Slice(4*uint64(ldc)+8, 4), 1) // C[1][2]
	}
	return nil
}

// TestBenchmark: each kernel is checked before it is timed; a kernel with
// a wrong result is reported and not used, and the figure is the fastest
// correct one's.
func TestBenchmark(t *testing.T) {
	dev := brokenGEMM{&Emulated{Name: "test GPU", ID: "GPU-1234", Kernels: []string{"gemm_mma_128x256", "gemm_dp4a"}}}
	b := &Benchmarker{Dev: dev, MaxSize: 128}
	if b.Device() != "gpu:GPU-1234" {
		t.Fatalf("Device() = %q", b.Device())
	}
	fig, err := b.Run(context.Background(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if fig.Kernel != "gemm_dp4a" || fig.Int8TOPS <= 0 || fig.MemBandwidthGBs <= 0 || len(fig.Kernels) != 2 {
		t.Fatalf("figures %+v", fig)
	}
	// The declared figure is a whole proof's rate (its leaves hashed on
	// the device), at most the bare kernel's.
	if fig.Int8TOPS > fig.Kernels[1].Int8TOPS || dev.Launches["hash_leaves"] == 0 {
		t.Fatalf("declared %g TOPS, the kernel alone %g; launches %v", fig.Int8TOPS, fig.Kernels[1].Int8TOPS, dev.Launches)
	}
	if e := fig.Kernels[0].Error; !strings.Contains(e, "C[1][2]") {
		t.Fatalf("the broken kernel's error: %q", e)
	}
}
