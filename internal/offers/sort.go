package offers

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// SortKey is one key of a sort order.
type SortKey struct {
	Field string // a field name from Fields
	Desc  bool   // largest first
}

// String returns k as ParseSort reads it: "price" or "price-".
func (k SortKey) String() string {
	if k.Desc {
		return k.Field + "-"
	}
	return k.Field
}

// ParseSort parses a sort order: comma-separated field names (or aliases),
// each ascending, or descending when written with a trailing or leading
// dash ("price-" or "-price"), e.g. "price-,tops". The empty order is the
// default, cheapest first: price, then address. Keys are returned with
// canonical field names. Every field but executor (a set) is sortable;
// strings sort case-insensitively, compute_cap as a version, false before
// true.
func ParseSort(s string) ([]SortKey, error) {
	if strings.TrimSpace(s) == "" {
		return []SortKey{{Field: "price"}, {Field: "address"}}, nil
	}
	var keys []SortKey
	for raw := range strings.SplitSeq(s, ",") {
		name := strings.TrimSpace(raw)
		desc := false
		if rest, ok := strings.CutPrefix(name, "-"); ok {
			name, desc = strings.TrimSpace(rest), true
		} else if rest, ok := strings.CutSuffix(name, "-"); ok {
			name, desc = strings.TrimSpace(rest), true
		}
		if name == "" {
			return nil, fmt.Errorf("invalid sort order %q: empty key; write fields separated by commas, e.g. price-,tops", s)
		}
		f := lookup(name)
		if f == nil {
			hint := ""
			if sg := suggest(name); sg != "" {
				hint = fmt.Sprintf("did you mean %q?; ", sg)
			}
			return nil, fmt.Errorf("invalid sort key %q: unknown field %q (%sfields: %s)", strings.TrimSpace(raw), name, hint, fieldNames())
		}
		if f.kind == kindSet {
			return nil, fmt.Errorf("invalid sort key %q: %s is a set and has no order", strings.TrimSpace(raw), f.name)
		}
		keys = append(keys, SortKey{Field: f.name, Desc: desc})
	}
	return keys, nil
}

// Sort sorts offers by keys, in order of precedence, then by address, so
// that the result does not depend on the input order unless two offers
// share an address. It is stable. Keys naming no sortable field are
// ignored; ParseSort returns only valid ones.
func Sort(offers []Offer, keys []SortKey) {
	cmp := Comparer(keys)
	slices.SortStableFunc(offers, func(a, b Offer) int { return cmp(&a, &b) })
}

// Comparer returns Sort's ordering by keys, for sorting slices of other
// types that hold offers.
func Comparer(keys []SortKey) func(a, b *Offer) int {
	type keyCmp struct {
		cmp  func(a, b *Offer) int
		desc bool
	}
	var cmps []keyCmp
	for _, k := range keys {
		f := lookup(k.Field)
		if f == nil || f.kind == kindSet {
			continue
		}
		cmps = append(cmps, keyCmp{fieldCmp(f), k.Desc})
	}
	return func(a, b *Offer) int {
		for _, k := range cmps {
			c := k.cmp(a, b)
			if k.desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return strings.Compare(a.Address, b.Address)
	}
}

// fieldCmp returns the ordering of f's values.
func fieldCmp(f *field) func(a, b *Offer) int {
	switch f.kind {
	case kindString, kindTEE:
		return func(a, b *Offer) int { return cmpFold(f.str(a), f.str(b), false) }
	case kindGPU:
		return func(a, b *Offer) int { return cmpFold(f.str(a), f.str(b), true) }
	case kindVersion:
		return func(a, b *Offer) int { return cmpVersions(f.str(a), f.str(b)) }
	case kindBool:
		return func(a, b *Offer) int {
			x, y := f.bool(a), f.bool(b)
			switch {
			case x == y:
				return 0
			case y:
				return -1
			default:
				return 1
			}
		}
	case kindInt:
		return func(a, b *Offer) int {
			an, am := f.intv(a)
			bn, bm := f.intv(b)
			return cmpSigned(an, am, bn, bm)
		}
	default: // kindNumber, kindSize; NaN sorts first
		return func(a, b *Offer) int { return cmp.Compare(f.num(a), f.num(b)) }
	}
}

// cmpFold compares a and b ignoring ASCII case and, for GPU classes,
// treating spaces and dashes as underscores.
func cmpFold(a, b string, gpu bool) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		x, y := lower(a[i]), lower(b[i])
		if gpu {
			x, y = sepToUnderscore(x), sepToUnderscore(y)
		}
		if x != y {
			return cmp.Compare(x, y)
		}
	}
	return cmp.Compare(len(a), len(b))
}

func sepToUnderscore(c byte) byte {
	if c == ' ' || c == '-' {
		return '_'
	}
	return c
}
