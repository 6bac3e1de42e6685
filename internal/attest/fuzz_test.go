package attest

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzVerify feeds Verify evidence bytes with fixed, genuine collateral:
// it must never panic, and whatever verifies must prove exactly what a
// seed proves (no bit of the evidence changes the claims unnoticed).
func FuzzVerify(f *testing.F) {
	p := testTDXPKI(f)
	tdxCol := p.collateral(tdxCollateralOpts{})
	tdxOpts := Options{Now: tdxAt, Nonce: nonce1, Key: key1, TrustedRoots: p.roots()}
	tdxSeed := p.quote(ReportData(nonce1, key1))
	snp := realSNP(f)
	snpOpts := realSNPOpts()

	claimsOf := func(ev Evidence, o Options) string {
		c, err := Verify(ev, o)
		if err != nil {
			f.Fatal(err)
		}
		b, _ := json.Marshal(c)
		return string(b)
	}
	want := map[Kind]string{
		KindTDX:    claimsOf(Evidence{Kind: KindTDX, Raw: tdxSeed, Collateral: tdxCol}, tdxOpts),
		KindSEVSNP: claimsOf(snp, snpOpts),
	}
	f.Add(uint8(0), tdxSeed)
	f.Add(uint8(1), snp.Raw)
	f.Add(uint8(0), realTDX(f).Raw)
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		var ev Evidence
		var o Options
		if which%2 == 0 {
			ev, o = Evidence{Kind: KindTDX, Raw: raw, Collateral: tdxCol}, tdxOpts
		} else {
			ev, o = Evidence{Kind: KindSEVSNP, Raw: raw, Collateral: snp.Collateral}, snpOpts
		}
		DetectKind(raw)
		c, err := Verify(ev, o)
		if err != nil {
			if ReasonOf(err) == "" {
				t.Fatalf("refusal without a reason: %v", err)
			}
			return
		}
		got, _ := json.Marshal(c)
		if !bytes.Equal(got, []byte(want[ev.Kind])) {
			t.Fatalf("mutated evidence verified with other claims:\n%s\nwant\n%s", got, want[ev.Kind])
		}
	})
}
