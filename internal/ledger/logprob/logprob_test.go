package logprob_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/archtest"
	"github.com/gpunet/gpunet/internal/ledger/logprob"
)

// TestImportRule keeps the package importable by the ledger.
func TestImportRule(t *testing.T) {
	archtest.CheckPure(t, archtest.Purity{
		Allowed:        []string{"github.com/gpunet/gpunet/internal/ledger/logprob"},
		ForbiddenStd:   []string{"os", "net", "net/http", "math/rand", "math/rand/v2", "crypto/rand", "sync", "sync/atomic", "io/fs", "syscall", "unsafe", "time", "math"},
		ForbiddenCalls: []string{"time.Now"},
	})
}

func TestParseDecimal(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"-0", 0}, {"-1", -1e9}, {"-0.5", -5e8}, {"-0.0123", -12_300_000},
		{"-1.5e-05", -15_000}, {"-1.5E-5", -15_000}, {"-2.5e+1", -25e9}, {"-9999.0", -9999e9},
		{"-0.0000000019", -1}, // truncated toward zero
		{"-0.0000000001", 0}, {"-1e-400", 0}, {"1e6", 1e15}, {"-1000000", -1e15},
		{"-0.1234567891234567", -123_456_789},
		{"1000001", logprob.MaxMagnitude}, {"-1e7", -logprob.MaxMagnitude}, {"-3.4028234663852886e+38", -logprob.MaxMagnitude}, {"1e1000", logprob.MaxMagnitude},
	} {
		got, err := logprob.ParseDecimal(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseDecimal(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "-", "01", "1.", ".5", "1e", "1e+", "--1", "NaN", "-Infinity", "1x", " 1", "+1", strings.Repeat("1", 65)} {
		if got, err := logprob.ParseDecimal(in); err == nil {
			t.Errorf("ParseDecimal(%q) = %d, want an error", in, got)
		}
	}
}

// tok makes a token with alternatives given as token, logprob pairs (in
// thousandths of a nat).
func tok(s string, milli int64, top ...any) logprob.Token {
	t := logprob.Token{Token: s, Logprob: milli * 1e6}
	for i := 0; i < len(top); i += 2 {
		t.Top = append(t.Top, logprob.Alt{Token: top[i].(string), Logprob: int64(top[i+1].(int)) * 1e6})
	}
	return t
}

func ans(text, finish string, toks ...logprob.Token) *logprob.Answer {
	return &logprob.Answer{Choices: []logprob.Choice{{Index: 0, Text: text, Finish: finish, Tokens: toks}}}
}

const tol = 10 * 1e6 // 0.01 nats

func TestEquivalent(t *testing.T) {
	honest := ans("Hi there", "stop", tok("Hi", -100, "Hi", -100, "Hello", -2500), tok(" there", -700, " there", -700, " you", -702))
	for _, tc := range []struct {
		name string
		b    *logprob.Answer
		want bool
	}{
		{"itself", honest, true},
		{"low bits differ", ans("Hi there", "stop", tok("Hi", -104, "Hi", -104, "Hello", -2490), tok(" there", -695, " there", -695, " you", -705)), true},
		{"near tie taken the other way", ans("Hi you", "stop", tok("Hi", -101, "Hi", -101, "Hello", -2500), tok(" you", -698, " you", -698, " there", -703)), true},
		{"logprobs differ before the difference", ans("Hi there", "stop", tok("Hi", -300, "Hi", -300), tok(" there", -700, " there", -700, " you", -702)), false},
		{"a clear leader overridden", ans("Hello there", "stop", tok("Hello", -100, "Hello", -100, "Hi", -105), tok(" there", -700)), false},
		{"the other side claims a tie the honest side does not show", ans("Hi yo", "stop", tok("Hi", -100, "Hi", -100), tok(" yo", -700, " yo", -700, " there", -700)), false},
		{"no logprobs, other text", ans("Hi you", "stop"), false},
		{"no logprobs, same text", ans("Hi there", "stop"), false},
		{"stops early where only another token nearly ties", ans("Hi", "stop", tok("Hi", -100, "Hi", -100, "Hello", -2500)), true},
		{"same tokens, other text", ans("HI THERE", "stop", honest.Choices[0].Tokens...), false},
		{"same tokens, other finish", ans("Hi there", "length", honest.Choices[0].Tokens...), false},
		{"another choice index", &logprob.Answer{Choices: []logprob.Choice{{Index: 1, Text: "Hi there", Finish: "stop", Tokens: honest.Choices[0].Tokens}}}, false},
	} {
		if got := logprob.Equivalent(honest, tc.b, tol); got != tc.want {
			t.Errorf("%s: Equivalent = %v, want %v", tc.name, got, tc.want)
		}
		if got := logprob.Equivalent(tc.b, honest, tol); got != tc.want {
			t.Errorf("%s (swapped): Equivalent = %v, want %v", tc.name, got, tc.want)
		}
	}
	// Stopping early is a near tie only where the longer answer's own
	// alternatives show one at the next position.
	long := ans("Hi there", "stop", tok("Hi", -100, "Hi", -100), tok(" there", -690, " there", -690, "<eos>", -695))
	if !logprob.Equivalent(ans("Hi", "stop", tok("Hi", -100, "Hi", -100)), long, tol) {
		t.Error("an early stop at a near tie the longer answer shows: not equivalent")
	}
	clear := ans("Hi there", "stop", tok("Hi", -100, "Hi", -100), tok(" there", -10, " there", -10, "<eos>", -5000))
	if logprob.Equivalent(ans("Hi", "stop", tok("Hi", -100, "Hi", -100)), clear, tol) {
		t.Error("an early stop where the longer answer shows a clear leader: equivalent")
	}
	if logprob.Equivalent(ans("Hi", "length", tok("Hi", -100, "Hi", -100)), long, tol) {
		t.Error("an answer cut by length at a near tie: equivalent")
	}
	if logprob.Equivalent(ans("Ho", "stop", tok("Hi", -100, "Hi", -100)), long, tol) {
		t.Error("an early stop whose text is no prefix: equivalent")
	}
	// No logprobs, same text on both sides: nothing to explain.
	if !logprob.Equivalent(ans("x", "stop"), ans("x", "stop"), tol) {
		t.Error("two equal answers without logprobs: not equivalent")
	}
}

func TestJudge(t *testing.T) {
	a := ans("Hi there", "stop", tok("Hi", -100, "Hi", -100), tok(" there", -700, " there", -700, " you", -702))
	b := ans("Hi you", "stop", tok("Hi", -101, "Hi", -101), tok(" you", -699, " you", -699, " there", -703))
	c := ans("Bye", "stop", tok("Bye", -50, "Bye", -50, "Hi", -3000))
	for _, tc := range []struct {
		in     [3]*logprob.Answer
		odd    int
		wantOK bool
	}{
		{[3]*logprob.Answer{a, b, c}, 2, true},
		{[3]*logprob.Answer{c, a, b}, 0, true},
		{[3]*logprob.Answer{a, c, b}, 1, true},
		{[3]*logprob.Answer{a, b, a}, 0, false},
		{[3]*logprob.Answer{a, c, c}, 0, true},
		{[3]*logprob.Answer{a, c, ans("Other", "stop", tok("Other", -10))}, 0, false},
	} {
		odd, ok := logprob.Judge(tc.in, tol)
		if ok != tc.wantOK || (ok && odd != tc.odd) {
			t.Errorf("Judge = %d, %v; want %d, %v", odd, ok, tc.odd, tc.wantOK)
		}
	}
}

func TestEvidenceRoundTrip(t *testing.T) {
	a := &logprob.Answer{Choices: []logprob.Choice{
		{Index: 1, Text: "b", Finish: "stop"},
		{Index: 0, Text: "a\u00e9", Finish: "length", Tokens: []logprob.Token{tok("a", -1, "a", -1, "b", -2)}},
	}}
	enc := a.Encode()
	got, err := logprob.DecodeEvidence(enc)
	if err != nil {
		t.Fatal(err)
	}
	if got.TextHash() != a.TextHash() || got.LogprobsHash() != a.LogprobsHash() || !bytes.Equal(got.Encode(), enc) {
		t.Errorf("decoded %s, hashes differ from the encoded answer's", got.Encode())
	}
	if (&logprob.Answer{Choices: []logprob.Choice{{Text: "x"}}}).LogprobsHash() != [32]byte{} {
		t.Error("an answer without logprobs has a nonzero logprobs hash")
	}
	for _, bad := range []string{
		`{"choices":[]} {}`,
		`{"choices":[{"i":1,"text":""},{"i":0,"text":""}]}`,
		`{"choices":[{"i":0,"text":""},{"i":0,"text":""}]}`,
		`{"choices":[],"extra":1}`,
		`{"choices":[{"i":0,"text":"","tokens":[{"t":"a","lp":-1000000000000001}]}]}`,
		`{"choices":[{"i":0,"text":"","tokens":[{"t":"a","lp":-1.5}]}]}`,
		`{"choices":[{"i":0,"text":"` + strings.Repeat("x", logprob.MaxEvidence) + `"}]}`,
	} {
		if _, err := logprob.DecodeEvidence([]byte(bad)); !errors.Is(err, logprob.ErrEvidence) {
			t.Errorf("DecodeEvidence(%.60s) = %v, want ErrEvidence", bad, err)
		}
	}
}

// FuzzEquivalent: decoding is bounded and never panics; Equivalent is
// symmetric and reflexive on answers whose every choice carries tokens;
// Judge names an odd one only when the other two are equivalent and it is
// equivalent to neither.
func FuzzEquivalent(f *testing.F) {
	a := ans("Hi there", "stop", tok("Hi", -100, "Hi", -100), tok(" there", -700, " there", -700, " you", -702))
	b := ans("Hi you", "stop", tok("Hi", -101, "Hi", -101), tok(" you", -699, " you", -699, " there", -703))
	c := ans("Hi", "stop", tok("Hi", -101, "Hi", -101))
	f.Add(a.Encode(), b.Encode(), c.Encode(), int64(tol))
	f.Add(a.Encode(), a.Encode(), b.Encode(), int64(0))
	f.Add([]byte(`{"choices":[{"i":0,"text":"x"}]}`), c.Encode(), []byte("{}"), int64(1))
	f.Fuzz(func(t *testing.T, x, y, z []byte, tol int64) {
		var in [3]*logprob.Answer
		for i, raw := range [][]byte{x, y, z} {
			a, err := logprob.DecodeEvidence(raw)
			if err != nil {
				return
			}
			if b, err := logprob.DecodeEvidence(a.Encode()); err != nil || b.LogprobsHash() != a.LogprobsHash() || b.TextHash() != a.TextHash() {
				t.Fatalf("re-encoded evidence: %v", err)
			}
			in[i] = a
		}
		if logprob.Equivalent(in[0], in[1], tol) != logprob.Equivalent(in[1], in[0], tol) {
			t.Fatal("Equivalent is not symmetric")
		}
		if tol >= 0 && !logprob.Equivalent(in[0], in[0], tol) {
			t.Fatal("an answer is not equivalent to itself")
		}
		if odd, ok := logprob.Judge(in, tol); ok {
			p, q := in[(odd+1)%3], in[(odd+2)%3]
			if !logprob.Equivalent(p, q, tol) || logprob.Equivalent(in[odd], p, tol) || logprob.Equivalent(in[odd], q, tol) {
				t.Fatalf("Judge named %d odd without the evidence for it", odd)
			}
		}
	})
}

// FuzzParseDecimal: ParseDecimal agrees with exact rational arithmetic
// (math/big) on every JSON number of at most MaxNumberLen characters: the
// value times Scale, truncated toward zero, held to ±MaxMagnitude; and
// refuses everything else.
func FuzzParseDecimal(f *testing.F) {
	for _, s := range []string{"-0.5", "-1.5e-05", "0", "-9999.0", "1e6", "-0.0000000019", "12345678901234567890", "1E+2", "-0e-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := logprob.ParseDecimal(s)
		valid := json.Valid([]byte(s)) && len(s) <= logprob.MaxNumberLen && len(s) > 0 && strings.IndexFunc(s, func(r rune) bool { return !strings.ContainsRune("-+.eE0123456789", r) }) < 0 && s[0] != '+'
		if !valid {
			if err == nil {
				t.Fatalf("ParseDecimal(%q) = %d, want an error", s, got)
			}
			return
		}
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			// An exponent too large for big.Rat: 0 or held to the bound.
			if err != nil || (got != 0 && got != logprob.MaxMagnitude && got != -logprob.MaxMagnitude) {
				t.Fatalf("ParseDecimal(%q) = %d, %v; want 0 or ±MaxMagnitude", s, got, err)
			}
			return
		}
		r.Mul(r, big.NewRat(logprob.Scale, 1))
		want := new(big.Int).Quo(r.Num(), r.Denom()) // truncates toward zero
		if want.CmpAbs(big.NewInt(logprob.MaxMagnitude)) > 0 {
			want.SetInt64(int64(want.Sign()) * logprob.MaxMagnitude)
		}
		if err != nil || got != want.Int64() {
			t.Fatalf("ParseDecimal(%q) = %d, %v; want %s", s, got, err, want)
		}
	})
}

