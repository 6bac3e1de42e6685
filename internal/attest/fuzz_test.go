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

// FuzzGPUReport feeds the NVIDIA report parser and Verify arbitrary
// reports with the real Hopper chain: never a panic, every refusal with a
// reason, and nothing but the recorded report verifies (its signature
// covers every byte but itself).
func FuzzGPUReport(f *testing.F) {
	hopper, old := realGPU(f, "hopper"), realGPU(f, "old")
	f.Add(hopper.Raw)
	f.Add(old.Raw)
	f.Add(hopper.Raw[:spdmRequestLen+spdmResponseHeaderLen+10])
	f.Add([]byte{0x11, 0xE0, 0x01, 0xFF})
	f.Fuzz(func(t *testing.T, raw []byte) {
		rep, perr := ParseGPUReport(raw)
		if perr == nil && (len(rep.Signature) != p384SignatureLen || len(rep.Signed)+p384SignatureLen != len(raw)) {
			t.Fatalf("parsed report with a %d-byte signature over %d of %d bytes", len(rep.Signature), len(rep.Signed), len(raw))
		}
		ev := Evidence{Kind: KindNVIDIAGPU, Raw: raw, Collateral: hopper.Collateral}
		_, err := Verify(ev, gpuOpts())
		if err != nil {
			if ReasonOf(err) == "" {
				t.Fatalf("refusal without a reason: %v", err)
			}
			return
		}
		if perr != nil {
			t.Fatalf("verified a report the parser refuses: %v", perr)
		}
		if !bytes.Equal(raw, hopper.Raw) {
			t.Fatalf("a report other than the recorded one verified with its chain")
		}
	})
}
