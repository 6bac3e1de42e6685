package offers

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// op is a comparison operator.
type op int

const (
	opLT op = iota
	opLE
	opEQ
	opNE
	opGE
	opGT
	opIn
	opNotIn
)

func (o op) String() string {
	return [...]string{"<", "<=", "=", "!=", ">=", ">", "in", "notin"}[o]
}

// symbolOps maps every accepted spelling of a symbolic operator to it.
var symbolOps = map[string]op{
	"<": opLT, "<=": opLE, "=": opEQ, "==": opEQ, "!=": opNE, ">=": opGE, ">": opGT,
}

const opList = "< <= = != >= > in notin"

// holds reports whether a comparison result c (-1, 0, +1 or incomparable)
// satisfies o.
func (o op) holds(c int) bool {
	if c == incomparable {
		return o == opNE
	}
	switch o {
	case opLT:
		return c < 0
	case opLE:
		return c <= 0
	case opEQ:
		return c == 0
	case opNE:
		return c != 0
	case opGE:
		return c >= 0
	case opGT:
		return c > 0
	}
	return false
}

// Query is a parsed offers query: a conjunction of terms. The zero value and
// a nil *Query match every offer. A Query is immutable, so it may be shared
// between goroutines.
type Query struct {
	terms []term
}

type term struct {
	f    *field
	op   op
	vals []value // exactly one unless op is in or notin
}

// value is one parsed operand, in the form its field's kind compares.
type value struct {
	text string // canonical spelling, for String

	s   string   // string kinds; gpu values with spaces and dashes made underscores
	num number   // kindInt, kindNumber; kindSize in GiB
	ver []uint64 // kindVersion
	b   bool     // kindBool
}

// ParseError reports a query that does not parse. Its Error method shows the
// input with a caret under the offending text.
type ParseError struct {
	Input string // the whole query
	Pos   int    // byte offset in Input of the offending text: a field name, operator or value
	Term  string // the offending text
	Msg   string // what is wrong, and what would be right
}

func (e *ParseError) Error() string {
	pos := min(max(e.Pos, 0), len(e.Input))
	var b strings.Builder
	b.WriteString("invalid offers query: ")
	b.WriteString(e.Msg)
	b.WriteString("\n  ")
	// Show control characters as spaces so the caret line stays aligned;
	// count runes, not bytes, for the same reason.
	b.WriteString(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, e.Input))
	b.WriteString("\n  ")
	b.WriteString(strings.Repeat(" ", utf8.RuneCountInString(e.Input[:pos])))
	b.WriteString(strings.Repeat("^", max(1, utf8.RuneCountInString(e.Term))))
	return b.String()
}

// Parse parses an offers query. The empty query (or one of only spaces)
// matches every offer.
//
// A query is terms separated by whitespace, all of which must hold. A term
// is `field op value`; spaces around op are optional (vram>=24, vram >= 24),
// except that the word operators in and notin need one before them. Field
// names are
// case-insensitive and may be aliases (see [Fields]). Values are:
//
//   - numbers such as 2, 0.5, 1e3; sizes (vram, ram, disk) are in GiB and may
//     carry a unit: GiB, TiB, MiB, or the decimal GB, TB, MB (10^9, 10^12,
//     10^6 bytes), case-insensitive, written without a space (24GiB);
//   - strings, bare (RTX_4090, us-east) or quoted ("RTX 4090", 'eu'); a
//     quoted string extends to the next matching quote, with no escapes;
//     strings compare case-insensitively, and for gpu spaces and dashes match
//     underscores;
//   - true or false for online;
//   - versions for compute_cap, compared numerically by component;
//   - lists, for in and notin only: [a, b, c], or a,b,c with no spaces.
//
// For executor, a set, executor=oci means oci is supported, executor!=oci
// that it is not, executor in [a,b] that any of them is, and notin that none
// is. Strings, sets and online accept only = != in notin.
//
// Errors are of type *ParseError.
func Parse(s string) (*Query, error) {
	p := &parser{in: s}
	q := &Query{}
	for {
		p.skipSpace()
		if p.pos >= len(p.in) {
			return q, nil
		}
		t, err := p.term()
		if err != nil {
			return nil, err
		}
		q.terms = append(q.terms, t)
	}
}

