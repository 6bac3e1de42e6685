package offers

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics, that its errors point inside the
// input at the text they name, and that a parsed query's canonical form
// parses back to a query with the same canonical form and the same matches.
func FuzzParse(f *testing.F) {
	for _, tt := range matchTests {
		f.Add(tt.query)
	}
	for _, tt := range errorTests {
		f.Add(tt.query)
	}
	f.Add(`region='a"b' gpu in ["x y",'z'] vram>=1.5e3tib`)
	f.Add("count>=-0.0 price<1e-400 stake>18446744073709551616")
	offers := fixture()
	f.Fuzz(func(t *testing.T, s string) {
		q, err := Parse(s)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q) error %T, want *ParseError", s, err)
			}
			if pe.Pos < 0 || pe.Pos+len(pe.Term) > len(s) || s[pe.Pos:pe.Pos+len(pe.Term)] != pe.Term {
				t.Fatalf("Parse(%q): Term %q is not the input at Pos %d", s, pe.Term, pe.Pos)
			}
			if pe.Msg == "" || !strings.HasPrefix(pe.Error(), "invalid offers query: ") {
				t.Fatalf("Parse(%q): bad error %q", s, pe.Error())
			}
			return
		}
		c := q.String()
		q2, err := Parse(c)
		if err != nil {
			t.Fatalf("Parse(%q).String() = %q, which does not parse: %v", s, c, err)
		}
		if c2 := q2.String(); c2 != c {
			t.Fatalf("String not stable: %q → %q → %q", s, c, c2)
		}
		for i := range offers {
			if q.Match(&offers[i]) != q2.Match(&offers[i]) {
				t.Fatalf("%q and its canonical form %q disagree on %s", s, c, offers[i].Address)
			}
		}
	})
}

// FuzzParseSort checks that ParseSort never panics and that the keys it
// returns, written back with SortKey.String, parse to the same keys.
func FuzzParseSort(f *testing.F) {
	for _, s := range []string{"", "price", "price-", "-price", "price-,tops", " dph - , Reliability ", "prce", "price,,tops", "--price", "executor", "-gpu-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		keys, err := ParseSort(s)
		if err != nil {
			return
		}
		if len(keys) == 0 {
			t.Fatalf("ParseSort(%q) returned no keys and no error", s)
		}
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k.String()
		}
		again, err := ParseSort(strings.Join(parts, ","))
		if err != nil || !reflect.DeepEqual(again, keys) {
			t.Fatalf("ParseSort(%q) = %v; reparsed %v, %v", s, keys, again, err)
		}
		Sort(fixture(), keys)
	})
}
