package address

import (
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	a := FromPubKey(pub)
	s := a.String()
	if !strings.HasPrefix(s, "gpu1") {
		t.Fatalf("got %q, want gpu1 prefix", s)
	}
	got, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	if got != a {
		t.Fatalf("got %x, want %x", got, a)
	}
	if up, err := Parse(strings.ToUpper(s)); err != nil || up != a {
		t.Fatalf("upper-case form: %v", err)
	}
}

func TestTypoCaught(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	s := FromPubKey(pub).String()
	for i := 4; i < len(s); i++ {
		for _, c := range charset {
			if byte(c) == s[i] {
				continue
			}
			typo := s[:i] + string(c) + s[i+1:]
			if _, err := Parse(typo); err == nil {
				t.Fatalf("typo %q at %d accepted", typo, i)
			}
		}
	}
	swapped := s[:5] + string(s[6]) + string(s[5]) + s[7:]
	if swapped != s {
		if _, err := Parse(swapped); !errors.Is(err, ErrChecksum) {
			t.Fatalf("transposition: got %v, want ErrChecksum", err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "empty"},
		{"gpu1", "too short"},
		{"cosmos1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq", "checksum"},
		{"gpu1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqb", "invalid character"},
		{"Gpu1qqqq", "mixes"},
		{"noseparator", "prefix"},
	} {
		_, err := Parse(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want error containing %q", tc.in, err, tc.want)
		}
	}
	// Right checksum, wrong prefix.
	s, _ := bech32Encode("cosmos", convertBits(make([]byte, 20), 8, 5, true))
	if _, err := Parse(s); err == nil || !strings.Contains(err.Error(), `want "gpu"`) {
		t.Errorf("wrong prefix: got %v", err)
	}
	// Right prefix and checksum, wrong length.
	s, _ = bech32Encode(HRP, convertBits(make([]byte, 19), 8, 5, true))
	if _, err := Parse(s); err == nil || !strings.Contains(err.Error(), "want 20") {
		t.Errorf("wrong length: got %v", err)
	}
}

func FuzzParse(f *testing.F) {
	pub, _, _ := ed25519.GenerateKey(nil)
	f.Add(FromPubKey(pub).String())
	f.Add("gpu1")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		a, err := Parse(s)
		if err != nil {
			return
		}
		if !strings.EqualFold(a.String(), s) {
			t.Fatalf("Parse(%q) = %s: not canonical", s, a)
		}
	})
}
