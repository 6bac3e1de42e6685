// Package logprob is the one rule by which two answers of a float model
// (a service that declares openai.tolerance) are judged the same model's
// or not, from the log-probabilities each replica gave with its answer:
// the node's gateway applies it to decide what to dispute, and the ledger
// applies it to the evidence of a service dispute, so that the two can
// never disagree (docs/ledger.md, "Service disputes").
//
// Log-probabilities are kept as exact fixed-point integers (Scale per
// nat), read from the decimal text a replica wrote, never through a
// float: every node reads the same numbers. The package is pure (the
// ledger imports it): no clock, no randomness, no goroutines.
package logprob

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Scale is the fixed-point unit: a log-probability of -1 nat is -Scale.
const Scale = 1_000_000_000

// Bounds of an answer's log-probabilities and of the evidence form.
const (
	// MaxMagnitude bounds |log-probability|: a million nats (servers
	// write -9999 for a token they mask).
	MaxMagnitude = 1_000_000 * Scale
	// MaxNumberLen is the longest decimal text ParseDecimal reads.
	MaxNumberLen = 64
	// MaxChoices is the most choices an answer holds.
	MaxChoices = 128
	// MaxTokens is the most tokens of all choices of one answer.
	MaxTokens = 1 << 16
	// MaxTop is the most alternatives kept per token.
	MaxTop = 20
	// MaxEvidence is the longest evidence (Encode's form) DecodeEvidence
	// reads: what a dispute may carry per answer.
	MaxEvidence = 64 << 10
)

// Alt is an alternative a replica rated at one position (top_logprobs).
type Alt struct {
	Token   string `json:"t"`
	Logprob int64  `json:"lp"`
}

// Token is one generated token, its log-probability and the
// alternatives the replica rated there (its own choice usually among
// them).
type Token struct {
	Token   string `json:"t"`
	Logprob int64  `json:"lp"`
	Top     []Alt  `json:"top,omitempty"`
}

// Choice is one choice of an answer: its index, text, finish reason and
// tokens (none when the replica gave no log-probabilities).
type Choice struct {
	Index  uint64  `json:"i"`
	Text   string  `json:"text"`
	Finish string  `json:"finish,omitempty"`
	Tokens []Token `json:"tokens,omitempty"`
}

// Answer is what a receipt binds of an answer: its choices in index
// order.
type Answer struct {
	Choices []Choice `json:"choices"`
}

// ParseDecimal reads a JSON number (e.g. "-0.0123", "-1.5e-05", "-9999")
// as an exact fixed-point log-probability: the decimal value times Scale,
// truncated toward zero, and held to ±MaxMagnitude (a server that writes
// -3.4e38 for a masked token means "impossible", as one that writes -9999
// does). It refuses text that is not a JSON number or is longer than
// MaxNumberLen.
func ParseDecimal(s string) (int64, error) {
	if len(s) == 0 || len(s) > MaxNumberLen {
		return 0, fmt.Errorf("logprob: a number of %d characters, want 1 to %d", len(s), MaxNumberLen)
	}
	bad := func() (int64, error) { return 0, fmt.Errorf("logprob: %q is not a JSON number", s) }
	i, neg := 0, false
	if s[0] == '-' {
		neg, i = true, 1
	}
	var digits []byte // the mantissa's digits, integer and fraction
	start := i
	for i < len(s) && isDigit(s[i]) {
		digits = append(digits, s[i])
		i++
	}
	if n := i - start; n == 0 || (n > 1 && s[start] == '0') {
		return bad()
	}
	frac := 0
	if i < len(s) && s[i] == '.' {
		i++
		fs := i
		for i < len(s) && isDigit(s[i]) {
			digits = append(digits, s[i])
			i++
		}
		if frac = i - fs; frac == 0 {
			return bad()
		}
	}
	exp := 0
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		eneg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			eneg = s[i] == '-'
			i++
		}
		es := i
		for i < len(s) && isDigit(s[i]) {
			if exp < 1_000 { // |exponent| past 1000 is 0 or too large alike
				exp = exp*10 + int(s[i]-'0')
			}
			i++
		}
		if i == es {
			return bad()
		}
		if eneg {
			exp = -exp
		}
	}
	if i != len(s) {
		return bad()
	}
	// value = digits × 10^(exp-frac); times Scale (10^9).
	shift := exp - frac + 9
	digits = bytes.TrimLeft(digits, "0")
	if shift < 0 {
		digits = digits[:max(0, len(digits)+shift)] // truncate toward zero
		shift = 0
	}
	if len(digits) == 0 {
		return 0, nil
	}
	v := int64(MaxMagnitude)
	if len(digits)+shift <= 16 { // else over 10^16 > MaxMagnitude
		v = 0
		for _, d := range digits {
			v = v*10 + int64(d-'0')
		}
		for range shift {
			v *= 10
		}
		v = min(v, MaxMagnitude)
	}
	if neg {
		v = -v
	}
	return v, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// TextHash is a receipt's response hash of a: SHA-256 over the choices in
