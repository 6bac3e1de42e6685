package compare

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// MaxNPYHeader bounds a .npy header's length; NumPy writes under 1 KiB for
// any array of fewer than 32 dimensions.
const (
	MaxNPYHeader = 64 << 10
	MaxNPYDims   = 32
)

// NPYHeader is what a .npy file's header says about its array.
type NPYHeader struct {
	Descr   string // '<f8', '<i4', '|u1', …
	Fortran bool
	Shape   []uint64
	kind    byte // 'f', 'i', 'u' or 'b'
	size    int  // bytes per element
	order   binary.ByteOrder
}

// Elements is the number of elements the shape holds, and false when it
// overflows 2^63.
func (h *NPYHeader) Elements() (uint64, bool) {
	n := uint64(1)
	for _, d := range h.Shape {
		if d != 0 && n > math.MaxInt64/d {
			return 0, false
		}
		n *= d
	}
	return n, true
}

var npyMagic = "\x93NUMPY"

// ReadNPYHeader reads the magic, version and header of a .npy file from r,
// leaving r at the first byte of the data. It accepts format versions 1.0,
// 2.0 and 3.0 and the header NumPy writes: a Python dict literal with
// exactly the keys 'descr', 'fortran_order' and 'shape', padded with spaces
// and ended by a newline.
func ReadNPYHeader(r io.Reader) (*NPYHeader, error) {
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return nil, errors.New("shorter than a .npy preamble")
	}
	if string(pre[:6]) != npyMagic {
		return nil, errors.New("not a .npy file (bad magic)")
	}
	if pre[7] != 0 {
		return nil, fmt.Errorf(".npy version %d.%d: want 1.0, 2.0 or 3.0", pre[6], pre[7])
	}
	var n uint64
	switch pre[6] {
	case 1:
		var l [2]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return nil, errors.New("truncated .npy header length")
		}
		n = uint64(binary.LittleEndian.Uint16(l[:]))
	case 2, 3:
		var l [4]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return nil, errors.New("truncated .npy header length")
		}
		n = uint64(binary.LittleEndian.Uint32(l[:]))
	default:
		return nil, fmt.Errorf(".npy version %d.%d: want 1.0, 2.0 or 3.0", pre[6], pre[7])
	}
	if n > MaxNPYHeader {
		return nil, fmt.Errorf(".npy header of %d bytes is longer than %d", n, MaxNPYHeader)
	}
	hdr := make([]byte, n)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, errors.New("truncated .npy header")
	}
	return parseNPYDict(hdr)
}

// parseNPYDict parses the header's dict literal.
func parseNPYDict(b []byte) (*NPYHeader, error) {
	p := &dictParser{b: b}
	h := &NPYHeader{}
	seen := map[string]bool{}
	p.space()
	if !p.eat('{') {
		return nil, errors.New(".npy header: want a dict starting with {")
	}
	for {
		p.space()
		if p.eat('}') {
			break
		}
		key, err := p.str()
		if err != nil {
			return nil, fmt.Errorf(".npy header key: %w", err)
		}
		if seen[key] {
			return nil, fmt.Errorf(".npy header: key %q twice", key)
		}
		seen[key] = true
		p.space()
		if !p.eat(':') {
			return nil, fmt.Errorf(".npy header: want : after %q", key)
		}
		p.space()
		switch key {
		case "descr":
			if h.Descr, err = p.str(); err != nil {
				return nil, fmt.Errorf(".npy header descr: %w", err)
			}
		case "fortran_order":
			switch {
			case p.word("True"):
				h.Fortran = true
			case p.word("False"):
			default:
				return nil, errors.New(".npy header fortran_order: want True or False")
			}
		case "shape":
			if h.Shape, err = p.tuple(); err != nil {
				return nil, fmt.Errorf(".npy header shape: %w", err)
			}
		default:
			return nil, fmt.Errorf(".npy header: unknown key %q (want descr, fortran_order, shape)", key)
		}
		p.space()
		if p.eat(',') {
			continue
		}
		p.space()
		if !p.eat('}') {
			return nil, errors.New(".npy header: want , or } after a value")
		}
		break
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return nil, fmt.Errorf(".npy header: %s missing", k)
		}
	}
	// NumPy pads with spaces and ends with a newline.
	for ; p.i < len(b); p.i++ {
		if c := b[p.i]; c != ' ' && !(c == '\n' && p.i == len(b)-1) {
			return nil, errors.New(".npy header: bytes after the dict other than space padding and a final newline")
		}
	}
	if err := h.parseDescr(); err != nil {
		return nil, err
	}
	return h, nil
}

