package compare

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
)

// MaxToken is the longest token Text reads: a number is far shorter, and a
// longer word is a difference unless the files are byte for byte equal.
const MaxToken = 4096

type tokKind int

const (
	tokEOF tokKind = iota
	tokLine
	tokWord
	tokNumber
	tokTooLong
)

type token struct {
	kind tokKind
	text []byte
	num  float64
}

// tokenizer splits text into words at white space and commas, and reports
// each line break as a token of its own, so that rows must line up.
type tokenizer struct {
	r    *bufio.Reader
	buf  []byte
	line int
}

func isSep(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\v', '\f', ',':
		return true
	}
	return false
}

func (z *tokenizer) next() token {
	for {
		c, err := z.r.ReadByte()
		if err != nil {
			return token{kind: tokEOF}
		}
		if c == '\n' {
			z.line++
			return token{kind: tokLine}
		}
		if isSep(c) {
			continue
		}
		z.buf = append(z.buf[:0], c)
		for {
			c, err := z.r.ReadByte()
			if err != nil {
				break
			}
			if c == '\n' || isSep(c) {
				z.r.UnreadByte()
				break
			}
			if len(z.buf) == MaxToken {
				return token{kind: tokTooLong}
			}
			z.buf = append(z.buf, c)
		}
		if v, ok := parseNumber(z.buf); ok {
			return token{kind: tokNumber, text: z.buf, num: v}
		}
		return token{kind: tokWord, text: z.buf}
	}
}

// parseNumber reads a decimal number, [+-]digits[.digits][e[+-]digits], or
// nan, inf, infinity in any case with an optional sign. Nothing else is a
// number: no hex, no underscores, so a word like "0x10" must match exactly.
func parseNumber(b []byte) (float64, bool) {
	i := 0
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		i++
	}
	switch s := lower(b[i:]); s {
	case "nan", "inf", "infinity":
		v, err := strconv.ParseFloat(string(b), 64)
		return v, err == nil
	}
	digits := 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i, digits = i+1, digits+1
	}
	if i < len(b) && b[i] == '.' {
		i++
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i, digits = i+1, digits+1
		}
	}
	if digits == 0 {
		return 0, false
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		exp := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i, exp = i+1, exp+1
		}
		if exp == 0 {
			return 0, false
		}
	}
	if i != len(b) {
		return 0, false
	}
	// Out of range is ±Inf or 0, correctly rounded: still a value.
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); !ok || ne.Err != strconv.ErrRange {
			return 0, false
		}
	}
	return v, true
}

func lower(b []byte) string {
	if len(b) > 8 {
		return ""
	}
	out := make([]byte, len(b))
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return string(out)
}

// Text compares two texts of numbers token by token and returns "" when
// they are equivalent within t, else what differs first.
func Text(a, b io.Reader, t Tolerance) string {
	za := &tokenizer{r: bufio.NewReader(a)}
	zb := &tokenizer{r: bufio.NewReader(b)}
	for n := 0; ; n++ {
		x, y := za.next(), zb.next()
		where := func() string { return fmt.Sprintf("line %d, token %d", za.line+1, n+1) }
		switch {
		case x.kind == tokTooLong || y.kind == tokTooLong:
			return fmt.Sprintf("%s: a token longer than %d bytes", where(), MaxToken)
		case x.kind == tokEOF && y.kind == tokEOF:
			return ""
		case x.kind == tokEOF || y.kind == tokEOF:
			return fmt.Sprintf("%s: one file ends before the other", where())
		case x.kind == tokLine || y.kind == tokLine:
			if x.kind != y.kind {
				return fmt.Sprintf("%s: a line ends in one file and not in the other", where())
			}
		case x.kind == tokNumber && y.kind == tokNumber:
			if !Close(x.num, y.num, t) {
				return fmt.Sprintf("%s: %s and %s differ by more than the tolerance", where(), fmtFloat(x.num), fmtFloat(y.num))
			}
		case string(x.text) != string(y.text):
			return fmt.Sprintf("%s: %q and %q differ", where(), trim(x.text), trim(y.text))
		}
	}
}

func trim(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}