// Match reports whether o satisfies every term of q.
func (q *Query) Match(o *Offer) bool {
	if q == nil {
		return true
	}
	for i := range q.terms {
		if !q.terms[i].match(o) {
			return false
		}
	}
	return true
}

// Uses reports whether a term of q is on the field name (canonical, e.g.
// "tee"): an answer that depends on more than the offers (the tee field's
// expiry, on the time) may then not be reused.
func (q *Query) Uses(name string) bool {
	if q == nil {
		return false
	}
	for _, t := range q.terms {
		if t.f.name == name {
			return true
		}
	}
	return false
}

// String returns q in canonical form: canonical field names and operators,
// terms separated by one space, lists in brackets, values quoted only where
// needed. Parsing the result gives a query that matches the same offers and
// has the same String.
func (q *Query) String() string {
	if q == nil {
		return ""
	}
	var b strings.Builder
	for i, t := range q.terms {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t.f.name)
		if t.op == opIn || t.op == opNotIn {
			b.WriteString(" " + t.op.String() + " [")
			for j, v := range t.vals {
				if j > 0 {
					b.WriteByte(',')
				}
				b.WriteString(v.text)
			}
			b.WriteByte(']')
			continue
		}
		b.WriteString(t.op.String())
		b.WriteString(t.vals[0].text)
	}
	return b.String()
}

func (t *term) match(o *Offer) bool {
	switch t.op {
	case opIn:
		for i := range t.vals {
			if t.cmp(o, &t.vals[i]) == 0 {
				return true
			}
		}
		return false
	case opNotIn:
		for i := range t.vals {
			if t.cmp(o, &t.vals[i]) == 0 {
				return false
			}
		}
		return true
	}
	return t.op.holds(t.cmp(o, &t.vals[0]))
}

// The values of the tee field: a TEE kind (the ledger's names), or any
// attested provider, or none.
const (
	teeAny  = "any"
	teeNone = "none"
)

var teeValues = []string{"tdx", "sev-snp", teeAny, teeNone}

// incomparable is what cmp returns when o's value has no order relative to
// v (NaN, a malformed version, or unequal strings): it satisfies only !=.
const incomparable = 2

// cmp compares o's value of t's field with v: -1, 0 or +1, or incomparable.
// For a set, 0 means "contains" and anything else "does not".
func (t *term) cmp(o *Offer, v *value) int {
	f := t.f
	switch f.kind {
	case kindString:
		return eqResult(strings.EqualFold(f.str(o), v.s))
	case kindGPU:
		return eqResult(gpuEqual(f.str(o), v.s))
	case kindTEE:
		switch got := f.str(o); v.s {
		case teeAny:
			return eqResult(got != "")
		case teeNone:
			return eqResult(got == "")
		default:
			return eqResult(got == v.s)
		}
	case kindSet:
		for _, e := range f.set(o) {
			if strings.EqualFold(e, v.s) {
				return 0
			}
		}
		return incomparable
	case kindBool:
		return eqResult(f.bool(o) == v.b)
	case kindVersion:
		return cmpVersion(f.str(o), v.ver)
	case kindInt:
		neg, mag := f.intv(o)
		return v.num.cmpInt(neg, mag)
	default: // kindNumber, kindSize
		return v.num.cmpFloat(f.num(o))
	}
}

func eqResult(eq bool) int {
	if eq {
		return 0
	}
	return incomparable
}

