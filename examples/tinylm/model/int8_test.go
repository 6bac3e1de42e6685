package model

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestInt8WeightsRegenerate: training from corpus.txt again gives the
// committed int8.bin.gz's weights byte for byte (compared uncompressed).
func TestInt8WeightsRegenerate(t *testing.T) {
	corpus, err := os.ReadFile("corpus.txt")
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(int8Gz))
	if err != nil {
		t.Fatal(err)
	}
	committed, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if got := TrainInt8(string(corpus), DefaultInt8Shape).Encode(); !bytes.Equal(got, committed) {
		t.Fatalf("training from corpus.txt gives %d bytes of weights, the committed int8.bin.gz has %d other ones: run go generate ./examples/tinylm/model", len(got), len(committed))
	}
	m, err := DefaultInt8(CPU{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Weights().Encode(), committed) || m.VocabSize() != Default().VocabSize() {
		t.Errorf("the loaded model's weights are not the committed ones, or its vocabulary (%d) is not the trigram's", m.VocabSize())
	}
}

// gemms are CPU GEMMs that compute in different ways: package int8gemm's
// kernel in one block, and in blocks of other sizes on several goroutines
// (each column in another lane of the kernel's packed words). The GPU's
// are devicegemm's tests.
func gemms() []GEMM {
	return []GEMM{CPU{}, CPU{Workers: 3}, CPU{Workers: 16}, CPU{Workers: 1000}}
}

var int8Requests = []struct {
	prompt string
	o      Options
}{
	{"Is not Fire a Body heated so hot as to emit Light copiously?", Options{MaxTokens: 40}},
	{"Do not Bodies act upon Light at a distance", Options{Temperature: 0.7, Seed: 42, MaxTokens: 60}},
	{"And", Options{Temperature: 1.3, Seed: 7, MaxTokens: 60}},
	{"zyxw unknown words", Options{Temperature: 1, TopP: 0.9, Seed: 3, MaxTokens: 60}},
	{"the Rays of Light", Options{Temperature: 2, Seed: 1, MaxTokens: 30, Stop: []string{" the"}}},
	{"", Options{Temperature: 0.5, Seed: 99}},
}

// completions runs every request of int8Requests on m: each one's text,
// token count and finish reason.
func completions(t *testing.T, m *Int8) []string {
	t.Helper()
	var out []string
	for _, r := range int8Requests {
		g := m.Generate(m.Tokenize(r.prompt), r.o)
		text := g.Run()
		if err := g.Err(); err != nil {
			t.Fatalf("%s: %v", m.GEMM(), err)
		}
		out = append(out, fmt.Sprintf("%q %d %s", text, g.Tokens(), g.FinishReason()))
	}
	return out
}

// TestInt8SameOnEveryGEMM: the same requests give the same completions,
// and the same logits, bit for bit, whichever GEMM computes them.
func TestInt8SameOnEveryGEMM(t *testing.T) {
	var ref *Int8
	var want []string
	for _, g := range gemms() {
		m, err := DefaultInt8(g)
		if err != nil {
			t.Fatalf("%s: %v", g.Describe(), err)
		}
		got := completions(t, m)
		if ref == nil {
			ref, want = m, got
			for i, c := range got {
				if strings.HasPrefix(c, `"" `) && int8Requests[i].o.Stop == nil {
					t.Errorf("request %d: an empty completion", i)
				}
			}
			continue
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n%s\n%s:\n%s", m.GEMM(), strings.Join(got, "\n"), ref.GEMM(), strings.Join(want, "\n"))
		}
		if err := m.SameLogits(ref); err != nil {
			t.Error(err)
		}
	}
}

