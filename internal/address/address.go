// Package address defines account addresses: 20 bytes derived from an ed25519
// public key, written as bech32 strings ("gpu1…") whose checksum catches typos.
//
// It imports only the standard library so that the ledger may use it.
package address

import (
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
)

// Len is the length of an address in bytes.
const Len = 20

// HRP is the human-readable prefix of every address string.
const HRP = "gpu"

// Address identifies an account. The zero value is not a valid account.
type Address [Len]byte

// FromPubKey derives the address of an ed25519 public key: the first 20 bytes
// of its SHA-256.
func FromPubKey(pub ed25519.PublicKey) Address {
	sum := sha256.Sum256(pub)
	var a Address
	copy(a[:], sum[:Len])
	return a
}

// FromBytes returns the address held in b, which must be exactly Len bytes.
func FromBytes(b []byte) (Address, error) {
	var a Address
	if len(b) != Len {
		return a, fmt.Errorf("address must be %d bytes, got %d", Len, len(b))
	}
	copy(a[:], b)
	return a, nil
}

// IsZero reports whether a is the zero address.
func (a Address) IsZero() bool { return a == Address{} }

// String returns the bech32 form, e.g. "gpu1qyps…".
func (a Address) String() string {
	var buf [textLen]byte
	return string(a.appendText(buf[:0]))
}

// textLen is the length of an address's bech32 form: the prefix, "1", 32
// characters of data (160 bits) and 6 of checksum.
const textLen = len(HRP) + 1 + 32 + 6

// appendText appends a's bech32 form to b. It is bech32Encode for an
// address without its allocations: every job and provider record holds
// addresses, and the API writes and reads them by the million.
func (a Address) appendText(b []byte) []byte {
	var data [32]byte
	acc, bits, n := uint32(0), 0, 0
	for _, v := range a {
		acc = acc<<8 | uint32(v)
		bits += 8
		for bits >= 5 {
			bits -= 5
			data[n] = byte(acc>>bits) & 31
			n++
		}
	}
	chk := hrpChecksum
	for _, d := range data {
		chk = polymodStep(chk, d)
	}
	for range 6 {
		chk = polymodStep(chk, 0)
	}
	chk ^= 1
	b = append(b, HRP+"1"...)
	for _, d := range data {
		b = append(b, charset[d])
	}
	for i := range 6 {
		b = append(b, charset[(chk>>uint(5*(5-i)))&31])
	}
	return b
}