// index order, each as its index (8 bytes), its text and its finish
// reason (each length-prefixed, 8 bytes). Log-probabilities are not in it
// (LogprobsHash is).
func (a *Answer) TextHash() [32]byte {
	h := sha256.New()
	var n [8]byte
	put := func(v uint64) { binary.BigEndian.PutUint64(n[:], v); h.Write(n[:]) }
	for _, c := range a.sorted() {
		put(c.Index)
		put(uint64(len(c.Text)))
		h.Write([]byte(c.Text))
		put(uint64(len(c.Finish)))
		h.Write([]byte(c.Finish))
	}
	return [32]byte(h.Sum(nil))
}

// logprobsDomain separates LogprobsHash from every other hash.
const logprobsDomain = "gpunet/logprobs/v1\x00"

// LogprobsHash is a receipt's hash of a's log-probabilities: zero when no
// choice has any; else SHA-256 over a domain and the choices in index
// order, each as its index and token count, each token as its text
// (length-prefixed), its fixed-point log-probability and its
// alternatives likewise.
func (a *Answer) LogprobsHash() [32]byte {
	if !a.HasLogprobs() {
		return [32]byte{}
	}
	h := sha256.New()
	h.Write([]byte(logprobsDomain))
	var n [8]byte
	put := func(v uint64) { binary.BigEndian.PutUint64(n[:], v); h.Write(n[:]) }
	str := func(s string) { put(uint64(len(s))); h.Write([]byte(s)) }
	for _, c := range a.sorted() {
		put(c.Index)
		put(uint64(len(c.Tokens)))
		for _, t := range c.Tokens {
			str(t.Token)
			put(uint64(t.Logprob))
			put(uint64(len(t.Top)))
			for _, x := range t.Top {
				str(x.Token)
				put(uint64(x.Logprob))
			}
		}
	}
	return [32]byte(h.Sum(nil))
}

// HasLogprobs reports whether any choice of a carries tokens.
func (a *Answer) HasLogprobs() bool {
	return slices.ContainsFunc(a.Choices, func(c Choice) bool { return len(c.Tokens) > 0 })
}

func (a *Answer) sorted() []Choice {
	if slices.IsSortedFunc(a.Choices, byIndex) {
		return a.Choices
	}
	cs := slices.Clone(a.Choices)
	slices.SortStableFunc(cs, byIndex)
	return cs
}

func byIndex(x, y Choice) int {
	switch {
	case x.Index < y.Index:
		return -1
	case x.Index > y.Index:
		return 1
	}
	return 0
}

// Encode is a's evidence form: compact JSON of its choices in index
// order, log-probabilities as integers (Scale per nat).
func (a *Answer) Encode() []byte {
	b, err := json.Marshal(Answer{Choices: a.sorted()})
	if err != nil {
		panic(err) // strings and integers only
	}
	return b
}

// ErrEvidence is wrapped by every error of DecodeEvidence.
var ErrEvidence = errors.New("logprob: bad evidence")

// DecodeEvidence reads an answer in Encode's form, at most MaxEvidence
// bytes: one JSON object, no unknown field, choices in strictly
// increasing index order, at most MaxChoices of them, MaxTokens tokens in
// all and MaxTop alternatives per token, every log-probability within
// ±MaxMagnitude.
func DecodeEvidence(b []byte) (*Answer, error) {
	if len(b) > MaxEvidence {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrEvidence, len(b), MaxEvidence)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var a Answer
	if err := d.Decode(&a); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrEvidence, err)
	}
	if d.More() {
		return nil, fmt.Errorf("%w: more than one JSON value", ErrEvidence)
	}
	if err := a.Check(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrEvidence, err)
	}
	if !slices.IsSortedFunc(a.Choices, byIndex) {
		return nil, fmt.Errorf("%w: choices not in index order", ErrEvidence)
	}
	for i := 1; i < len(a.Choices); i++ {
		if a.Choices[i].Index == a.Choices[i-1].Index {
			return nil, fmt.Errorf("%w: choice %d given twice", ErrEvidence, a.Choices[i].Index)
		}
	}
	return &a, nil
}