// parser is a cursor over a query. Positions are byte offsets.
type parser struct {
	in  string
	pos int
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func isIdent(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func isOpChar(c byte) bool { return c == '<' || c == '>' || c == '=' || c == '!' }

func isQuote(c byte) bool { return c == '"' || c == '\'' }

// skipSpace advances past whitespace and reports how much it skipped.
func (p *parser) skipSpace() int {
	start := p.pos
	for p.pos < len(p.in) && isSpace(p.in[p.pos]) {
		p.pos++
	}
	return p.pos - start
}

func (p *parser) ident() string {
	start := p.pos
	for p.pos < len(p.in) && isIdent(p.in[p.pos]) {
		p.pos++
	}
	return p.in[start:p.pos]
}

// word returns the run of non-space bytes at pos, for error messages.
func (p *parser) word(pos int) string {
	end := pos
	for end < len(p.in) && !isSpace(p.in[end]) {
		end++
	}
	return p.in[pos:end]
}

func (p *parser) errorf(pos int, text, format string, args ...any) error {
	return &ParseError{Input: p.in, Pos: pos, Term: text, Msg: fmt.Sprintf(format, args...)}
}

// term parses `field op value` at pos, which is not a space.
func (p *parser) term() (term, error) {
	start := p.pos
	// Read up to the operator, not just identifier bytes, so that a field
	// misspelt with other characters is reported whole.
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		if isSpace(c) || isOpChar(c) || isQuote(c) || c == '[' || c == ']' || c == ',' {
			break
		}
		p.pos++
	}
	name := p.in[start:p.pos]
	if name == "" {
		w := p.word(start)
		return term{}, p.errorf(start, w, "expected a field name at %q; a term is field, operator, value, e.g. vram>=24", w)
	}
	f := lookup(name)
	if f == nil {
		return term{}, p.unknownField(start, name)
	}

	p.skipSpace()
	opPos := p.pos
	o, opText, err := p.op()
	if err != nil {
		return term{}, err
	}
	if opText == "" {
		return term{}, p.errorf(start, name, "missing operator after %q; use one of %s", name, opList)
	}
	if !f.kind.allows(o) {
		return term{}, p.errorf(opPos, opText, "operator %q does not apply to %s (a %s); use one of %s",
			opText, f.name, f.kind, opsString(f.kind.ops()))
	}
	opEnd := p.pos

	spaced := p.skipSpace() > 0
	if p.pos >= len(p.in) || spaced && p.startsTerm() {
		head := p.in[start:opEnd]
		return term{}, p.errorf(start, head, "missing value after %q", head)
	}
	t := term{f: f, op: o}
	if o == opIn || o == opNotIn {
		t.vals, err = p.list(f, o)
	} else {
		var v value
		v, err = p.scalar(f)
		t.vals = []value{v}
	}
	return t, err
}

func opsString(ops []op) string {
	s := make([]string, len(ops))
	for i, o := range ops {
		s[i] = o.String()
	}
	return strings.Join(s, " ")
}

func (p *parser) unknownField(pos int, name string) error {
	msg := fmt.Sprintf("unknown field %q (", name)
	if s := suggest(name); s != "" {
		msg += fmt.Sprintf("did you mean %q?; ", s)
	}
	if _, ok := units[strings.ToLower(name)]; ok {
		msg += "write a unit right after its number, e.g. vram>=24GiB)"
	} else {
		msg += "fields: " + fieldNames() + ")"
	}
	return p.errorf(pos, name, "%s", msg)
}

// op parses an operator at pos. It returns opText "" when there is none.
func (p *parser) op() (o op, opText string, err error) {
	start := p.pos
	if p.pos < len(p.in) && isOpChar(p.in[p.pos]) {
		for p.pos < len(p.in) && isOpChar(p.in[p.pos]) {
			p.pos++
		}
		opText = p.in[start:p.pos]
		o, ok := symbolOps[opText]
		if !ok {
			return 0, opText, p.errorf(start, opText, "unknown operator %q; use one of %s", opText, opList)
		}
		return o, opText, nil
	}
	switch w := p.ident(); strings.ToLower(w) {
	case "in":
		return opIn, w, nil
	case "notin":
		return opNotIn, w, nil
	}
	p.pos = start
	return 0, "", nil
}

// startsTerm reports whether the text at pos looks like the start of a
// term (a known field followed by an operator), so that "vram>= count>=2"
// reads as a missing value rather than a strange one.
func (p *parser) startsTerm() bool {
	end := p.pos
	for end < len(p.in) && isIdent(p.in[end]) {
		end++
	}
	return end > p.pos && end < len(p.in) && isOpChar(p.in[end]) && lookup(p.in[p.pos:end]) != nil
}

// element reads one string, quoted or bare, at pos. A bare string ends at
// whitespace, a comma, a bracket or a quote, and may be empty.
func (p *parser) element() (s string, quoted bool, err error) {
	start := p.pos
	if q := p.in[start]; isQuote(q) {
		end := strings.IndexByte(p.in[start+1:], q)
		if end < 0 {
			return "", true, p.errorf(start, p.in[start:], "unclosed %c quote", q)
		}
		p.pos = start + 1 + end + 1
		return p.in[start+1 : start+1+end], true, nil
	}
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		if isSpace(c) || c == ',' || c == '[' || c == ']' || isQuote(c) {
			break
		}
		p.pos++
	}
	return p.in[start:p.pos], false, nil
}

