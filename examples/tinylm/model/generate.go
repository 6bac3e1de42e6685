package model

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"unicode"
)

// DefaultMaxTokens is a completion's length when Options.MaxTokens is 0.
const DefaultMaxTokens = 64

// The weight of the trigram's counts when the two-token context was seen
// (the bigram's have the rest): a little of the bigram lets a completion
// leave the corpus's sentences now and then.
const triWeight = 0.85

// Options say how a completion is sampled.
type Options struct {
	// Temperature flattens (above 1) or sharpens (below 1) the model's
	// distribution of the next token; 0 always takes the likeliest one.
	Temperature float64
	// TopP, in (0, 1), samples from the smallest set of the likeliest
	// tokens whose probabilities add up to TopP (nucleus sampling); 0 or
	// 1 from all of them.
	TopP float64
	// MaxTokens bounds the completion's tokens (0: DefaultMaxTokens).
	MaxTokens int
	// Stop ends the completion before the first of these strings it
	// would contain; the text returned never contains one.
	Stop []string
	// Seed seeds the sampling: the same seed, prompt and options give the
	// same completion.
	Seed uint64
}

// Finish reasons, as OpenAI names them.
const (
	FinishStop   = "stop"   // the model ended its paragraph, or a stop string came
	FinishLength = "length" // MaxTokens were generated
)

// A Generator samples a completion one token at a time (Step). It is not
// safe for concurrent use.
type Generator struct {
	vocab  []string
	src    tokenSource
	o      Options
	err    error
	out    strings.Builder
	sent   int // bytes of out that Step has returned
	tokens int
	finish string
}

// Generate starts a completion of prompt (token ids, as Tokenize gives
// them; its last two tokens are the context of the first token).
func (m *Model) Generate(prompt []int32, o Options) *Generator {
	src := &trigramSource{m: m, o: o, rng: newRNG(o.Seed), a: End, b: End}
	if n := len(prompt); n >= 2 {
		src.a, src.b = prompt[n-2], prompt[n-1]
	} else if n == 1 {
		src.b = prompt[0]
	}
	return newGenerator(m.vocab, src, o)
}

// A tokenSource is a model's side of a Generator: it chooses each next
// token (never End when notEnd) and takes it as the context of the next.
type tokenSource interface {
	next(notEnd bool) (int32, error)
}

func newGenerator(vocab []string, src tokenSource, o Options) *Generator {
	if o.MaxTokens <= 0 {
		o.MaxTokens = DefaultMaxTokens
	}
	o.Stop = slices.DeleteFunc(slices.Clone(o.Stop), func(s string) bool { return s == "" })
	return &Generator{vocab: vocab, src: src, o: o}
}

// newRNG is the sampling's random source for seed, the same for every
// model.
func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x7469_6e79_6c6d)) }

// trigramSource samples the trigram model's tokens.
type trigramSource struct {
	m    *Model
	o    Options
	rng  *rand.Rand
	a, b int32 // the last two tokens: the next one's context
}

func (s *trigramSource) next(notEnd bool) (int32, error) {
	tok := s.pick(s.m.candidates(s.a, s.b, notEnd))
	s.a, s.b = s.b, tok
	return tok, nil
}

// Step generates one token and returns the completion's text that it made
// final (empty while it could still be the start of a stop string), and
// whether there is more to generate. The completion's text is what the
// steps returned, one after the other.
func (g *Generator) Step() (text string, more bool) {
	if g.finish != "" {
		return "", false
	}
	tok, err := g.src.next(g.tokens == 0)
	if err != nil {
		g.err = err
		return g.end(FinishStop, g.sent), false
	}
	if tok == End {
		return g.end(FinishStop, g.out.Len()), false
	}
	g.tokens++
	t := g.vocab[tok]
	if g.out.Len() == 0 {
		t = strings.TrimLeftFunc(t, unicode.IsSpace) // an answer starts with its word
	}
	g.out.WriteString(t)
	all := g.out.String()
	if i := g.firstStop(all[g.sent:]); i >= 0 {
		return g.end(FinishStop, g.sent+i), false
	}
	if g.tokens >= g.o.MaxTokens {
		return g.end(FinishLength, len(all)), false
	}
	safe := len(all) - g.heldBack(all[g.sent:])
	text, g.sent = all[g.sent:safe], safe
	return text, true
}

// end finishes with reason, the completion's text being out[:at].
func (g *Generator) end(reason string, at int) string {
	g.finish = reason
	all := g.out.String()
	text := all[g.sent:at]
	g.out.Reset()
	g.out.WriteString(all[:at])
	g.sent = at
	return text
}

// Run steps to the end and returns the whole completion.
func (g *Generator) Run() string {
	for more := true; more; {
		_, more = g.Step()
	}
	return g.Text()
}

