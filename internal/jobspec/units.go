package jobspec

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
)

// Bytes is a size in bytes. In YAML it is an integer (bytes) or a number
// with a unit: B, KB, MB, GB, TB, PB are powers of 1000; KiB, MiB, GiB,
// TiB, PiB (also written Ki, Mi, Gi, Ti, Pi) are powers of 1024. Units are
// case-insensitive; a space may separate number and unit; the number may
// have a fraction as long as the size is a whole number of bytes.
type Bytes uint64

// Size units.
const (
	KB Bytes = 1000
	MB Bytes = 1000 * KB
	GB Bytes = 1000 * MB
	TB Bytes = 1000 * GB
	PB Bytes = 1000 * TB

	KiB Bytes = 1 << 10
	MiB Bytes = 1 << 20
	GiB Bytes = 1 << 30
	TiB Bytes = 1 << 40
	PiB Bytes = 1 << 50
)

var byteUnits = map[string]Bytes{
	"": 1, "b": 1,
	"kb": KB, "mb": MB, "gb": GB, "tb": TB, "pb": PB,
	"kib": KiB, "mib": MiB, "gib": GiB, "tib": TiB, "pib": PiB,
	"ki": KiB, "mi": MiB, "gi": GiB, "ti": TiB, "pi": PiB,
}

// formatUnits are the units String writes, binary ones first so that they
// win ties.
var formatUnits = []struct {
	name string
	size Bytes
}{
	{"PiB", PiB}, {"TiB", TiB}, {"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB},
	{"PB", PB}, {"TB", TB}, {"GB", GB}, {"MB", MB}, {"KB", KB},
}

// ParseBytes reads a size such as "256MiB", "1.5 GB" or "4096".
func ParseBytes(s string) (Bytes, error) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "-") {
		return 0, fmt.Errorf("size %q is negative", clip(s))
	}
	num, unit := splitNumber(t)
	if num == "" {
		return 0, fmt.Errorf("%q is not a size: write a number with a unit, e.g. 256MiB or 2GiB", clip(s))
	}
	unit = strings.TrimSpace(unit)
	size, ok := byteUnits[strings.ToLower(unit)]
	if !ok {
		switch strings.ToLower(unit) {
		case "k", "m", "g", "t", "p":
			u := strings.ToUpper(unit)
			return 0, fmt.Errorf("unit %q in %q is ambiguous: write %sB (powers of 1000) or %siB (powers of 1024)", clip(unit), clip(s), u, u)
		}
		return 0, fmt.Errorf("unknown unit %q in %q: use B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024)", unit, clip(s))
	}
	r, err := parseDecimal(num)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size: %v", clip(s), err)
	}
	r.Mul(r, new(big.Rat).SetUint64(uint64(size)))
	if !r.IsInt() {
		return 0, fmt.Errorf("%q is not a whole number of bytes", clip(s))
	}
	if !r.Num().IsUint64() {
		return 0, fmt.Errorf("%q is too large", clip(s))
	}
	return Bytes(r.Num().Uint64()), nil
}

// String writes b exactly, in the unit that gives the smallest whole
// number: "256MiB", "512MB", "1000B". ParseBytes reads it back.
func (b Bytes) String() string {
	best, bestN := "B", uint64(b)
	for _, u := range formatUnits {
		if b != 0 && b%u.size == 0 && uint64(b/u.size) < bestN {
			best, bestN = u.name, uint64(b/u.size)
		}
	}
	return strconv.FormatUint(bestN, 10) + best
}

// MarshalYAML writes b as String does.
func (b Bytes) MarshalYAML() ([]byte, error) {
	return []byte(b.String()), nil
}

// Duration is a length of time. In YAML it is a Go duration ("90s", "10m",
// "1h30m", "500ms") that may also start with a number of days ("2d",
// "1d12h"). A bare number is an error: it has no unit.
type Duration time.Duration

const day = 24 * time.Hour

