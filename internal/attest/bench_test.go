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

// baseline is one ed25519 and one ECDSA P-384 signature verification,
// run between the verifications so that both see the same load.
type baseline struct {
	edPub ed25519.PublicKey
	edSig []byte
	p384  *ecdsa.PublicKey
	p384H []byte
	p384S []byte
	msg   []byte
}

func newBaseline() *baseline {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	msg := []byte("gpunet attest baseline")
	k, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	h := sha512.Sum384(msg)
	s, _ := ecdsa.SignASN1(rand.Reader, k, h[:])
	return &baseline{edPub: pub, edSig: ed25519.Sign(priv, msg), p384: &k.PublicKey, p384H: h[:], p384S: s, msg: msg}
}

func (b *baseline) ed25519() {
	if !ed25519.Verify(b.edPub, b.msg, b.edSig) {
		panic("ed25519")
	}
}

func (b *baseline) p384Verify() {
	if !ecdsa.VerifyASN1(b.p384, b.p384H, b.p384S) {
		panic("p384")
	}
}

// BenchmarkVerify is a validator's cost of verifying one piece of
// evidence with its collateral, all checks passing: TDX (a quote of the
// recorded one's shape, signed by the test PKI: the same library path as
// Intel-signed evidence, whose recorded sample is refused at the last
// step, see TestRealTDXQuoteStaleTCB) and SEV-SNP (the recorded,
// AMD-signed report); sev-snp-with-crl adds the CRL (test signer).
// verify-ns is one Verify; ×ed25519 and ×p384 divide it by one ed25519
// and one ECDSA P-384 verification, each timed right after each Verify
// (ns/op counts all three).
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
		{"nvidia-gpu", realGPU(b, "hopper"), gpuOpts()},
		{"nvidia-gpu-cold", realGPU(b, "hopper"), gpuOpts()},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			// nvidia-gpu: the chain's links verified before (the GPU
			// attests again, or another H100 shares the upper links);
			// -cold: every link verified afresh.
			cold := tc.name == "nvidia-gpu-cold"
			if _, err := Verify(tc.ev, tc.o); err != nil {
				b.Fatal(err)
			}
			base := newBaseline()
			var verify, ed, p384 time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if cold {
					links.reset()
				}
				t0 := time.Now()
				if _, err := Verify(tc.ev, tc.o); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				for j := 0; j < 10; j++ {
					base.ed25519()
				}
				t2 := time.Now()
				base.p384Verify()
				t3 := time.Now()
				verify, ed, p384 = verify+t1.Sub(t0), ed+t2.Sub(t1)/10, p384+t3.Sub(t2)
			}
			n := float64(b.N)
			b.ReportMetric(float64(verify.Nanoseconds())/n, "verify-ns")
			b.ReportMetric(float64(verify)/float64(ed), "×ed25519")
			b.ReportMetric(float64(verify)/float64(p384), "×p384")
			b.ReportMetric(float64(ed.Nanoseconds())/n, "ed25519-ns")
			b.ReportMetric(float64(p384.Nanoseconds())/n, "p384-ns")
		})
	}
}
