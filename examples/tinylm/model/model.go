// Package model is tinylm's language model: a word-level trigram model
// (Markov chain) over the model's own tokens (Split), trained from
// corpus.txt, a public-domain passage: Queries 1 to 24 of Isaac Newton's
// Opticks (4th edition, 1730), as the Go distribution ships it in
// $GOROOT/src/testdata/Isaac.Newton-Opticks.txt (Project Gutenberg's
// text), one paragraph a line, the italics' underscores and the queries'
// numbers taken out.
//
// The trained tables are committed (tables.bin.gz, embedded), so that the
// server needs nothing at run time; `go generate` trains them again, and a
// test checks that this gives the same bytes.
//
// Sampling is seeded: the same tables, prompt and Options give the same
// tokens on every machine (math/rand/v2's PCG, and no map iteration).
package model

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

//go:generate go run ./train -corpus corpus.txt -out tables.bin.gz

//go:embed tables.bin.gz
var tablesGz []byte

// End is the token that ends a paragraph (and, as context, starts one).
const End = 0

// Unknown is what Encode gives a token the model has never seen.
const Unknown = -1

// magic starts the tables' encoding.
const magic = "tinylm tables 1\n"

// Model is a trained trigram model. It is immutable: safe for concurrent
// use.
type Model struct {
	vocab []string         // token id → text; vocab[End] is ""
	ids   map[string]int32 // text → token id
	// bi[b] are the tokens seen after b, tri[{a,b}] after a b; each
	// sorted by token id.
	bi  [][]next
	tri map[[2]int32][]next
	// fingerprint identifies the tables (OpenAI's system_fingerprint).
	fingerprint string
}

type next struct {
	tok int32
	n   uint32
}

// Default is the model trained from corpus.txt (the embedded tables).
func Default() *Model {
	m, err := Load(bytes.NewReader(tablesGz))
	if err != nil {
		panic("tinylm: the embedded tables: " + err.Error())
	}
	return m
}

// Train builds a model from text: each non-empty line is a paragraph,
// which starts and ends with End.
func Train(text string) *Model {
	var paras [][]string
	words := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		toks := Split(strings.TrimSpace(line))
		paras = append(paras, toks)
		for _, t := range toks {
			words[t] = true
		}
	}
	// Ids in the words' sorted order after End, so that an id does not
	// depend on where in the corpus its word first appears.
	vocab := append([]string{""}, slices.Sorted(func(yield func(string) bool) {
		for w := range words {
			if !yield(w) {
				return
			}
		}
	})...)
	m := &Model{vocab: vocab}
	m.index()
	bi := map[[2]int32]uint32{}
	tri := map[[3]int32]uint32{}
	for _, toks := range paras {
		seq := []int32{End, End}
		for _, t := range toks {
			seq = append(seq, m.ids[t])
		}
		seq = append(seq, End)
		for i := 2; i < len(seq); i++ {
			bi[[2]int32{seq[i-1], seq[i]}]++
			tri[[3]int32{seq[i-2], seq[i-1], seq[i]}]++
		}
	}
	m.bi = make([][]next, len(vocab))
	for k, n := range bi {
		m.bi[k[0]] = append(m.bi[k[0]], next{k[1], n})
	}
	m.tri = map[[2]int32][]next{}
	for k, n := range tri {
		ctx := [2]int32{k[0], k[1]}
		m.tri[ctx] = append(m.tri[ctx], next{k[2], n})
	}
	byTok := func(a, b next) int { return cmp.Compare(a.tok, b.tok) }
	for _, ns := range m.bi {
		slices.SortFunc(ns, byTok)
	}
	for _, ns := range m.tri {
		slices.SortFunc(ns, byTok)
	}
	m.fingerprint = fingerprint(m.Encode())
	return m
}

func (m *Model) index() {
	m.ids = make(map[string]int32, len(m.vocab))
	for i, w := range m.vocab {
		m.ids[w] = int32(i)
	}
}

func fingerprint(tables []byte) string {
	h := sha256.Sum256(tables)
	return fmt.Sprintf("tinylm_%x", h[:6])
}

// Fingerprint identifies the model's tables: two models with the same
// fingerprint give the same completions.
func (m *Model) Fingerprint() string { return m.fingerprint }

// VocabSize is the number of tokens the model knows, End included.
func (m *Model) VocabSize() int { return len(m.vocab) }