// TestInt8WeightsMatter: the answers depend on the weights: changing one
// weight of the output layer changes a greedy completion, and a model whose
// output layer is kept to 4 bits (a cheaper model) answers nearly every
// request differently.
func TestInt8WeightsMatter(t *testing.T) {
	m, err := DefaultInt8(CPU{})
	if err != nil {
		t.Fatal(err)
	}
	want := completions(t, m)
	// The weights from the hidden layer to the greedy answer's first
	// token: one of them set to -128 makes it another token.
	prompt := m.Tokenize(int8Requests[0].prompt)
	logits := make([]int32, m.VocabSize())
	if err := m.Logits(logits, [][]int32{prompt[len(prompt)-m.dims.Context:]}); err != nil {
		t.Fatal(err)
	}
	first := int32(1)
	for i, l := range logits[1:] {
		if l > logits[first] {
			first = int32(i + 1)
		}
	}
	var one *Int8
	for k := range m.dims.Hidden {
		w := m.Weights()
		w.W2[int(first)*w.Hidden+k] = -128
		if one, err = NewInt8(w, CPU{}); err != nil {
			t.Fatal(err)
		}
		if completions(t, one)[0] != want[0] {
			break
		}
		one = nil
	}
	if one == nil {
		t.Fatalf("no weight of token %q (%d) changes the greedy answer %s", m.Token(first), first, want[0])
	}
	w := m.Weights()
	for i, v := range w.W2 {
		w.W2[i] = v >> 4 << 4
	}
	coarse, err := NewInt8(w, CPU{})
	if err != nil {
		t.Fatal(err)
	}
	same := 0
	for i, got := range completions(t, coarse) {
		if got == want[i] {
			same++
			t.Logf("request %d: the 4-bit model answers as the model: %s", i, got)
		}
	}
	if same > 1 {
		t.Errorf("the 4-bit model answers %d of %d requests as the model", same, len(want))
	}
	if one.Fingerprint() == m.Fingerprint() || coarse.Fingerprint() == m.Fingerprint() {
		t.Error("other weights, the same fingerprint")
	}
}

// TestSampleIntFixedPoint: the fixed-point exponential is e^-x within
// 0.1%, and sampling follows the weights: at temperature 1 a token with
// twice the probability (a logit ln 2 higher) is drawn about twice as often.
func TestSampleIntFixedPoint(t *testing.T) {
	if expNeg(0) != 1<<32 || expNeg(expFloor) != 0 {
		t.Errorf("expNeg(0) = %d, expNeg(floor) = %d", expNeg(0), expNeg(expFloor))
	}
	for _, x := range []float64{0.001, 0.5, 1, 2.5, 5, 10} {
		got := float64(expNeg(int64(x*(1<<24)))) / (1 << 32)
		want := math.Exp(-x)
		if d := got/want - 1; d > 1e-3 || d < -1e-3 {
			t.Errorf("expNeg(%g) = %g, want %g", x, got, want)
		}
	}
	// Logit units of 1/1000: token 2's logit is ln 2 above token 1's.
	logits := []int32{-1 << 20, 0, 693}
	rng := newRNG(5)
	var n [3]int
	for range 30000 {
		n[sampleInt(logits, true, 1<<24/1000, tempOne, 0, rng)]++
	}
	if n[0] != 0 || n[2] < 19000 || n[2] > 21000 {
		t.Errorf("draws %v: want none of End, two thirds of token 2", n)
	}
	if got := sampleInt(logits, true, 1<<24/1000, 0, 0, rng); got != 2 {
		t.Errorf("greedy: %d", got)
	}
	if got := sampleInt([]int32{9, 5, 5}, true, 1<<20, 0, 0, rng); got != 1 {
		t.Errorf("greedy among equals: %d, want the lowest id", got)
	}
}

// FuzzDecodeInt8: malformed weights are an error, never a panic.
func FuzzDecodeInt8(f *testing.F) {
	small := &Int8Weights{Vocab: []string{"", " a", " b"}, Context: 4, Embed: 16, Hidden: 64, Shift: 3, LogitScale: 1000,
		Emb: make([]int8, 3*16), W1: make([]int8, 64*64), B1: make([]int32, 64), W2: make([]int8, 3*64), B2: make([]int32, 3)}
	small.Emb[17], small.W1[5], small.W2[70] = 3, -4, 5
	f.Add(small.Encode())
	f.Add([]byte(int8Magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeInt8(b, CPU{})
		if err == nil {
			m.Generate(m.Tokenize(" a b"), Options{Temperature: 1, MaxTokens: 8}).Run()
		}
	})
}

// BenchmarkTokens: tokens per second of a sampled completion, the trigram
// model (the baseline) and the int8 network on the CPU with one and four
// workers.
//
//	go test -run XXX -bench Tokens ./examples/tinylm/model
func BenchmarkTokens(b *testing.B) {
	run := func(b *testing.B, gen func(o Options) *Generator) {
		tokens := 0
		for i := range b.N {
			g := gen(Options{Temperature: 1, Seed: uint64(i), MaxTokens: 64})
			g.Run()
			tokens += g.Tokens() + 1
		}
		b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
	}
	tri := Default()
	b.Run("trigram", func(b *testing.B) {
		run(b, func(o Options) *Generator { return tri.Generate(tri.Tokenize("Is not Fire a Body"), o) })
	})
	for _, w := range []int{1, 4} {
		m, err := DefaultInt8(CPU{Workers: w})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("int8-cpu-%d", w), func(b *testing.B) {
			run(b, func(o Options) *Generator { return m.Generate(m.Tokenize("Is not Fire a Body"), o) })
		})
	}
}
