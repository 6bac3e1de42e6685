package model

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestTablesRegenerate: training from corpus.txt again gives the committed
// tables byte for byte (compared uncompressed: the gzip stream may change
// with Go's compressor, the tables must not), and they load into the same
// model.
func TestTablesRegenerate(t *testing.T) {
	corpus, err := os.ReadFile("corpus.txt")
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(tablesGz))
	if err != nil {
		t.Fatal(err)
	}
	committed, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	trained := Train(string(corpus))
	if got := trained.Encode(); !bytes.Equal(got, committed) {
		t.Fatalf("training from corpus.txt gives %d bytes of tables, the committed tables.bin.gz has %d other ones: run go generate ./examples/tinylm/model", len(got), len(committed))
	}
	m := Default()
	if m.Fingerprint() != trained.Fingerprint() || !bytes.Equal(m.Encode(), committed) {
		t.Errorf("loaded: %s, trained %s", m.Fingerprint(), trained.Fingerprint())
	}
	if m.VocabSize() < 500 {
		t.Errorf("a vocabulary of %d tokens", m.VocabSize())
	}
}

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"Do not Bodies act upon Light?", []string{"Do", " not", " Bodies", " act", " upon", " Light", "?"}},
		{"fix'd Sea-Water, (cæteris paribus)", []string{"fix'd", " Sea-Water", ",", " (", "cæteris", " paribus", ")"}},
		{"a  b\n\nc ", []string{"a", " ", " b", "\n\n", "c", " "}},
		{"rays' 12´´.", []string{"rays", "'", " 12", "´", "´", "."}},
		{"", nil},
	} {
		if got := Split(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Split(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzSplit: Split loses nothing and never gives an empty token.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{"Do not Bodies act upon Light?", " \n a'b- c-'", "\xff x", "  "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		toks := Split(s)
		if got := strings.Join(toks, ""); got != s {
			t.Fatalf("Split(%q) joined is %q", s, got)
		}
		if slices.Contains(toks, "") {
			t.Fatalf("Split(%q) = %q: an empty token", s, toks)
		}
	})
}

// FuzzDecode: malformed tables are an error, never a panic.
func FuzzDecode(f *testing.F) {
	f.Add(Train("Do not Bodies act upon Light?\nAnd is not Fire a Body?").Encode())
	f.Add([]byte(magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err == nil {
			m.Generate(m.Tokenize("Light"), Options{Temperature: 1, MaxTokens: 8}).Run()
		}
	})
}

func TestTokenize(t *testing.T) {
	m := Default()
	ids := m.Tokenize("Is not light a Body? zyxw")
	want := []string{"Is", " not", " Light", " a", " Body", "?", ""}
	if len(ids) != len(want) {
		t.Fatalf("Tokenize: %d ids, want %d", len(ids), len(want))
	}
	for i, id := range ids {
		if got := m.Token(id); got != want[i] {
			t.Errorf("token %d: %q (%d), want %q", i, got, id, want[i])
		}
	}
	if ids[len(ids)-1] != Unknown {
		t.Errorf("an unseen word: id %d, want Unknown", ids[len(ids)-1])
	}
}

// TestSeeded: a seed gives the same completion every time, another seed
// (almost always) another one; temperature 0 ignores the seed; the tokens
// counted are the completion's tokens.
func TestSeeded(t *testing.T) {
	m := Default()
	prompt := m.Tokenize("Do not Bodies act upon Light")
	run := func(o Options) *Generator {
		g := m.Generate(prompt, o)
		g.Run()
		return g
	}
	a := run(Options{Temperature: 1, Seed: 7, MaxTokens: 40})
	b := run(Options{Temperature: 1, Seed: 7, MaxTokens: 40})
	if a.Text() != b.Text() || a.Text() == "" {
		t.Fatalf("seed 7 twice: %q and %q", a.Text(), b.Text())
	}
	differ := false
	for seed := uint64(8); seed < 12 && !differ; seed++ {
		differ = run(Options{Temperature: 1, Seed: seed, MaxTokens: 40}).Text() != a.Text()
	}
	if !differ {
		t.Errorf("seeds 8 to 11 all give seed 7's %q", a.Text())
	}
	g0, g1 := run(Options{Seed: 1, MaxTokens: 20}), run(Options{Seed: 2, MaxTokens: 20})
	if g0.Text() != g1.Text() {
		t.Errorf("temperature 0: %q with seed 1, %q with seed 2", g0.Text(), g1.Text())
	}
	if a.FinishReason() == FinishLength && a.Tokens() != 40 {
		t.Errorf("finished by length after %d tokens, want 40", a.Tokens())
	}
	// The tokens counted are the text's: Split of the text gives as
	// many (the first token's leading space is trimmed, not split).
	if got := len(Split(a.Text())); got != a.Tokens() {
		t.Errorf("%d tokens counted, the text %q splits into %d", a.Tokens(), a.Text(), got)
	}
}

// TestMaxTokensAndStop: MaxTokens bounds the tokens; a stop string ends
// the text before it, also when it spans tokens, and what the steps
// returned never includes any of it.
func TestMaxTokensAndStop(t *testing.T) {
	m := Default()
	prompt := m.Tokenize("Do not Bodies act upon Light")
	g := m.Generate(prompt, Options{Seed: 3, Temperature: 1, MaxTokens: 5})
	if g.Run(); g.Tokens() > 5 || g.FinishReason() == "" {
		t.Fatalf("MaxTokens 5: %d tokens, finish %q", g.Tokens(), g.FinishReason())
	}
	full := m.Generate(prompt, Options{Seed: 3, Temperature: 1, MaxTokens: 60}).Run()
	words := strings.Fields(full)
	if len(words) < 6 {
		t.Fatalf("a completion too short to test stop strings: %q", full)
	}
	stop := words[3] + " " + words[4] // spans two tokens
	at := strings.Index(full, stop)
	g = m.Generate(prompt, Options{Seed: 3, Temperature: 1, MaxTokens: 60, Stop: []string{"never in it", stop}})
	var streamed strings.Builder
	for more := true; more; {
		var s string
		s, more = g.Step()
		streamed.WriteString(s)
		if strings.Contains(streamed.String(), words[3]+" ") && !strings.Contains(full[:at], words[3]+" ") {
			t.Fatalf("a step returned the start of the stop string: %q", streamed.String())
		}
	}
	if got, want := streamed.String(), full[:at]; got != want || g.Text() != want || g.FinishReason() != FinishStop {
		t.Errorf("stop %q: streamed %q, text %q, finish %q; want %q, stop", stop, got, g.Text(), g.FinishReason(), want)
	}
}

func TestTopP(t *testing.T) {
	m := Default()
	prompt := m.Tokenize("Do not Bodies act upon Light")
	// A tiny top_p keeps only the likeliest token: the same as greedy.
	greedy := m.Generate(prompt, Options{MaxTokens: 30}).Run()
	for seed := range uint64(5) {
		if got := m.Generate(prompt, Options{Temperature: 1.5, TopP: 1e-9, Seed: seed, MaxTokens: 30}).Run(); got != greedy {
			t.Errorf("top_p 1e-9, seed %d: %q; greedy: %q", seed, got, greedy)
		}
	}
}
