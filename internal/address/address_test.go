package address

import (
	"crypto/ed25519"
	"errors"
	"math/rand/v2"
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

// slowParse is Parse without its fast path: the BIP-173 reference steps.
func slowParse(s string) (Address, error) {
	var a Address
	hrp, data, err := bech32Decode(s)
	if err != nil {
		return a, err
	}
	b, err := convertBitsStrict(data)
	if err != nil || hrp != HRP || len(b) != Len {
		return a, errors.New("not an address")
	}
	copy(a[:], b)
	return a, nil
}

// TestFastPathsMatchReference: String, MarshalText, Parse and
// UnmarshalText, which skip the general bech32 code for the usual form,
// give what the general code gives, for valid addresses and for every
// one-character change of them (a typo, a case change, another prefix).
func TestFastPathsMatchReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		var a Address
		for i := range a {
			a[i] = byte(r.Uint32())
		}
		want, err := bech32Encode(HRP, convertBits(a[:], 8, 5, true))
		if err != nil {
			t.Fatal(err)
		}
		if got := a.String(); got != want {
			t.Fatalf("String() = %q, want %q", got, want)
		}
		if got, _ := a.MarshalText(); string(got) != want {
			t.Fatalf("MarshalText() = %q, want %q", got, want)
		}
		inputs := []string{want, strings.ToUpper(want), "bc" + want[3:], want[:len(want)-1], want + "q"}
		for range 20 {
			b := []byte(want)
			b[r.IntN(len(b))] = "qpzry9x8gf2tvdw0s3jn54khce6mua7lQPbio1G"[r.IntN(39)]
			inputs = append(inputs, string(b))
		}
		for _, s := range inputs {
			ref, refErr := slowParse(s)
			got, err := Parse(s)
			if (err == nil) != (refErr == nil) || got != ref {
				t.Fatalf("Parse(%q) = %x, %v; reference %x, %v", s, got, err, ref, refErr)
			}
			var u Address
			err = u.UnmarshalText([]byte(s))
			if (err == nil) != (refErr == nil) || u != ref {
				t.Fatalf("UnmarshalText(%q) = %x, %v; reference %x, %v", s, u, err, ref, refErr)
			}
		}
	}
}

func BenchmarkString(b *testing.B) {
	a := FromPubKey(make([]byte, ed25519.PublicKeySize))
	for b.Loop() {
		_ = a.String()
	}
}

func BenchmarkParse(b *testing.B) {
	s := FromPubKey(make([]byte, ed25519.PublicKeySize)).String()
	for b.Loop() {
		Parse(s)
	}
}