// Text is the completion's text so far (what Step returned).
func (g *Generator) Text() string { return g.out.String()[:g.sent] }

// Tokens is the number of tokens generated (the one that ended the
// paragraph not counted).
func (g *Generator) Tokens() int { return g.tokens }

// Err is why the model could not go on (its GEMM failed), which ended
// the completion early; nil when it ended normally.
func (g *Generator) Err() error { return g.err }

// FinishReason is FinishStop or FinishLength once Step returned false,
// else "".
func (g *Generator) FinishReason() string { return g.finish }

// firstStop is where in s the first stop string starts, or -1.
func (g *Generator) firstStop(s string) int {
	first := -1
	for _, stop := range g.o.Stop {
		if i := strings.Index(s, stop); i >= 0 && (first < 0 || i < first) {
			first = i
		}
	}
	return first
}

// heldBack is the length of the longest end of s that starts a stop
// string: those bytes wait for the next token.
func (g *Generator) heldBack(s string) int {
	held := 0
	for _, stop := range g.o.Stop {
		for k := min(len(stop)-1, len(s)); k > held; k-- {
			if strings.HasSuffix(s, stop[:k]) {
				held = k
				break
			}
		}
	}
	return held
}

// cand is a possible next token and its probability.
type cand struct {
	tok int32
	p   float64
}

// candidates is the distribution of the token after a b (either may be
// Unknown): the trigram's counts mixed with the bigram's when a b was
// seen, else the bigram's after b, else those that start a paragraph.
// notEnd leaves End out (a completion's first token).
func (m *Model) candidates(a, b int32, notEnd bool) []cand {
	var tri, bi []next
	if a >= 0 && b >= 0 {
		tri = m.tri[[2]int32{a, b}]
	}
	if b >= 0 {
		bi = m.bi[b]
	}
	if notEnd {
		tri, bi = dropEnd(tri), dropEnd(bi)
	}
	var cs []cand
	switch {
	case len(tri) > 0 && len(bi) > 0:
		cs = mix(tri, triWeight, bi, 1-triWeight)
	case len(bi) > 0:
		cs = mix(bi, 1, nil, 0)
	default:
		cs = mix(dropEnd(m.tri[[2]int32{End, End}]), 1, nil, 0)
	}
	return cs
}

func dropEnd(ns []next) []next {
	if len(ns) > 0 && ns[0].tok == End {
		return ns[1:] // sorted by token: End (0) comes first
	}
	return ns
}

// mix is w1 of x's distribution plus w2 of y's, sorted by token.
func mix(x []next, w1 float64, y []next, w2 float64) []cand {
	total := func(ns []next) float64 {
		t := 0.0
		for _, n := range ns {
			t += float64(n.n)
		}
		return t
	}
	tx, ty := total(x), total(y)
	var cs []cand
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case j == len(y) || i < len(x) && x[i].tok < y[j].tok:
			cs = append(cs, cand{x[i].tok, w1 * float64(x[i].n) / tx})
			i++
		case i == len(x) || y[j].tok < x[i].tok:
			cs = append(cs, cand{y[j].tok, w2 * float64(y[j].n) / ty})
			j++
		default:
			cs = append(cs, cand{x[i].tok, w1*float64(x[i].n)/tx + w2*float64(y[j].n)/ty})
			i++
			j++
		}
	}
	return cs
}

// pick samples one of cs (sorted by token) with the options' temperature
// and top_p.
func (g *trigramSource) pick(cs []cand) int32 {
	if len(cs) == 0 {
		return End // tables that never start a paragraph
	}
	best := 0
	for i, c := range cs {
		if c.p > cs[best].p {
			best = i
		}
	}
	if g.o.Temperature <= 0 || len(cs) == 1 {
		return cs[best].tok
	}
	// p^(1/T), relative to the likeliest so that a small T cannot
	// underflow every weight to 0.
	logMax := math.Log(cs[best].p)
	w := make([]cand, len(cs))
	for i, c := range cs {
		w[i] = cand{c.tok, math.Exp((math.Log(c.p) - logMax) / g.o.Temperature)}
	}
	slices.SortStableFunc(w, func(x, y cand) int { return cmp.Compare(y.p, x.p) })
	total := 0.0
	for _, c := range w {
		total += c.p
	}
	if g.o.TopP > 0 && g.o.TopP < 1 {
		kept, sum := 0, 0.0
		for kept < len(w) && sum < g.o.TopP*total {
			sum += w[kept].p
			kept++
		}
		w, total = w[:kept], sum
	}
	r := g.rng.Float64() * total
	for _, c := range w {
		if r < c.p {
			return c.tok
		}
		r -= c.p
	}
	return w[len(w)-1].tok
}