// Encode writes the model's tables in their binary form (uncompressed):
// the magic, the vocabulary, then the bigrams and trigrams with their
// counts, all as uvarints, in token order.
func (m *Model) Encode() []byte {
	var b []byte
	b = append(b, magic...)
	b = binary.AppendUvarint(b, uint64(len(m.vocab)))
	for _, w := range m.vocab {
		b = binary.AppendUvarint(b, uint64(len(w)))
		b = append(b, w...)
	}
	appendNexts := func(ns []next) {
		b = binary.AppendUvarint(b, uint64(len(ns)))
		prev := int32(0)
		for _, n := range ns {
			b = binary.AppendUvarint(b, uint64(n.tok-prev))
			b = binary.AppendUvarint(b, uint64(n.n))
			prev = n.tok
		}
	}
	for _, ns := range m.bi {
		appendNexts(ns)
	}
	ctxs := slices.SortedFunc(func(yield func([2]int32) bool) {
		for c := range m.tri {
			if !yield(c) {
				return
			}
		}
	}, func(a, b [2]int32) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	b = binary.AppendUvarint(b, uint64(len(ctxs)))
	for _, c := range ctxs {
		b = binary.AppendUvarint(b, uint64(c[0]))
		b = binary.AppendUvarint(b, uint64(c[1]))
		appendNexts(m.tri[c])
	}
	return b
}

// WriteGzip writes Encode's bytes gzipped (no name, no time in the
// header).
func (m *Model) WriteGzip(w io.Writer) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(m.Encode()); err != nil {
		return err
	}
	return zw.Close()
}

// Load reads tables written by WriteGzip.
func Load(r io.Reader) (*Model, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(io.LimitReader(zr, 64<<20))
	if err != nil {
		return nil, err
	}
	return Decode(raw)
}

var errTables = errors.New("malformed tables")

// Decode reads Encode's bytes.
func Decode(raw []byte) (*Model, error) {
	d := decoder{b: raw}
	if !bytes.HasPrefix(raw, []byte(magic)) {
		return nil, fmt.Errorf("%w: no %q at the start", errTables, strings.TrimSpace(magic))
	}
	d.b = d.b[len(magic):]
	nv := d.uvarint(1 << 24)
	m := &Model{vocab: make([]string, 0, min(nv, uint64(len(raw))))}
	for range nv {
		n := d.uvarint(1 << 16)
		m.vocab = append(m.vocab, string(d.bytes(n)))
	}
	nexts := func() []next {
		k := d.uvarint(nv)
		ns := make([]next, 0, min(k, uint64(len(d.b))))
		tok := uint64(0)
		for i := range k {
			delta := d.uvarint(nv)
			tok += delta
			n := d.uvarint(1 << 32)
			// Sorted by token, each once, each counted.
			if tok >= nv || i > 0 && delta == 0 || n == 0 || n >= 1<<32 {
				d.err = errTables
			}
			ns = append(ns, next{int32(tok), uint32(n)})
			if d.err != nil {
				return nil
			}
		}
		return ns
	}
	m.bi = make([][]next, 0, min(nv, uint64(len(raw))))
	for range nv {
		m.bi = append(m.bi, nexts())
	}
	nc := d.uvarint(1 << 32)
	m.tri = map[[2]int32][]next{}
	for range nc {
		a, b := d.uvarint(nv), d.uvarint(nv)
		if a >= nv || b >= nv {
			d.err = errTables
		}
		m.tri[[2]int32{int32(a), int32(b)}] = nexts()
		if d.err != nil {
			break
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d bytes after the trigrams", errTables, len(d.b))
	}
	if d.err == nil && (nv == 0 || m.vocab[End] != "") {
		d.err = fmt.Errorf("%w: token 0 is not End", errTables)
	}
	if d.err != nil {
		return nil, d.err
	}
	m.index()
	m.fingerprint = fingerprint(raw)
	return m, nil
}

type decoder struct {
	b   []byte
	err error
}

// uvarint reads a uvarint of at most max.
func (d *decoder) uvarint(max uint64) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || v > max {
		d.err = errTables
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = errTables
		return nil
	}
	b := d.b[:n]
	d.b = d.b[n:]
	return b
}

// Tokenize splits text (Split) and gives each token's id: Unknown for a
// token the model has not seen, even with its first letter's case
// changed ("light" is "Light" when only that was seen).
func (m *Model) Tokenize(text string) []int32 {
	toks := Split(text)
	ids := make([]int32, len(toks))
	for i, t := range toks {
		ids[i] = m.id(t)
	}
	return ids
}

func (m *Model) id(t string) int32 { return lookupID(m.ids, t) }

// lookupID is t's id in ids, or that of t with its first letter's case
// changed, or Unknown.
func lookupID(ids map[string]int32, t string) int32 {
	if id, ok := ids[t]; ok && t != "" {
		return id
	}
	lead := ""
	if strings.HasPrefix(t, " ") {
		lead, t = " ", t[1:]
	}
	if t == "" {
		return Unknown
	}
	r, size := utf8.DecodeRuneInString(t)
	for _, f := range []func(rune) rune{unicode.ToUpper, unicode.ToLower} {
		if alt := lead + string(f(r)) + t[size:]; alt != lead+t {
			if id, ok := ids[alt]; ok {
				return id
			}
		}
	}
	return Unknown
}

// Token is a token's text ("" for End and Unknown).
func (m *Model) Token(id int32) string {
	if id < 0 || int(id) >= len(m.vocab) {
		return ""
	}
	return m.vocab[id]
}
