package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The binary codec used for the tx envelope and for state records: unsigned
// varints and length-prefixed byte strings, with exactly one encoding for
// every value (minimal varints, no trailing bytes), so that bytes in and bytes
// out always agree.

type encoder struct{ buf []byte }

func (e *encoder) uvarint(v uint64) { e.buf = binary.AppendUvarint(e.buf, v) }
func (e *encoder) bytes(b []byte)   { e.uvarint(uint64(len(b))); e.buf = append(e.buf, b...) }
func (e *encoder) string(s string)  { e.uvarint(uint64(len(s))); e.buf = append(e.buf, s...) }
func (e *encoder) raw(b []byte)     { e.buf = append(e.buf, b...) }

// errTruncated and friends describe malformed encodings; callers wrap them in
// ErrDecode.
var (
	errTruncated = errors.New("truncated")
	errVarint    = errors.New("malformed or non-minimal varint")
)

type decoder struct {
	buf []byte
	off int
	err error
}

func (d *decoder) fail(err error, what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%s at byte %d: %w", what, d.off, err)
	}
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.buf[d.off:])
	if n == 0 {
		d.fail(errTruncated, what)
		return 0
	}
	if n < 0 || n != uvarintLen(v) {
		d.fail(errVarint, what)
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) bytes(what string, max int) []byte {
	n := d.uvarint(what + " length")
	if d.err != nil {
		return nil
	}
	if n > uint64(max) {
		d.fail(fmt.Errorf("length %d exceeds the limit of %d", n, max), what)
		return nil
	}
	return d.raw(what, int(n))
}

func (d *decoder) raw(what string, n int) []byte {
	if d.err != nil {
		return nil
	}
	if len(d.buf)-d.off < n {
		d.fail(errTruncated, what)
		return nil
	}
	b := d.buf[d.off : d.off+n]
	d.off += n
	return b
}

func (d *decoder) done() error {
	if d.err == nil && d.off != len(d.buf) {
		d.err = fmt.Errorf("%d unexpected trailing bytes", len(d.buf)-d.off)
	}
	return d.err
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
