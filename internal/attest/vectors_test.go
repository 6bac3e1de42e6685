package attest

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// tdxAt is an instant inside the validity of the recorded TDX collateral
// (TCB info issued 2023-06-18, QE identity valid until 2023-07-08).
var tdxAt = time.Date(2023, time.July, 1, 0, 0, 0, 0, time.UTC)

// snpAt is an instant inside the validity of the recorded VCEK
// (2022-09-24 to 2029-09-24).
var snpAt = time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC)

func readVector(t testing.TB, kind Kind, dir string, names ...string) Evidence {
	t.Helper()
	raw := map[Kind]string{KindTDX: "quote.dat", KindSEVSNP: "report.bin"}[kind]
	b, err := os.ReadFile(filepath.Join("testdata", dir, raw))
	if err != nil {
		t.Fatal(err)
	}
	ev := Evidence{Kind: kind, Raw: b, Collateral: map[string][]byte{}}
	if names == nil {
		names = CollateralNames(kind)
	}
	for _, n := range names {
		c, err := os.ReadFile(filepath.Join("testdata", dir, n))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		ev.Collateral[n] = c
	}
	return ev
}

func realTDX(t testing.TB) Evidence { return readVector(t, KindTDX, "tdx") }
func realSNP(t testing.TB) Evidence { return readVector(t, KindSEVSNP, "snp") }

func TestRealTDXQuoteVerifies(t *testing.T) {
	c, err := Verify(realTDX(t), Options{Now: tdxAt, SkipBinding: true, TrustedRoots: DefaultRoots()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", c)
}

func TestRealSNPReportVerifies(t *testing.T) {
	c, err := Verify(realSNP(t), Options{Now: snpAt, SkipBinding: true, TrustedRoots: DefaultRoots(), AllowMissingCRL: true, AllowDebug: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", c)
}

func TestSyntheticTDXBound(t *testing.T) {
	p := testTDXPKI(t)
	nonce, key := []byte("nonce-1"), []byte("age1key")
	ev := Evidence{Kind: KindTDX, Raw: p.quote(ReportData(nonce, key)), Collateral: p.collateral(tdxCollateralOpts{})}
	c, err := Verify(ev, Options{Now: tdxAt, Nonce: nonce, Key: key, TrustedRoots: p.roots()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", c)
}

func TestSyntheticSNPBound(t *testing.T) {
	s := testSNPPKI(t)
	nonce, key := []byte("nonce-1"), []byte("age1key")
	ev := Evidence{Kind: KindSEVSNP, Raw: s.report(ReportData(nonce, key)), Collateral: s.collateral(false)}
	c, err := Verify(ev, Options{Now: snpAt, Nonce: nonce, Key: key, TrustedRoots: s.roots()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", c)
}