// Check checks a's bounds.
func (a *Answer) Check() error {
	if len(a.Choices) > MaxChoices {
		return fmt.Errorf("%d choices, at most %d", len(a.Choices), MaxChoices)
	}
	n := 0
	for _, c := range a.Choices {
		if n += len(c.Tokens); n > MaxTokens {
			return fmt.Errorf("more than %d tokens", MaxTokens)
		}
		for j, t := range c.Tokens {
			if len(t.Top) > MaxTop {
				return fmt.Errorf("choice %d token %d: %d alternatives, at most %d", c.Index, j, len(t.Top), MaxTop)
			}
			if !inRange(t.Logprob) {
				return fmt.Errorf("choice %d token %d: logprob %d beyond ±%d", c.Index, j, t.Logprob, int64(MaxMagnitude))
			}
			for _, x := range t.Top {
				if !inRange(x.Logprob) {
					return fmt.Errorf("choice %d token %d: an alternative's logprob %d beyond ±%d", c.Index, j, x.Logprob, int64(MaxMagnitude))
				}
			}
		}
	}
	return nil
}

func inRange(v int64) bool { return -MaxMagnitude <= v && v <= MaxMagnitude }

// Equivalent reports whether a and b can be the same model's answers on
// different hardware, within tol (fixed-point, Scale per nat). Choice by
// choice (the same indices in both):
//
//   - the same text and finish, and no log-probabilities on either side:
//     equivalent (nothing differs to be explained);
//   - else both must carry tokens. Up to the first position where the
//     tokens differ, each token's log-probabilities must be within tol;
//     at that position each side must rate the other's token, among its
//     own alternatives, within tol of its own choice: a near tie, which
//     float rounding can order either way. What follows a near tie is
//     not compared (the two continue from different tokens).
//   - tokens alike to the end of both: the texts and finish reasons must
//     be equal too.
//   - one side's tokens a strict prefix of the other's: the shorter must
//     have finished with "stop", its text be a prefix of the longer's,
//     and the longer side's own alternatives at the next position must
//     show a near tie (its choice against another within tol): the
//     shorter may have taken the end of sequence, which servers do not
//     list as a token.
//
// The rule rests on each side's evidence about the other's choice: a
// replica can write anything about its own answer, but to be equivalent
// to an honest one it must match the honest one's log-probabilities
// before any difference, and diverge only where the honest one's own
// alternatives show a near tie. It is symmetric, and not transitive.
func Equivalent(a, b *Answer, tol int64) bool {
	if a == nil || b == nil || len(a.Choices) != len(b.Choices) || tol < 0 {
		return false
	}
	ca, cb := a.sorted(), b.sorted()
	for i := range ca {
		if ca[i].Index != cb[i].Index || !choiceEquivalent(&ca[i], &cb[i], tol) {
			return false
		}
	}
	return true
}

func choiceEquivalent(x, y *Choice, tol int64) bool {
	same := x.Text == y.Text && x.Finish == y.Finish
	if len(x.Tokens) == 0 && len(y.Tokens) == 0 {
		return same
	}
	if len(x.Tokens) == 0 || len(y.Tokens) == 0 {
		return false // one side hides what the other shows
	}
	n := min(len(x.Tokens), len(y.Tokens))
	for j := range n {
		tx, ty := &x.Tokens[j], &y.Tokens[j]
		if tx.Token == ty.Token {
			if !within(tx.Logprob, ty.Logprob, tol) {
				return false
			}
			continue
		}
		return rates(tx, ty.Token, tol) && rates(ty, tx.Token, tol)
	}
	if len(x.Tokens) == len(y.Tokens) {
		return same
	}
	short, long := x, y
	if len(short.Tokens) > len(long.Tokens) {
		short, long = y, x
	}
	t := &long.Tokens[n]
	return short.Finish == "stop" && strings.HasPrefix(long.Text, short.Text) &&
		slices.ContainsFunc(t.Top, func(alt Alt) bool { return alt.Token != t.Token && within(alt.Logprob, t.Logprob, tol) })
}

// rates reports whether t's alternatives rate token within tol of t's
// own choice.
func rates(t *Token, token string, tol int64) bool {
	for _, alt := range t.Top {
		if alt.Token == token {
			return within(alt.Logprob, t.Logprob, tol)
		}
	}
	return false
}

func within(a, b, tol int64) bool {
	// |a|, |b| ≤ MaxMagnitude (checked on decoding): no overflow.
	d := a - b
	return -tol <= d && d <= tol
}

// Judge returns which of three answers is the odd one: the other two
// equivalent, and it equivalent to neither. ok is false when the three
// show no such minority (all equivalent, none, or a chain A~B~C with
// A≁C, which is not evidence against anyone).
func Judge(answers [3]*Answer, tol int64) (odd int, ok bool) {
	e01 := Equivalent(answers[0], answers[1], tol)
	e02 := Equivalent(answers[0], answers[2], tol)
	e12 := Equivalent(answers[1], answers[2], tol)
	switch {
	case e01 && !e02 && !e12:
		return 2, true
	case e02 && !e01 && !e12:
		return 1, true
	case e12 && !e01 && !e02:
		return 0, true
	}
	return 0, false
}
