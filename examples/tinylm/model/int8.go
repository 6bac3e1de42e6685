package model

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
)

// Int8 is tinylm's neural model: a feed-forward network over the last
// Context tokens (Bengio et al.'s neural probabilistic language model)
// whose arithmetic is all integers, so that its completions are the same
// bit for bit on every GPU, CPU, kernel and thread count.
//
//	x      = the int8 embeddings of the last Context tokens, one after another
//	h      = clamp(round((x·W1ᵀ + b1) / 2^Shift), 0, 127)   int8 (ReLU)
//	logits = h·W2ᵀ + b2                                      int32
//
// The two products are int8 × int8 → int32 (a GEMM: tensor cores on a
// GPU, package int8gemm on a CPU): integer sums are exact in any order.
// The requantization is a rounding shift, and sampling turns the logits
// into integer weights with a fixed-point exponential (sampleInt), so no
// floating-point operation, whose last bit may differ between machines,
// touches a token.
//
// The weights were trained in floating point by ./train8 (go generate)
// and quantized; they are committed (int8.bin.gz, embedded). An Int8 is
// immutable once made: safe for concurrent use.
type Int8 struct {
	vocab []string
	ids   map[string]int32
	dims  int8Dims
	// emb is the embeddings (vocab × Embed); w1 (Hidden × Context·Embed)
	// and w2 (vocab × Hidden) the layers' weights, a row per output.
	emb, w1, w2 []int8
	b1, b2      []int32
	l1, l2      Weights
	gemm        string
	fingerprint string
}

// int8Dims are the network's shape and its fixed-point constants.
type int8Dims struct {
	Context, Embed, Hidden int
	// Shift is the requantization of the hidden layer: h is its
	// accumulators divided by 2^Shift, rounded.
	Shift int
	// LogitScale is the size of one unit of the logits in natural-log
	// units, times 2^24: the softmax's p ∝ exp(logit·LogitScale/2^24).
	LogitScale int64
}

//go:generate go run ./train8 -corpus corpus.txt -out int8.bin.gz

//go:embed int8.bin.gz
var int8Gz []byte

// int8Magic starts the int8 model's encoding.
const int8Magic = "tinylm int8 1\n"

// Limits of a decoded int8 model.
const (
	maxInt8Vocab   = 1 << 16
	maxInt8Context = 16
	maxInt8Width   = 1024 // Context·Embed and Hidden
	maxInt8Shift   = 30
	// maxLogitScale is one natural-log unit per logit unit: a larger one
	// would overflow sampleInt's arithmetic.
	maxLogitScale = 1 << 24
)

// DefaultInt8 is the int8 model trained from corpus.txt (the embedded
// weights), computing with g.
func DefaultInt8(g GEMM) (*Int8, error) {
	return LoadInt8(bytes.NewReader(int8Gz), g)
}

// LoadInt8 reads weights written by Int8.WriteGzip.
func LoadInt8(r io.Reader, g GEMM) (*Int8, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(io.LimitReader(zr, 64<<20))
	if err != nil {
		return nil, err
	}
	return DecodeInt8(raw, g)
}

// Int8Weights are an int8 model's parameters, as the trainer makes them.
type Int8Weights struct {
	Vocab                  []string
	Context, Embed, Hidden int
	Shift                  int
	LogitScale             int64
	Emb, W1, W2            []int8
	B1, B2                 []int32
}

// NewInt8 checks w and prepares its layers on g.
func NewInt8(w *Int8Weights, g GEMM) (*Int8, error) {
	return DecodeInt8(w.Encode(), g)
}

