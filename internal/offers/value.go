package offers

import (
	"cmp"
	"errors"
	"math"
	"strconv"
	"strings"
)

// number is a numeric query value. Integers up to 2^64 are also kept
// exactly, so that integer fields (stake above all) compare without float
// rounding.
type number struct {
	f     float64 // the value; never NaN or infinite
	exact bool    // the value is the integer ±mag
	neg   bool    // never set with mag 0
	mag   uint64
}

var errRange = errors.New("out of range")

// scanNumber returns the length of the longest prefix of s that is a
// decimal number: [+-]digits[.digits][e[+-]digits], where either side of
// the point may be empty but not both. Hex, underscores, Inf and NaN, which
// strconv would accept, are not numbers here.
func scanNumber(s string) int {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for i < len(s) && isDigit(s[i]) {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
			digits++
		}
	}
	if digits == 0 {
		return 0
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && isDigit(s[j]) {
			for j < len(s) && isDigit(s[j]) {
				j++
			}
			i = j
		}
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// parseNumber parses s, all of which scanNumber accepts.
func parseNumber(s string) (number, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return number{}, errRange
	}
	if f == 0 {
		f = 0 // not -0, which would print as "-0"
	}
	n := number{f: f}
	digits := strings.TrimLeft(s, "+-")
	if !strings.ContainsAny(digits, ".eE") {
		if mag, err := strconv.ParseUint(digits, 10, 64); err == nil {
			n.exact, n.neg, n.mag = true, s[0] == '-' && mag != 0, mag
			return n, nil
		}
	}
	// A float literal with an integral value: keep it exactly as well, so
	// that 1e3 and the 1000 that String writes for it mean the same.
	if a := math.Abs(n.f); a == math.Trunc(a) && a < 1<<64 {
		n.exact, n.neg, n.mag = true, n.f < 0, uint64(a)
	}
	return n, nil
}

// String formats n so that parseNumber reads it back unchanged.
func (n number) String() string {
	if n.exact {
		s := strconv.FormatUint(n.mag, 10)
		if n.neg {
			s = "-" + s
		}
		return s
	}
	if a := math.Abs(n.f); a >= 1e21 || a < 1e-6 && a != 0 {
		return strconv.FormatFloat(n.f, 'g', -1, 64)
	}
	return strconv.FormatFloat(n.f, 'f', -1, 64)
}

// scale multiplies n by a unit's size in GiB. The result is not exact:
// sizes compare as floats.
func (n number) scale(by float64) (number, error) {
	f := n.f * by
	if math.IsInf(f, 0) {
		return number{}, errRange
	}
	return number{f: f}, nil
}

// cmpFloat compares an offer's value x with n.
func (n number) cmpFloat(x float64) int {
	if math.IsNaN(x) {
		return incomparable
	}
	return cmp.Compare(x, n.f)
}

// cmpInt compares an offer's integer value ±mag with n.
func (n number) cmpInt(neg bool, mag uint64) int {
	if !n.exact {
		x := float64(mag)
		if neg {
			x = -x
		}
		return n.cmpFloat(x)
	}
	return cmpSigned(neg, mag, n.neg, n.mag)
}

func cmpSigned(aNeg bool, aMag uint64, bNeg bool, bMag uint64) int {
	if aMag == 0 {
		aNeg = false
	}
	if bMag == 0 {
		bNeg = false
	}
	switch {
	case aNeg && !bNeg:
		return -1
	case !aNeg && bNeg:
		return 1
	case aNeg:
		return cmp.Compare(bMag, aMag)
	default:
		return cmp.Compare(aMag, bMag)
	}
}

// unit is a size unit a value of vram, ram or disk may carry.
type unit struct {
	name string  // canonical spelling
	gib  float64 // its size in GiB
}

// units maps lower-case unit names to units. GB, TB and MB are decimal, as
// disk vendors use them; the query's sizes are binary GiB.
var units = map[string]unit{
	"mib": {"MiB", 1.0 / 1024},
	"gib": {"GiB", 1},
	"tib": {"TiB", 1024},
	"mb":  {"MB", 1e6 / (1 << 30)},
	"gb":  {"GB", 1e9 / (1 << 30)},
	"tb":  {"TB", 1e12 / (1 << 30)},
}

// validVersion reports whether s is dotted decimal numbers, e.g. "8.6".
func validVersion(s string) bool {
	if s == "" || s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) && s[i] != '.' {
			return false
		}
	}
	return true
}

func parseVersion(s string) ([]uint64, bool) {
	if !validVersion(s) {
		return nil, false
	}
	parts := strings.Split(s, ".")
	ver := make([]uint64, len(parts))
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return nil, false
		}
		ver[i] = n
	}
	return ver, true
}

func formatVersion(ver []uint64) string {
	parts := make([]string, len(ver))
	for i, n := range ver {
		parts[i] = strconv.FormatUint(n, 10)
	}
	return strings.Join(parts, ".")
}

// versionComponent reads the number at s[i:] (saturating) and returns it
// with the index past it and its trailing dot.
func versionComponent(s string, i int) (uint64, int) {
	var n uint64
	for ; i < len(s) && isDigit(s[i]); i++ {
		d := uint64(s[i] - '0')
		if n > (math.MaxUint64-d)/10 {
			n = math.MaxUint64
		} else {
			n = n*10 + d
		}
	}
	if i < len(s) && s[i] == '.' {
		i++
	}
	return n, i
}

// cmpVersion compares an offer's version string a with ver; missing
// components count as 0, so 9 = 9.0. A malformed a is incomparable.
func cmpVersion(a string, ver []uint64) int {
	if !validVersion(a) {
		return incomparable
	}
	i := 0
	for k := 0; k < len(ver) || i < len(a); k++ {
		var x, y uint64
		if i < len(a) {
			x, i = versionComponent(a, i)
		}
		if k < len(ver) {
			y = ver[k]
		}
		if c := cmp.Compare(x, y); c != 0 {
			return c
		}
	}
	return 0
}

// cmpVersions orders two offers' version strings for sorting: valid
// versions by value, after malformed ones, which sort by bytes.
func cmpVersions(a, b string) int {
	va, vb := validVersion(a), validVersion(b)
	switch {
	case !va && !vb:
		return strings.Compare(a, b)
	case !va:
		return -1
	case !vb:
		return 1
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var x, y uint64
		if i < len(a) {
			x, i = versionComponent(a, i)
		}
		if j < len(b) {
			y, j = versionComponent(b, j)
		}
		if c := cmp.Compare(x, y); c != 0 {
			return c
		}
	}
	return 0
}