// unexpected reports the byte at pos, which cannot follow the value text
// before it.
func (p *parser) unexpected(pos int, after string) error {
	where := ""
	if after != "" {
		where = fmt.Sprintf(" after %q", after)
	}
	switch c := p.in[pos]; {
	case isQuote(c):
		return p.errorf(pos, p.word(pos), "unexpected quote%s; quote the whole value, e.g. gpu=\"RTX 4090\"", where)
	case c == ']':
		return p.errorf(pos, "]", "unexpected ]%s: no [ opens it", where)
	default:
		return p.errorf(pos, p.word(pos), "unexpected %q%s; separate terms with spaces", p.word(pos), where)
	}
}

// scalar parses the single value of a term whose operator is not in/notin.
func (p *parser) scalar(f *field) (value, error) {
	start := p.pos
	if p.in[start] == '[' {
		w := p.word(start)
		return value{}, p.errorf(start, w, "a list needs operator in or notin, e.g. %s in %s", f.name, w)
	}
	s, quoted, err := p.element()
	if err != nil {
		return value{}, err
	}
	if p.pos < len(p.in) && !isSpace(p.in[p.pos]) {
		if p.in[p.pos] == ',' {
			w := p.word(start)
			return value{}, p.errorf(start, w, "a list needs operator in or notin, e.g. %s in [%s]", f.name, w)
		}
		return value{}, p.unexpected(p.pos, p.in[start:p.pos])
	}
	return p.convert(f, s, start, quoted)
}

// list parses the value of an in or notin term: [a, b] or a,b.
func (p *parser) list(f *field, o op) ([]value, error) {
	start := p.pos
	var vals []value
	if p.in[start] == '[' {
		p.pos++
		for {
			p.skipSpace()
			if p.pos >= len(p.in) {
				return nil, p.errorf(start, p.in[start:], "unclosed [")
			}
			if p.in[p.pos] == ']' && len(vals) == 0 {
				p.pos++
				break
			}
			v, err := p.listElement(f)
			if err != nil {
				return nil, err
			}
			vals = append(vals, v)
			p.skipSpace()
			if p.pos >= len(p.in) {
				return nil, p.errorf(start, p.in[start:], "unclosed [")
			}
			if c := p.in[p.pos]; c == ']' {
				p.pos++
				break
			} else if c != ',' {
				return nil, p.errorf(p.pos, p.word(p.pos), "expected , or ] in list, not %q", p.word(p.pos))
			}
			p.pos++
		}
		if p.pos < len(p.in) && !isSpace(p.in[p.pos]) {
			return nil, p.unexpected(p.pos, p.in[start:p.pos])
		}
		return vals, nil
	}
	for {
		v, err := p.listElement(f)
		if err != nil {
			return nil, err
		}
		vals = append(vals, v)
		if p.pos >= len(p.in) || isSpace(p.in[p.pos]) {
			break
		}
		if p.in[p.pos] != ',' {
			return nil, p.unexpected(p.pos, p.in[start:p.pos])
		}
		p.pos++
	}
	if len(vals) == 1 {
		w := p.in[start:p.pos]
		return nil, p.errorf(start, w, "operator %s needs a list, e.g. %s %s [%s,…] or %s=%s", o, f.name, o, w, f.name, w)
	}
	return vals, nil
}

// listElement parses one element of a list at pos.
func (p *parser) listElement(f *field) (value, error) {
	start := p.pos
	if p.pos >= len(p.in) || isSpace(p.in[p.pos]) || p.in[p.pos] == ',' || p.in[p.pos] == ']' {
		return value{}, p.errorf(start, p.word(start), "empty list element")
	}
	if p.in[p.pos] == '[' {
		return value{}, p.errorf(start, p.word(start), "lists do not nest")
	}
	s, quoted, err := p.element()
	if err != nil {
		return value{}, err
	}
	if p.pos < len(p.in) && isQuote(p.in[p.pos]) {
		return value{}, p.unexpected(p.pos, p.in[start:p.pos])
	}
	return p.convert(f, s, start, quoted)
}