// Encode writes the weights in their binary form (uncompressed): the
// magic, the vocabulary (uvarint lengths and bytes), the shape and
// constants (uvarints), then the embeddings, W1, b1, W2 and b2, int8 as
// bytes and int32 little-endian.
func (w *Int8Weights) Encode() []byte {
	var b []byte
	b = append(b, int8Magic...)
	b = binary.AppendUvarint(b, uint64(len(w.Vocab)))
	for _, s := range w.Vocab {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	for _, v := range []int64{int64(w.Context), int64(w.Embed), int64(w.Hidden), int64(w.Shift), w.LogitScale} {
		b = binary.AppendUvarint(b, uint64(v))
	}
	b = append(b, int8Bytes(w.Emb)...)
	b = append(b, int8Bytes(w.W1)...)
	for _, v := range w.B1 {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	b = append(b, int8Bytes(w.W2)...)
	for _, v := range w.B2 {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return b
}

// WriteGzip writes Encode's bytes gzipped (no name, no time in the
// header).
func (w *Int8Weights) WriteGzip(out io.Writer) error {
	zw, err := gzip.NewWriterLevel(out, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(w.Encode()); err != nil {
		return err
	}
	return zw.Close()
}

// DecodeInt8 reads Int8Weights.Encode's bytes and prepares the layers on
// g.
func DecodeInt8(raw []byte, g GEMM) (*Int8, error) {
	bad := func(format string, a ...any) (*Int8, error) {
		return nil, fmt.Errorf("malformed int8 weights: "+format, a...)
	}
	if !bytes.HasPrefix(raw, []byte(int8Magic)) {
		return bad("no %q at the start", strings.TrimSpace(int8Magic))
	}
	d := decoder{b: raw[len(int8Magic):]}
	nv := d.uvarint(maxInt8Vocab)
	m := &Int8{vocab: make([]string, 0, min(nv, uint64(len(raw))))}
	for range nv {
		n := d.uvarint(1 << 16)
		m.vocab = append(m.vocab, string(d.bytes(n)))
	}
	ctx, embed, hidden := d.uvarint(maxInt8Context), d.uvarint(maxInt8Width), d.uvarint(maxInt8Width)
	shift, scale := d.uvarint(maxInt8Shift), d.uvarint(maxLogitScale)
	if d.err != nil {
		return bad("the vocabulary or the shape: %v", d.err)
	}
	m.dims = int8Dims{Context: int(ctx), Embed: int(embed), Hidden: int(hidden), Shift: int(shift), LogitScale: int64(scale)}
	in := m.dims.Context * m.dims.Embed
	switch {
	case nv < 2 || m.vocab[End] != "":
		return bad("%d tokens, token 0 not End", nv)
	case ctx == 0 || embed == 0 || in > maxInt8Width || in%64 != 0:
		return bad("context %d of embeddings of %d: want a positive multiple of 64 entries, at most %d", ctx, embed, maxInt8Width)
	case hidden == 0 || hidden%64 != 0:
		return bad("%d hidden units: want a positive multiple of 64", hidden)
	case shift == 0 || scale == 0:
		return bad("shift %d, logit scale %d: want positive", shift, scale)
	}
	v, h := int(nv), m.dims.Hidden
	int8s := func(n int) []int8 {
		b := d.bytes(uint64(n))
		out := make([]int8, len(b))
		for i, x := range b {
			out[i] = int8(x)
		}
		return out
	}
	int32s := func(n int) []int32 {
		b := d.bytes(4 * uint64(n))
		out := make([]int32, len(b)/4)
		for i := range out {
			out[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return out
	}
	m.emb = int8s(v * m.dims.Embed)
	m.w1 = int8s(h * in)
	m.b1 = int32s(h)
	m.w2 = int8s(v * h)
	m.b2 = int32s(v)
	if d.err != nil {
		return bad("%d bytes end within the weights", len(raw))
	}
	if len(d.b) != 0 {
		return bad("%d bytes after the weights", len(d.b))
	}
	m.ids = make(map[string]int32, v)
	for i, w := range m.vocab {
		if _, dup := m.ids[w]; dup {
			return bad("token %q twice", w)
		}
		m.ids[w] = int32(i)
	}
	var err error
	if m.l1, err = g.Weights(m.w1, h, in); err != nil {
		return nil, err
	}
	if m.l2, err = g.Weights(m.w2, v, h); err != nil {
		return nil, err
	}
	m.gemm = g.Describe()
	sum := sha256.Sum256(raw)
	m.fingerprint = fmt.Sprintf("tinylm-int8_%x", sum[:6])
	return m, nil
}

// Weights returns a copy of the model's parameters.
func (m *Int8) Weights() *Int8Weights {
	return &Int8Weights{
		Vocab: append([]string(nil), m.vocab...), Context: m.dims.Context, Embed: m.dims.Embed, Hidden: m.dims.Hidden,
		Shift: m.dims.Shift, LogitScale: m.dims.LogitScale,
		Emb: append([]int8(nil), m.emb...), W1: append([]int8(nil), m.w1...), W2: append([]int8(nil), m.w2...),
		B1: append([]int32(nil), m.b1...), B2: append([]int32(nil), m.b2...),
	}
}

// Fingerprint identifies the weights: two models with the same
// fingerprint give the same completions, whatever their GEMM.
func (m *Int8) Fingerprint() string { return m.fingerprint }

// GEMM names the GEMM the model computes with.
func (m *Int8) GEMM() string { return m.gemm }

// VocabSize is the number of tokens the model knows, End included.
func (m *Int8) VocabSize() int { return len(m.vocab) }

// Tokenize splits text (Split) and gives each token's id, as Model's
// Tokenize does.
func (m *Int8) Tokenize(text string) []int32 {
	toks := Split(text)
	ids := make([]int32, len(toks))
	for i, t := range toks {
		ids[i] = lookupID(m.ids, t)
	}
	return ids
}

// Token is a token's text ("" for End and Unknown).
func (m *Int8) Token(id int32) string {
	if id < 0 || int(id) >= len(m.vocab) {
		return ""
	}
	return m.vocab[id]
}

// Logits computes the logits of the token after ctx, one context (of
// Context tokens, the last one last; Unknown reads as End) after
// another, into out (len(ctxs)·VocabSize entries).
func (m *Int8) Logits(out []int32, ctxs [][]int32) error {
	n, c, e, h := len(ctxs), m.dims.Context, m.dims.Embed, m.dims.Hidden
	in := c * e
	x := make([]int8, n*in)
	for r, ctx := range ctxs {
		if len(ctx) != c {
			return fmt.Errorf("a context of %d tokens, want %d", len(ctx), c)
		}
		for i, tok := range ctx {
			if tok < 0 || int(tok) >= len(m.vocab) {
				tok = End
			}
			copy(x[r*in+i*e:r*in+(i+1)*e], m.emb[int(tok)*e:int(tok+1)*e])
		}
	}
	acc := make([]int32, n*h)
	if err := m.l1.Mul(acc, x, n); err != nil {
		return err
	}
	hid := make([]int8, n*h)
	half := int64(1) << (m.dims.Shift - 1)
	for i, a := range acc {
		v := int64(a) + int64(m.b1[i%h])
		if v <= 0 {
			continue // ReLU
		}
		hid[i] = int8(min((v+half)>>m.dims.Shift, 127))
	}
	if err := m.l2.Mul(out, hid, n); err != nil {
		return err
	}
	v := len(m.vocab)
	for i := range out {
		out[i] += m.b2[i%v]
	}
	return nil
}

// Generate starts a completion of prompt (token ids, as Tokenize gives
// them; its last Context tokens are the context of the first token).
func (m *Int8) Generate(prompt []int32, o Options) *Generator {
	s := &int8Source{m: m, o: o, rng: newRNG(o.Seed), ctx: make([]int32, m.dims.Context), logits: make([]int32, len(m.vocab))}
	if len(prompt) > len(s.ctx) {
		prompt = prompt[len(prompt)-len(s.ctx):]
	}
	copy(s.ctx[len(s.ctx)-len(prompt):], prompt) // End before the prompt
	return newGenerator(m.vocab, s, o)
}

// SameLogits checks that m computes the same logits as ref (the same
// weights on another GEMM) on a batch of contexts drawn from the whole
// vocabulary: a GEMM kernel that computes wrongly would make every answer
// of m's replica a mismatch, so a server checks its device with this
// before serving.
func (m *Int8) SameLogits(ref *Int8) error {
	if m.fingerprint != ref.fingerprint {
		return fmt.Errorf("weights %s and %s", m.fingerprint, ref.fingerprint)
	}
	const n = 300 // more than one device tile of rows
	v := len(m.vocab)
	ctxs := make([][]int32, n)
	for r := range ctxs {
		ctxs[r] = make([]int32, m.dims.Context)
		for i := range ctxs[r] {
			ctxs[r][i] = int32((r*(m.dims.Context+1) + i*7919) % v)
		}
	}
	got, want := make([]int32, n*v), make([]int32, n*v)
	if err := m.Logits(got, ctxs); err != nil {
		return fmt.Errorf("%s: %w", m.gemm, err)
	}
	if err := ref.Logits(want, ctxs); err != nil {
		return fmt.Errorf("%s: %w", ref.gemm, err)
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("%s computes logit %d of context %v as %d, %s as %d", m.gemm, i%v, ctxs[i/v], got[i], ref.gemm, want[i])
		}
	}
	return nil
}
