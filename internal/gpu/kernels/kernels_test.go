package kernels

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestModules checks every committed module's header and that it declares
// each kernel the launcher calls, with the parameters it passes.
func TestModules(t *testing.T) {
	for _, m := range All() {
		if err := m.Check(); err != nil {
			t.Error(err)
		}
	}
	m, _ := For(9, 0)
	_, entries, _ := Entries(m.PTX)
	for _, k := range TensorCoreKernels {
		if _, ok := entries[k]; !ok {
			t.Errorf("the sm_80 module lacks the tensor-core kernel %s", k)
		}
	}
	if !bytes.Contains(m.PTX, []byte("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32")) {
		t.Error("the sm_80 module has no int8 mma.sync")
	}
	old, _ := For(6, 1)
	if !bytes.Contains(old.PTX, []byte("dp4a.s32.s32")) || bytes.Contains(old.PTX, []byte("mma.sync")) {
		t.Error("the sm_61 module must use dp4a and no tensor-core instruction")
	}
	if _, ok := For(6, 0); ok {
		t.Error("compute capability 6.0 has no dp4a")
	}
}

// TestCheckCatchesMismatch: a kernel whose parameters differ from what the
// launcher passes is reported.
func TestCheckCatchesMismatch(t *testing.T) {
	m, _ := For(8, 0)
	bad := bytes.Replace(m.PTX, []byte(".param .u64 hash_leaves_param_2"), []byte(".param .u32 hash_leaves_param_2"), 1)
	if err := (Module{"sm_80", bad}).Check(); err == nil || !strings.Contains(err.Error(), "hash_leaves") {
		t.Fatalf("Check = %v, want a hash_leaves mismatch", err)
	}
}

func needTool(t *testing.T, name, pkg string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		msg := fmt.Sprintf("%s not found (apt-get install %s)", name, pkg)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// TestPTXUpToDate regenerates the PTX from kernels.cu and compares it with
// the committed files.
func TestPTXUpToDate(t *testing.T) {
	needTool(t, "clang-14", "clang-14")
	dir := t.TempDir()
	out, err := exec.Command("sh", "gen.sh", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("gen.sh: %v\n%s", err, out)
	}
	for _, m := range All() {
		got, err := os.ReadFile(filepath.Join(dir, "kernels_"+m.Target+".ptx"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, m.PTX) {
			t.Errorf("kernels_%s.ptx is not what gen.sh makes of kernels.cu: run internal/gpu/kernels/gen.sh", m.Target)
		}
	}
}

// TestKernelLogic compiles the kernels' arithmetic (common.h) for the CPU
// and compares its AES-256-CTR and Merkle hashes with Go's.
func TestKernelLogic(t *testing.T) {
	cc := needTool(t, "cc", "gcc")
	bin := filepath.Join(t.TempDir(), "hosttest")
	if out, err := exec.Command(cc, "-O1", "-Wall", "-Werror", "-o", bin, "testdata/hosttest.c").CombinedOutput(); err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	in, _ := cmd.StdinPipe()
	outp, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer in.Close()
	r := bufio.NewReader(outp)
	ask := func(line string) string {
		t.Helper()
		if _, err := fmt.Fprintln(in, line); err != nil {
			t.Fatal(err)
		}
		s, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: %v", line[:8], err)
		}
		return strings.TrimSpace(s)
	}
	for i := range 20 {
		var key [32]byte
		rand.Read(key[:])
		first := uint64(i) * 0x1_0000_0001
		if i == 19 {
			first = 1<<32 - 2 // the counter carries into the next word
		}
		var rk []byte
		for _, w := range expandKey(key) {
			rk = binary.BigEndian.AppendUint32(rk, w)
		}
		got := ask(fmt.Sprintf("aes %x %d %d", rk, first, 5))
		blk, _ := aes.NewCipher(key[:])
		var iv [16]byte
		binary.BigEndian.PutUint64(iv[8:], first)
		want := make([]byte, 80)
		cipher.NewCTR(blk, iv[:]).XORKeyStream(want, want)
		if got != hex.EncodeToString(want) {
			t.Fatalf("AES-256-CTR from block %d:\n got %s\nwant %x", first, got, want)
		}

		leaf := make([]byte, 256)
		rand.Read(leaf)
		wantLeaf := sha256.Sum256(append([]byte{0}, leaf...))
		if got := ask("leaf " + hex.EncodeToString(leaf)); got != hex.EncodeToString(wantLeaf[:]) {
			t.Fatalf("leaf hash: got %s want %x", got, wantLeaf)
		}
		node := make([]byte, 64)
		rand.Read(node)
		wantNode := sha256.Sum256(append([]byte{1}, node...))
		if got := ask("node " + hex.EncodeToString(node)); got != hex.EncodeToString(wantNode[:]) {
			t.Fatalf("node hash: got %s want %x", got, wantNode)
		}
	}
}

// expandKey is FIPS 197's AES-256 key expansion, written again here so
// that this test checks the C code against an independent reading (package
// gpu has its own, checked by TestRoundKeys there).
func expandKey(key [32]byte) [60]uint32 {
	sbox := func(b byte) uint32 {
		// The S-box through crypto/aes: encrypting with an all-zero
		// key is not enough to read it, so compute it from GF(2⁸).
		if b == 0 {
			return 0x63
		}
		inv := byte(1)
		for p, e := b, 254; e > 0; e >>= 1 { // b^254 = b⁻¹
			if e&1 == 1 {
				inv = gmul(inv, p)
			}
			p = gmul(p, p)
		}
		x := inv
		s := x ^ (x<<1 | x>>7) ^ (x<<2 | x>>6) ^ (x<<3 | x>>5) ^ (x<<4 | x>>4) ^ 0x63
		return uint32(s)
	}
	sub := func(w uint32) uint32 {
		return sbox(byte(w>>24))<<24 | sbox(byte(w>>16))<<16 | sbox(byte(w>>8))<<8 | sbox(byte(w))
	}
	var w [60]uint32
	for i := range 8 {
		w[i] = binary.BigEndian.Uint32(key[4*i:])
	}
	rcon := byte(1)
	for i := 8; i < 60; i++ {
		t := w[i-1]
		if i%8 == 0 {
			t = sub(t<<8|t>>24) ^ uint32(rcon)<<24
			rcon = gmul(rcon, 2)
		} else if i%8 == 4 {
			t = sub(t)
		}
		w[i] = w[i-8] ^ t
	}
	return w
}

func gmul(a, b byte) byte {
	var p byte
	for b > 0 {
		if b&1 == 1 {
			p ^= a
		}
		hi := a & 0x80
		a <<= 1
		if hi != 0 {
			a ^= 0x1b
		}
		b >>= 1
	}
	return p
}