// convert turns the text of a value at pos into f's kind.
func (p *parser) convert(f *field, s string, pos int, quoted bool) (value, error) {
	textPos, text := pos, s
	if quoted {
		textPos, text = pos, p.in[pos:pos+len(s)+2]
	}
	switch f.kind {
	case kindString, kindSet:
		return value{s: s, text: quote(s)}, nil
	case kindGPU:
		s = normGPU(s)
		return value{s: s, text: quote(s)}, nil
	case kindTEE:
		l := strings.ToLower(s)
		if !slices.Contains(teeValues, l) {
			return value{}, p.errorf(textPos, text, "bad value %q for %s; use %s", s, f.name, strings.Join(teeValues, ", "))
		}
		return value{s: l, text: l}, nil
	case kindBool:
		switch strings.ToLower(s) {
		case "true":
			return value{b: true, text: "true"}, nil
		case "false":
			return value{b: false, text: "false"}, nil
		}
		return value{}, p.errorf(textPos, text, "bad value %q for %s; use true or false", s, f.name)
	case kindVersion:
		ver, ok := parseVersion(s)
		if !ok {
			return value{}, p.errorf(textPos, text, "bad version %q for %s; use dotted numbers, e.g. 8.6 or 9.0", s, f.name)
		}
		return value{ver: ver, text: formatVersion(ver)}, nil
	case kindSize:
		n := scanNumber(s)
		if n == 0 {
			return value{}, p.errorf(textPos, text, "bad number %q for %s; want a size in GiB, or with a unit, e.g. 24 or 24GiB", s, f.name)
		}
		num, err := parseNumber(s[:n])
		if err != nil {
			return value{}, p.errorf(textPos, text, "number %q for %s: %v", s[:n], f.name, err)
		}
		v := value{num: num, text: num.String()}
		if unit := s[n:]; unit != "" {
			u, ok := units[strings.ToLower(unit)]
			if !ok {
				upos := textPos + n
				if quoted {
					upos++
				}
				return value{}, p.errorf(upos, unit, "unknown unit %q for %s; use GiB, TiB, MiB, GB, TB or MB", unit, f.name)
			}
			if v.num, err = num.scale(u.gib); err != nil {
				return value{}, p.errorf(textPos, text, "size %q for %s: %v", s, f.name, err)
			}
			v.text += u.name
		}
		return v, nil
	default: // kindInt, kindNumber
		if scanNumber(s) != len(s) || s == "" {
			hint := ""
			if f.unit != "" {
				hint = fmt.Sprintf(" (%s, without a unit)", f.unit)
			}
			return value{}, p.errorf(textPos, text, "bad number %q for %s; want a number%s, e.g. %s", s, f.name, hint, example(f))
		}
		num, err := parseNumber(s)
		if err != nil {
			return value{}, p.errorf(textPos, text, "number %q for %s: %v", s, f.name, err)
		}
		return value{num: num, text: num.String()}, nil
	}
}

func example(f *field) string {
	if f.kind == kindInt {
		return "2"
	}
	return "0.5"
}

// quote returns s as a query value: bare where the parser would read it
// back unchanged, otherwise in quotes. Values come from the parser, which
// cannot produce a string holding both kinds of quote.
func quote(s string) string {
	needs := s == "" || isOpChar(s[0])
	for i := 0; i < len(s) && !needs; i++ {
		c := s[i]
		needs = isSpace(c) || isQuote(c) || c == ',' || c == '[' || c == ']'
	}
	switch {
	case !needs:
		return s
	case strings.IndexByte(s, '"') < 0:
		return `"` + s + `"`
	default:
		return `'` + s + `'`
	}
}

// normGPU spells a GPU class the way offers do: spaces and dashes become
// underscores ("RTX 4090" → "RTX_4090").
func normGPU(s string) string {
	if !strings.ContainsAny(s, " -") {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '-' {
			return '_'
		}
		return r
	}, s)
}

// gpuEqual reports whether an offer's GPU class a equals the normalised
// query value b, ignoring case and treating spaces and dashes as
// underscores. It does not allocate for ASCII names.
func gpuEqual(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x >= utf8.RuneSelf || y >= utf8.RuneSelf {
			return strings.EqualFold(normGPU(a), b)
		}
		if x == ' ' || x == '-' {
			x = '_'
		}
		if lower(x) != lower(y) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
