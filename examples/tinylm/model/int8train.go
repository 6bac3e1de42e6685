package model

import (
	"math"
	"math/rand/v2"
	"strings"
)

// Int8Shape is the int8 network's shape and its training schedule.
type Int8Shape struct {
	Context, Embed, Hidden int
	Epochs                 int
	// Rate is the SGD learning rate, in millionths; it falls linearly to
	// nothing over the epochs.
	Rate int
	Seed uint64
}

// DefaultInt8Shape is the shape of the committed int8 model.
var DefaultInt8Shape = Int8Shape{Context: 4, Embed: 16, Hidden: 64, Epochs: 4, Rate: 50_000, Seed: 1}

// TrainInt8 trains the int8 model's network in floating point on text (a
// paragraph a line, the vocabulary Train's), by plain SGD on the
// cross-entropy of each next token, then quantizes it: the embeddings and
// each layer's weights to int8 with one scale each (the largest magnitude
// is 127), the biases to int32 in their layer's accumulator units, the
// hidden layer's shift so that its largest value over the corpus fits in
// 127, and the logits' scale to fixed point.
//
// Training is deterministic: a seeded generator, the samples in a fixed
// order, no goroutines; each product is converted explicitly (the Go
// compiler may not fuse it into a multiply-add) and the exponential is
// this package's (expSoft) rather than math.Exp, whose assembly differs
// between CPUs. The same text gives the same weights byte for byte.
func TrainInt8(text string, s Int8Shape) *Int8Weights {
	tri := Train(text)
	v := tri.VocabSize()
	c, e, h := s.Context, s.Embed, s.Hidden
	in := c * e
	var samples [][]int32 // the context then the token
	for _, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		seq := make([]int32, c)
		seq = append(seq, tri.Tokenize(strings.TrimSpace(line))...)
		seq = append(seq, End)
		for i := c; i < len(seq); i++ {
			samples = append(samples, seq[i-c:i+1])
		}
	}
	rng := rand.New(rand.NewPCG(s.Seed, 0x696e7438))
	uniform := func(n int, a float64) []float64 {
		w := make([]float64, n)
		for i := range w {
			w[i] = float64(float64(rng.Float64()*2-1) * a)
		}
		return w
	}
	emb := uniform(v*e, 0.5)
	w1 := uniform(h*in, 1/math.Sqrt(float64(in)))
	w2 := uniform(v*h, 1/math.Sqrt(float64(h)))
	b1, b2 := make([]float64, h), make([]float64, v)
	x, a1, hid := make([]float64, in), make([]float64, h), make([]float64, h)
	z, dh, dx := make([]float64, v), make([]float64, h), make([]float64, in)
	order := make([]int, len(samples))
	for i := range order {
		order[i] = i
	}
	steps, step := s.Epochs*len(samples), 0
	for range s.Epochs {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, si := range order {
			smp := samples[si]
			lr := float64(s.Rate) / 1e6 * float64(steps-step) / float64(steps)
			step++
			for i, tok := range smp[:c] {
				copy(x[i*e:(i+1)*e], emb[int(tok)*e:int(tok+1)*e])
			}
			for j := range h {
				a := b1[j]
				for k, xv := range x {
					a += float64(w1[j*in+k] * xv)
				}
				a1[j] = a
				hid[j] = max(a, 0)
			}
			zmax := math.Inf(-1)
			for t := range v {
				a := b2[t]
				for k, hv := range hid {
					a += float64(w2[t*h+k] * hv)
				}
				z[t] = a
				zmax = max(zmax, a)
			}
			sum := 0.0
			for t := range z {
				z[t] = expSoft(z[t] - zmax)
				sum += z[t]
			}
			// z becomes dLoss/dlogit: softmax minus the one-hot target.
			clear(dh)
			y := int(smp[c])
			for t := range z {
				g := z[t] / sum
				if t == y {
					g -= 1
				}
				if g == 0 {
					continue
				}
				row := w2[t*h : (t+1)*h]
				for k, hv := range hid {
					dh[k] += float64(g * row[k])
					row[k] -= float64(float64(lr*g) * hv)
				}
				b2[t] -= float64(lr * g)
			}
			clear(dx)
			for j := range h {
				if a1[j] <= 0 {
					continue
				}
				g := dh[j]
				row := w1[j*in : (j+1)*in]
				for k, xv := range x {
					dx[k] += float64(g * row[k])
					row[k] -= float64(float64(lr*g) * xv)
				}
				b1[j] -= float64(lr * g)
			}
			for i, tok := range smp[:c] {
				row := emb[int(tok)*e : int(tok+1)*e]
				for k := range row {
					row[k] -= float64(lr * dx[i*e+k])
				}
			}
		}
	}
	return quantize(tri, s, samples, emb, w1, b1, w2, b2)
}

// quantize makes the trained float network an Int8Weights.
func quantize(tri *Model, s Int8Shape, samples [][]int32, emb, w1, b1, w2, b2 []float64) *Int8Weights {
	c, e, h := s.Context, s.Embed, s.Hidden
	in := c * e
	q := &Int8Weights{Context: c, Embed: e, Hidden: h}
	for i := range tri.VocabSize() {
		q.Vocab = append(q.Vocab, tri.Token(int32(i)))
	}
	toInt8 := func(w []float64) ([]int8, float64) {
		top := 0.0
		for _, v := range w {
			top = max(top, math.Abs(v))
		}
		scale := top / 127
		out := make([]int8, len(w))
		for i, v := range w {
			out[i] = int8(math.Round(v / scale))
		}
		return out, scale
	}
	toInt32 := func(b []float64, scale float64) []int32 {
		out := make([]int32, len(b))
		for i, v := range b {
			out[i] = int32(max(min(math.Round(v/scale), math.MaxInt32), math.MinInt32))
		}
		return out
	}
	var sE, sW1, sW2 float64
	q.Emb, sE = toInt8(emb)
	q.W1, sW1 = toInt8(w1)
	q.W2, sW2 = toInt8(w2)
	q.B1 = toInt32(b1, float64(sE*sW1))
	// The hidden layer's largest accumulator over the corpus sets the
	// shift.
	top := int64(1)
	x := make([]int8, in)
	for _, smp := range samples {
		for i, tok := range smp[:c] {
			copy(x[i*e:(i+1)*e], q.Emb[int(tok)*e:int(tok+1)*e])
		}
		for j := range h {
			a := int64(q.B1[j])
			for k, xv := range x {
				a += int64(q.W1[j*in+k]) * int64(xv)
			}
			top = max(top, a)
		}
	}
	q.Shift = 1
	for (top+1<<(q.Shift-1))>>q.Shift > 127 {
		q.Shift++
	}
	logit := float64(float64(float64(sE*sW1)*math.Ldexp(1, q.Shift)) * sW2)
	q.B2 = toInt32(b2, logit)
	q.LogitScale = max(int64(math.Round(math.Ldexp(logit, 24))), 1)
	return q
}

// expSoft is e^x for x ≤ 0, from + - × ÷ alone (each rounded
// explicitly), so that training gives the same bits on every machine:
// e^x = 2^k·e^r with |r| ≤ ln2/2, e^r by its Taylor series.
func expSoft(x float64) float64 {
	if x < -700 {
		return 0
	}
	const ln2 = 0.6931471805599453
	k := math.Round(x / ln2)
	r := float64(x - float64(k*ln2))
	term, sum := 1.0, 1.0
	for i := 1; i <= 14; i++ {
		term = float64(term*r) / float64(i)
		sum += term
	}
	return math.Ldexp(sum, int(k))
}
