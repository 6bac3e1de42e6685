package attest

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha512"
	"testing"
	"time"
)

// baselines times one ed25519 and one ECDSA P-384 signature verification
// on this machine, now (mean of n), for ratios measured in the same run.
func baselines(n int) (ed, p384 time.Duration) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	msg := []byte("gpunet attest baseline")
	sig := ed25519.Sign(priv, msg)
	start := time.Now()
	for i := 0; i < n; i++ {
		if !ed25519.Verify(pub, msg, sig) {
			panic("ed25519")
		}
	}
	ed = time.Since(start) / time.Duration(n)
	k, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	h := sha512.Sum384(msg)
	s, _ := ecdsa.SignASN1(rand.Reader, k, h[:])
	start = time.Now()
	for i := 0; i < n; i++ {
		if !ecdsa.VerifyASN1(&k.PublicKey, h[:], s) {
			panic("p384")
		}
	}
	p384 = time.Since(start) / time.Duration(n)
	return ed, p384
}

// BenchmarkVerify is a validator's cost of verifying one piece of
// evidence with its collateral, all checks passing: TDX (a quote of the
// recorded one's shape, signed by the test PKI: the same library path as
// Intel-signed evidence, whose recorded sample is refused at the last
// step, see TestRealTDXQuoteStaleTCB) and SEV-SNP (the recorded,
// AMD-signed report). ×ed25519 and ×p384 divide it by one ed25519 and
// one ECDSA P-384 verification timed in the same run.
func BenchmarkVerify(b *testing.B) {
	p := testTDXPKI(b)
	s := testSNPPKI(b)
	cases := []struct {
		name string
		ev   Evidence
		o    Options
	}{
		{"tdx", Evidence{Kind: KindTDX, Raw: p.quote(ReportData(nonce1, key1)), Collateral: p.collateral(tdxCollateralOpts{})},
			Options{Now: tdxAt, Nonce: nonce1, Key: key1, TrustedRoots: p.roots()}},
		{"sev-snp", realSNP(b), realSNPOpts()},
		{"sev-snp-with-crl", Evidence{Kind: KindSEVSNP, Raw: s.report(ReportData(nonce1, key1)), Collateral: s.collateral(false)},
			Options{Now: snpAt, Nonce: nonce1, Key: key1, TrustedRoots: s.roots()}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			if _, err := Verify(tc.ev, tc.o); err != nil {
				b.Fatal(err)
			}
			ed, p384 := baselines(2000)
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if _, err := Verify(tc.ev, tc.o); err != nil {
					b.Fatal(err)
				}
			}
			per := time.Since(start) / time.Duration(b.N)
			b.ReportMetric(float64(per)/float64(ed), "×ed25519")
			b.ReportMetric(float64(per)/float64(p384), "×p384")
			b.ReportMetric(float64(ed.Nanoseconds()), "ed25519-ns")
			b.ReportMetric(float64(p384.Nanoseconds()), "p384-ns")
		})
	}
}