// ParseDuration reads a duration such as "10m", "1h30m" or "2d".
func ParseDuration(s string) (Duration, error) {
	t := strings.TrimSpace(s)
	notDuration := fmt.Errorf("%q is not a duration: write e.g. 90s, 10m, 1h30m or 2d", clip(s))
	if t == "" {
		return 0, notDuration
	}
	neg := false
	if t[0] == '-' || t[0] == '+' {
		neg = t[0] == '-'
		t = t[1:]
	}
	if num, rest := splitNumber(t); num != "" && rest == "" {
		msg := fmt.Sprintf("duration %q has no unit: write e.g. %ss", clip(s), num)
		if n, err := strconv.ParseUint(num, 10, 32); err == nil && n >= 60 && n%60 == 0 {
			msg += fmt.Sprintf(" or %dm", n/60)
		}
		return 0, errors.New(msg)
	}
	var total time.Duration
	if i := strings.IndexByte(t, 'd'); i >= 0 {
		days, err := parseDecimal(t[:i])
		if err != nil {
			return 0, notDuration
		}
		days.Mul(days, new(big.Rat).SetInt64(int64(day)))
		if !days.IsInt() || !days.Num().IsInt64() {
			return 0, fmt.Errorf("duration %q is out of range", clip(s))
		}
		total = time.Duration(days.Num().Int64())
		t = t[i+1:]
	}
	if t != "" {
		if t[0] == '-' || t[0] == '+' {
			return 0, notDuration
		}
		rest, err := time.ParseDuration(t)
		if err != nil {
			if strings.Contains(err.Error(), "unknown unit") {
				return 0, fmt.Errorf("unknown unit in duration %q: use s, m, h or d (e.g. 90s, 10m, 1h30m, 2d)", clip(s))
			}
			return 0, notDuration
		}
		if total > math.MaxInt64-rest {
			return 0, fmt.Errorf("duration %q is out of range", clip(s))
		}
		total += rest
	}
	if neg {
		total = -total
	}
	return Duration(total), nil
}

// String writes d as ParseDuration reads it, in days when it is a whole
// number of them ("7d") and otherwise in hours, minutes and seconds
// ("36h", "1h30m", "1.5s").
func (d Duration) String() string {
	if d == 0 {
		return "0s"
	}
	var b strings.Builder
	u := uint64(d)
	if d < 0 {
		b.WriteByte('-')
		u = -u
	}
	if u%uint64(day) == 0 {
		b.WriteString(strconv.FormatUint(u/uint64(day), 10) + "d")
		return b.String()
	}
	if h := u / uint64(time.Hour); h > 0 {
		b.WriteString(strconv.FormatUint(h, 10) + "h")
	}
	u %= uint64(time.Hour)
	if m := u / uint64(time.Minute); m > 0 {
		b.WriteString(strconv.FormatUint(m, 10) + "m")
	}
	if u %= uint64(time.Minute); u > 0 {
		b.WriteString(time.Duration(u).String())
	}
	return b.String()
}

// MarshalYAML writes d as String does.
func (d Duration) MarshalYAML() ([]byte, error) {
	return []byte(d.String()), nil
}

// Price is an amount of usync per hour (1 SYNC = 10^6 usync). In YAML it
// is a number of SYNC ("0.5"), or a number with its unit ("0.5sync",
// "500000usync"), optionally followed by "/h".
type Price uint64

// usyncPerSync is the number of base units in one SYNC.
const usyncPerSync = 1_000_000

// ParsePrice reads a price per hour such as "0.5", "0.5 SYNC",
// "500000usync" or "1.2sync/h". A bare number is SYNC, not usync.
func ParsePrice(s string) (Price, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	for _, suffix := range []string{"/hour", "/h"} {
		if strings.HasSuffix(t, suffix) {
			t = strings.TrimSpace(strings.TrimSuffix(t, suffix))
			break
		}
	}
	scale := int64(usyncPerSync)
	switch {
	case strings.HasSuffix(t, "usync"):
		t, scale = strings.TrimSuffix(t, "usync"), 1
	case strings.HasSuffix(t, "sync"):
		t = strings.TrimSuffix(t, "sync")
	}
	u, err := usyncOf(s, t, scale, "price", "a price: write SYNC per hour, e.g. 0.5, 0.5sync or 500000usync")
	return Price(u), err
}

// usyncOf is the number t (s without its unit) times scale, in whole
// usync: what a price and an amount share. Its errors name s as what
// (price, amount) and say what it is not with notA.
func usyncOf(s, t string, scale int64, what, notA string) (uint64, error) {
	t = strings.TrimSpace(t)
	if strings.HasPrefix(t, "-") {
		return 0, fmt.Errorf("%s %q is negative", what, clip(s))
	}
	r, err := parseDecimal(t)
	if err != nil {
		return 0, fmt.Errorf("%q is not %s", clip(s), notA)
	}
	r.Mul(r, new(big.Rat).SetInt64(scale))
	if !r.IsInt() {
		return 0, fmt.Errorf("%s %q is finer than 1 usync (0.000001 SYNC)", what, clip(s))
	}
	if !r.Num().IsUint64() {
		return 0, fmt.Errorf("%s %q is too large", what, clip(s))
	}
	return r.Num().Uint64(), nil
}

