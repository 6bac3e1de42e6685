package cli

import (
	"strings"
	"testing"
)

func TestParseAmount(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		err  string
	}{
		{"1500usync", 1500, ""},
		{" 1500 usync ", 1500, ""},
		{"2.5sync", 2_500_000, ""},
		{"2.5SYNC", 2_500_000, ""},
		{"0.000001sync", 1, ""},
		{"18446744073709551615usync", 18446744073709551615, ""},
		// A bare number is refused, with both readings spelt out.
		{"5", 0, `amount "5" has no unit: write 5sync for 5 SYNC, or 5usync for 0.000005 SYNC`},
		{"1500", 0, `write 1500sync for 1500 SYNC, or 1500usync for 0.0015 SYNC`},
		{"2.5", 0, `amount "2.5" has no unit: write 2.5sync for 2.5 SYNC`},
		{"18446744073709551616", 0, "has no unit"},
		{"0", 0, "positive"},
		{"0usync", 0, "positive"},
		{"-5", 0, "negative"},
		{"1.5usync", 0, "whole number"},
		{"0.0000001sync", 0, "whole number"},
		{"18446744073709551616usync", 0, "too large"},
		{"99999999999999999sync", 0, "too large"},
		{"1e6", 0, "not a number"},
		{"sync", 0, "no number"},
		{"abc", 0, "not a number"},
		{"1/2", 0, "not a number"},
	} {
		got, err := parseAmount(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseAmount(%q) = %d, %v; want error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseAmount(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestFormatAmount(t *testing.T) {
	for in, want := range map[uint64]string{
		2_500_000: "2.5 SYNC (2500000 usync)",
		1:         "0.000001 SYNC (1 usync)",
		7_000_000: "7 SYNC (7000000 usync)",
	} {
		if got := formatAmount(in); got != want {
			t.Errorf("formatAmount(%d) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParseAmount(f *testing.F) {
	for _, s := range []string{"1", "1usync", "2.5sync", "-1", "1e9", "0.1usync", "99999999999999999999sync"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseAmount(s)
		if err == nil && v == 0 {
			t.Fatalf("parseAmount(%q) accepted zero", s)
		}
		if err == nil && !strings.HasSuffix(strings.ToLower(strings.TrimSpace(s)), "sync") {
			t.Fatalf("parseAmount(%q) = %d: accepted an amount without its unit", s, v)
		}
	})
}