// MarshalText implements encoding.TextMarshaler.
func (a Address) MarshalText() ([]byte, error) { return a.appendText(make([]byte, 0, textLen)), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (a *Address) UnmarshalText(b []byte) error {
	if p, ok := parseFast(b); ok {
		*a = p
		return nil
	}
	p, err := Parse(string(b))
	if err != nil {
		return err
	}
	*a = p
	return nil
}

// parseFast reads the usual form of an address (lower case, "gpu1", valid)
// without allocating; ok is false for anything else, which Parse then
// reads (and explains).
func parseFast[T string | []byte](s T) (a Address, ok bool) {
	if len(s) != textLen || string(s[:len(HRP)+1]) != HRP+"1" {
		return a, false
	}
	chk := hrpChecksum
	acc, bits, n := uint32(0), 0, 0
	for i := len(HRP) + 1; i < len(s); i++ {
		c := s[i]
		if c >= 128 || charsetRev[c] < 0 {
			return a, false
		}
		v := byte(charsetRev[c])
		chk = polymodStep(chk, v)
		if i >= textLen-6 {
			continue // the checksum
		}
		acc = acc<<5 | uint32(v)
		bits += 5
		if bits >= 8 {
			bits -= 8
			a[n] = byte(acc >> bits)
			n++
		}
	}
	return a, chk == 1
}

// ErrInvalid is wrapped by every error Parse returns.
var ErrInvalid = errors.New("invalid address")

// ErrChecksum is wrapped by Parse's error when the checksum does not match:
// almost always a typo in the address.
var ErrChecksum = errors.New("checksum mismatch (is there a typo in the address?)")

// Parse reads a bech32 address. Its errors say what is wrong: the prefix,
// the characters, the checksum or the length.
func Parse(s string) (Address, error) {
	if a, ok := parseFast(s); ok {
		return a, nil
	}
	var a Address
	if s == "" {
		return a, fmt.Errorf("%w: empty", ErrInvalid)
	}
	hrp, data, err := bech32Decode(s)
	if err != nil {
		return a, fmt.Errorf("%w %q: %w", ErrInvalid, s, err)
	}
	if hrp != HRP {
		return a, fmt.Errorf("%w %q: prefix is %q, want %q", ErrInvalid, s, hrp, HRP)
	}
	b, err := convertBitsStrict(data)
	if err != nil {
		return a, fmt.Errorf("%w %q: %w", ErrInvalid, s, err)
	}
	if len(b) != Len {
		return a, fmt.Errorf("%w %q: holds %d bytes, want %d", ErrInvalid, s, len(b), Len)
	}
	copy(a[:], b)
	return a, nil
}

// bech32 (BIP-173).

const charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

var charsetRev = func() [128]int8 {
	var r [128]int8
	for i := range r {
		r[i] = -1
	}
	for i, c := range charset {
		r[c] = int8(i)
	}
	return r
}()

func polymod(values []byte) uint32 {
	chk := uint32(1)
	for _, v := range values {
		chk = polymodStep(chk, v)
	}
	return chk
}

// polymodGen[top] is the XOR of the generators that the bits of top pick.
var polymodGen = func() (t [32]uint32) {
	gen := [5]uint32{0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3}
	for top := range t {
		for i := range gen {
			if (top>>i)&1 == 1 {
				t[top] ^= gen[i]
			}
		}
	}
	return t
}()

// polymodStep feeds v into the checksum chk.
func polymodStep(chk uint32, v byte) uint32 {
	top := chk >> 25
	return (chk&0x1ffffff)<<5 ^ uint32(v) ^ polymodGen[top]
}

// hrpChecksum is the checksum after HRP's expansion.
var hrpChecksum = polymod(hrpExpand(HRP))

func hrpExpand(hrp string) []byte {
	out := make([]byte, 0, len(hrp)*2+1)
	for i := 0; i < len(hrp); i++ {
		out = append(out, hrp[i]>>5)
	}
	out = append(out, 0)
	for i := 0; i < len(hrp); i++ {
		out = append(out, hrp[i]&31)
	}
	return out
}

func bech32Encode(hrp string, data []byte) (string, error) {
	values := append(hrpExpand(hrp), data...)
	values = append(values, 0, 0, 0, 0, 0, 0)
	mod := polymod(values) ^ 1
	var sb strings.Builder
	sb.WriteString(hrp)
	sb.WriteByte('1')
	for _, d := range data {
		sb.WriteByte(charset[d])
	}
	for i := 0; i < 6; i++ {
		sb.WriteByte(charset[(mod>>uint(5*(5-i)))&31])
	}
	return sb.String(), nil
}

func bech32Decode(s string) (string, []byte, error) {
	if len(s) > 90 {
		return "", nil, fmt.Errorf("too long (%d characters, at most 90)", len(s))
	}
	if strings.ToLower(s) != s && strings.ToUpper(s) != s {
		return "", nil, errors.New("mixes upper and lower case")
	}
	s = strings.ToLower(s)
	pos := strings.LastIndexByte(s, '1')
	if pos < 1 {
		return "", nil, errors.New(`missing the "gpu1" prefix`)
	}
	if pos+7 > len(s) {
		return "", nil, errors.New("too short")
	}
	hrp := s[:pos]
	for i := 0; i < len(hrp); i++ {
		if hrp[i] < 33 || hrp[i] > 126 {
			return "", nil, fmt.Errorf("invalid character %q in prefix", hrp[i])
		}
	}
	data := make([]byte, 0, len(s)-pos-1)
	for i := pos + 1; i < len(s); i++ {
		c := s[i]
		if c >= 128 || charsetRev[c] < 0 {
			return "", nil, fmt.Errorf("invalid character %q at position %d", c, i)
		}
		data = append(data, byte(charsetRev[c]))
	}
	if polymod(append(hrpExpand(hrp), data...)) != 1 {
		return "", nil, ErrChecksum
	}
	return hrp, data[:len(data)-6], nil
}

func convertBits(data []byte, from, to uint, pad bool) []byte {
	acc, bits := uint32(0), uint(0)
	maxv := uint32(1)<<to - 1
	var out []byte
	for _, v := range data {
		acc = acc<<from | uint32(v)
		bits += from
		for bits >= to {
			bits -= to
			out = append(out, byte((acc>>bits)&maxv))
		}
	}
	if pad && bits > 0 {
		out = append(out, byte((acc<<(to-bits))&maxv))
	}
	return out
}

// convertBitsStrict converts 5-bit groups to bytes, rejecting non-zero padding.
func convertBitsStrict(data []byte) ([]byte, error) {
	acc, bits := uint32(0), uint(0)
	var out []byte
	for _, v := range data {
		acc = acc<<5 | uint32(v)
		bits += 5
		for bits >= 8 {
			bits -= 8
			out = append(out, byte(acc>>bits))
		}
	}
	if bits >= 5 || (acc<<(8-bits))&0xff != 0 {
		return nil, errors.New("invalid padding")
	}
	return out, nil
}

// DecodeBech32 decodes any bech32 string (BIP-173) into its prefix and data
// bytes. The ledger uses it to check age X25519 recipients ("age1…").
func DecodeBech32(s string) (hrp string, data []byte, err error) {
	hrp, five, err := bech32Decode(s)
	if err != nil {
		return "", nil, err
	}
	data, err = convertBitsStrict(five)
	return hrp, data, err
}

// EncodeBech32 encodes data as a bech32 string with prefix hrp.
func EncodeBech32(hrp string, data []byte) (string, error) {
	return bech32Encode(hrp, convertBits(data, 8, 5, true))
}