// Sync writes p as a decimal number of SYNC, exactly: "0.5", "2",
// "0.000001".
func (p Price) Sync() string {
	whole, frac := uint64(p)/usyncPerSync, uint64(p)%usyncPerSync
	s := strconv.FormatUint(whole, 10)
	if frac != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%06d", frac), "0")
	}
	return s
}

// String writes p for people: "0.5 SYNC/h".
func (p Price) String() string {
	return p.Sync() + " SYNC/h"
}

// MarshalYAML writes p as a number of SYNC, as a spec writes max_price.
func (p Price) MarshalYAML() ([]byte, error) {
	return []byte(p.Sync()), nil
}

// splitNumber splits s into a leading unsigned decimal number (digits
// with at most one point) and the rest.
func splitNumber(s string) (num, rest string) {
	i, digits, dot := 0, 0, false
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case '0' <= c && c <= '9':
			digits++
			continue
		case c == '.' && !dot:
			dot = true
			continue
		}
		break
	}
	if digits == 0 {
		return "", s
	}
	return s[:i], s[i:]
}

// parseDecimal reads an unsigned decimal number, optionally with an
// exponent of at most three digits ("1.5", ".5", "2e-3"), exactly. It
// refuses what big.Rat alone would also take: signs, fractions "a/b", base
// prefixes, underscores and exponents large enough to exhaust memory.
func parseDecimal(s string) (*big.Rat, error) {
	mant, exp := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, exp = s[:i], s[i+1:]
		e := strings.TrimPrefix(strings.TrimPrefix(exp, "-"), "+")
		if e == "" || len(e) > 3 || strings.Trim(e, "0123456789") != "" {
			return nil, fmt.Errorf("bad exponent in %q", clip(s))
		}
	}
	if num, rest := splitNumber(mant); num == "" || rest != "" {
		return nil, fmt.Errorf("%q is not a decimal number", clip(s))
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, fmt.Errorf("%q is not a decimal number", clip(s))
	}
	return r, nil
}

// Tolerance is a number in [0, 1] in parts per 10^18, as the ledger keeps
// it (ledger.CompareSpec): 1e-5 is 10^13. In YAML it is a decimal number,
// read from its text exactly.
type Tolerance uint64

// tolerancePerUnit is a tolerance of 1.
const tolerancePerUnit = ledger.MaxToleranceE18

// ParseTolerance reads a tolerance such as "1e-5", "0.00001" or "0". It
// refuses a negative number, one over 1, NaN and infinities, and one
// finer than 1e-18, the ledger's unit.
func ParseTolerance(s string) (Tolerance, error) {
	t := strings.TrimSpace(s)
	switch l := strings.ToLower(strings.TrimLeft(t, "+-")); {
	case strings.HasPrefix(t, "-"):
		return 0, fmt.Errorf("%q is negative; a tolerance is a number in [0, 1]", clip(s))
	case l == ".nan" || l == "nan" || l == ".inf" || l == "inf" || l == "infinity":
		return 0, fmt.Errorf("%q is not a number in [0, 1]; a tolerance must be finite", clip(s))
	}
	r, err := parseDecimal(t)
	if err != nil {
		return 0, fmt.Errorf("%q is not a tolerance: write a decimal number in [0, 1], e.g. 1e-5 or 0.00001", clip(s))
	}
	if r.Cmp(big.NewRat(1, 1)) > 0 {
		return 0, fmt.Errorf("%q is more than 1; a tolerance is a number in [0, 1]", clip(s))
	}
	r.Mul(r, new(big.Rat).SetInt64(tolerancePerUnit))
	if !r.IsInt() {
		return 0, fmt.Errorf("%q is finer than 1e-18, the smallest step the chain keeps", clip(s))
	}
	return Tolerance(r.Num().Uint64()), nil
}

// String writes t as an exact decimal number: "0.00001", "1", "0".
func (t Tolerance) String() string {
	whole, frac := uint64(t)/tolerancePerUnit, uint64(t)%tolerancePerUnit
	s := strconv.FormatUint(whole, 10)
	if frac != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%018d", frac), "0")
	}
	return s
}

// MarshalYAML writes t as the decimal number a spec writes.
func (t Tolerance) MarshalYAML() ([]byte, error) {
	return []byte(t.String()), nil
}