// BenchmarkDisputeEvidence: what the ledger does with a dispute's answers
// at the largest evidence (three answers near MaxEvidence: decoding,
// hashing and judging), against the baseline every dispute pays (three
// ed25519 signature checks), in the same run.
func BenchmarkDisputeEvidence(b *testing.B) {
	mk := func(second string) []byte {
		var toks []logprob.Token
		for i := range 380 {
			t := logprob.Token{Token: fmt.Sprintf("t%d", i), Logprob: -int64(i) * 1000}
			if i == 200 {
				t.Token = second
			}
			for j := range 5 {
				t.Top = append(t.Top, logprob.Alt{Token: fmt.Sprintf("a%d", j), Logprob: -int64(j) * 1e8})
			}
			toks = append(toks, t)
		}
		return (&logprob.Answer{Choices: []logprob.Choice{{Text: strings.Repeat("w", 4000), Finish: "stop", Tokens: toks}}}).Encode()
	}
	ev := [3][]byte{mk("x"), mk("x"), mk("y")}
	b.Logf("evidence: %d bytes per answer", len(ev[0]))
	pub, priv, _ := ed25519.GenerateKey(nil)
	msg := make([]byte, 300)
	sig := ed25519.Sign(priv, msg)
	b.Run("signatures", func(b *testing.B) {
		for b.Loop() {
			for range 3 {
				if !ed25519.Verify(pub, msg, sig) {
					b.Fatal("bad signature")
				}
			}
		}
	})
	b.Run("answers", func(b *testing.B) {
		for b.Loop() {
			var in [3]*logprob.Answer
			for i, raw := range ev {
				a, err := logprob.DecodeEvidence(raw)
				if err != nil {
					b.Fatal(err)
				}
				a.TextHash()
				a.LogprobsHash()
				in[i] = a
			}
			if _, ok := logprob.Judge(in, 1e7); !ok {
				b.Fatal("no minority")
			}
		}
	})
}