// parseDescr reads a simple dtype: byte order, kind, size.
func (h *NPYHeader) parseDescr() error {
	d := h.Descr
	if len(d) < 3 {
		return fmt.Errorf(".npy descr %q: want e.g. '<f8'", d)
	}
	size, err := strconv.Atoi(d[2:])
	if err != nil || strconv.Itoa(size) != d[2:] {
		return fmt.Errorf(".npy descr %q: bad size", d)
	}
	h.kind, h.size = d[1], size
	switch {
	case h.kind == 'f' && (size == 4 || size == 8):
	case (h.kind == 'i' || h.kind == 'u') && (size == 1 || size == 2 || size == 4 || size == 8):
	case h.kind == 'b' && size == 1:
	default:
		return fmt.Errorf(".npy descr %q: want float32/64, (u)int8/16/32/64 or bool", d)
	}
	switch d[0] {
	case '<':
		h.order = binary.LittleEndian
	case '>':
		h.order = binary.BigEndian
	case '|', '=':
		if size != 1 && d[0] == '|' {
			return fmt.Errorf(".npy descr %q: | is for one-byte types", d)
		}
		if d[0] == '=' {
			return fmt.Errorf(".npy descr %q: native byte order is not portable; want < or >", d)
		}
		h.order = binary.LittleEndian
	default:
		return fmt.Errorf(".npy descr %q: want byte order <, > or |", d)
	}
	return nil
}

type dictParser struct {
	b []byte
	i int
}

func (p *dictParser) space() {
	for p.i < len(p.b) && p.b[p.i] == ' ' {
		p.i++
	}
}

func (p *dictParser) eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *dictParser) word(w string) bool {
	if len(p.b)-p.i >= len(w) && string(p.b[p.i:p.i+len(w)]) == w {
		p.i += len(w)
		return true
	}
	return false
}

// str reads a quoted string without escapes: NumPy's keys and descrs have
// none.
func (p *dictParser) str() (string, error) {
	if p.i >= len(p.b) || (p.b[p.i] != '\'' && p.b[p.i] != '"') {
		return "", errors.New("want a quoted string")
	}
	q := p.b[p.i]
	start := p.i + 1
	for j := start; j < len(p.b) && j-start <= 64; j++ {
		switch c := p.b[j]; {
		case c == q:
			p.i = j + 1
			return string(p.b[start:j]), nil
		case c == '\\' || c < 0x20 || c >= 0x7f:
			return "", errors.New("want a plain string")
		}
	}
	return "", errors.New("unterminated or too long string")
}

// tuple reads (), (n,) or (n, m, …), with an optional trailing comma;
// a single dimension needs its comma, as NumPy writes it: (3) is an int in
// Python, not a tuple.
func (p *dictParser) tuple() ([]uint64, error) {
	if !p.eat('(') {
		return nil, errors.New("want a tuple")
	}
	dims := []uint64{}
	comma := false
	for {
		p.space()
		if p.eat(')') {
			break
		}
		start := p.i
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
		}
		s := string(p.b[start:p.i])
		if s == "" || (len(s) > 1 && s[0] == '0') {
			return nil, errors.New("want a non-negative integer")
		}
		d, err := strconv.ParseUint(s, 10, 63)
		if err != nil {
			return nil, errors.New("dimension out of range")
		}
		if len(dims) == MaxNPYDims {
			return nil, fmt.Errorf("more than %d dimensions", MaxNPYDims)
		}
		dims = append(dims, d)
		p.space()
		if p.eat(',') {
			comma = true
			continue
		}
		if !p.eat(')') {
			return nil, errors.New("want , or ) after a dimension")
		}
		comma = false
		break
	}
	if len(dims) == 1 && !comma {
		return nil, errors.New("a one-dimensional shape is written (n,)")
	}
	return dims, nil
}

// NPY compares two .npy files and returns "" when they hold the same
// array within t: equal dtype, shape and order, floats within t, integers
// and bools equal.
func NPY(a, b io.Reader, t Tolerance) string {
	a, b = bufio.NewReader(a), bufio.NewReader(b)
	ha, err := ReadNPYHeader(a)
	if err != nil {
		return "first file: " + err.Error()
	}
	hb, err := ReadNPYHeader(b)
	if err != nil {
		return "second file: " + err.Error()
	}
	switch {
	case ha.Descr != hb.Descr:
		return fmt.Sprintf("dtype %s and %s differ", ha.Descr, hb.Descr)
	case ha.Fortran != hb.Fortran:
		return "fortran_order differs"
	case !equalShape(ha.Shape, hb.Shape):
		return fmt.Sprintf("shape %v and %v differ", ha.Shape, hb.Shape)
	}
	n, ok := ha.Elements()
	if !ok {
		return "the shape holds more than 2^63 elements"
	}
	why := elements(a, b, ha, t, n)
	if why != "" {
		return why
	}
	// Nothing may follow the data.
	var one [1]byte
	na, _ := io.ReadFull(a, one[:])
	nb, _ := io.ReadFull(b, one[:])
	if na != 0 || nb != 0 {
		return "bytes after the array's data"
	}
	return ""
}

func equalShape(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// elements compares n elements of h's type read from a and b.
func elements(a, b io.Reader, h *NPYHeader, t Tolerance, n uint64) string {
	ba, bb := make([]byte, h.size), make([]byte, h.size)
	for i := uint64(0); i < n; i++ {
		_, ea := io.ReadFull(a, ba)
		_, eb := io.ReadFull(b, bb)
		if ea != nil || eb != nil {
			return fmt.Sprintf("data ends at element %d of %d", i, n)
		}
		if h.kind != 'f' {
			if string(ba) != string(bb) {
				return fmt.Sprintf("element %d differs", i)
			}
			continue
		}
		x, y := h.float(ba), h.float(bb)
		if !Close(x, y, t) {
			return fmt.Sprintf("element %d: %s and %s differ by more than the tolerance", i, fmtFloat(x), fmtFloat(y))
		}
	}
	return ""
}

func (h *NPYHeader) float(b []byte) float64 {
	if h.size == 4 {
		return float64(math.Float32frombits(h.order.Uint32(b)))
	}
	return math.Float64frombits(h.order.Uint64(b))
}

var (
	f32LE = &NPYHeader{kind: 'f', size: 4, order: binary.LittleEndian}
	f64LE = &NPYHeader{kind: 'f', size: 8, order: binary.LittleEndian}
)

// raw compares files of raw little-endian floats of h's size: the same
// count, each within t.
func raw(a, b io.Reader, h *NPYHeader, t Tolerance) string {
	ba, bb := make([]byte, h.size), make([]byte, h.size)
	for i := uint64(0); ; i++ {
		na, _ := io.ReadFull(a, ba)
		nb, _ := io.ReadFull(b, bb)
		switch {
		case na == 0 && nb == 0:
			return ""
		case na < h.size || nb < h.size:
			if na == h.size || nb == h.size {
				return fmt.Sprintf("one file ends at element %d, the other does not", i)
			}
			return fmt.Sprintf("the size is not a multiple of %d bytes", h.size)
		}
		x, y := h.float(ba), h.float(bb)
		if !Close(x, y, t) {
			return fmt.Sprintf("element %d: %s and %s differ by more than the tolerance", i, fmtFloat(x), fmtFloat(y))
		}
	}
}
