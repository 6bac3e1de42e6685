package attest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tdxAt is an instant inside the validity of the recorded TDX collateral
// (TCB info issued 2023-06-18, QE identity and PCK CRL valid until
// 2023-07-08).
var tdxAt = time.Date(2023, time.July, 1, 0, 0, 0, 0, time.UTC)

// snpAt is an instant inside the validity of the recorded VCEK
// (2022-09-24 to 2029-09-24).
var snpAt = time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC)

func readVector(t testing.TB, kind Kind, dir string) Evidence {
	t.Helper()
	raw := map[Kind]string{KindTDX: "quote.dat", KindSEVSNP: "report.bin"}[kind]
	b, err := os.ReadFile(filepath.Join("testdata", dir, raw))
	if err != nil {
		t.Fatal(err)
	}
	ev := Evidence{Kind: kind, Raw: b, Collateral: map[string][]byte{}}
	for _, n := range CollateralNames(kind) {
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

// realSNPOpts verifies the recorded SNP report: it was taken from a guest
// whose policy allows debugging, and AMD's CRL was not recorded with it.
func realSNPOpts() Options {
	return Options{Now: snpAt, SkipBinding: true, TrustedRoots: DefaultRoots(), AllowMissingCRL: true, AllowDebug: true}
}

func realTDXOpts() Options {
	return Options{Now: tdxAt, SkipBinding: true, TrustedRoots: DefaultRoots()}
}

// wantRefused asserts err is a refusal for reason whose message holds
// every one of words.
func wantRefused(t *testing.T, err error, reason Reason, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("verified; want refused for %s", reason)
	}
	if got := ReasonOf(err); got != reason {
		t.Fatalf("refused for %q (%v); want %q", got, err, reason)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("refusal %q does not say %q", err, w)
		}
	}
}

func clone(ev Evidence) Evidence {
	out := Evidence{Kind: ev.Kind, Raw: bytes.Clone(ev.Raw), Collateral: map[string][]byte{}}
	for _, n := range CollateralNames(ev.Kind) {
		if b, ok := ev.Collateral[n]; ok {
			out.Collateral[n] = bytes.Clone(b)
		}
	}
	return out
}

// --- Real, vendor-signed evidence ---

// The recorded SEV-SNP report (a Milan guest's, from go-sev-guest's test
// data) verifies against AMD's real ARK: VCEK → ASK → ARK and the
// report's signature.
func TestRealSNPReportVerifies(t *testing.T) {
	c, err := Verify(realSNP(t), realSNPOpts())
	if err != nil {
		t.Fatal(err)
	}
	if c.Vendor != "AMD" || c.TEE != "SEV-SNP" || c.Platform != "AMD Milan (Milan-B0)" || !c.Debug || c.RevocationChecked || c.Bound {
		t.Errorf("claims %+v", c)
	}
	if c.Measurements[0].Name != "MEASUREMENT" || c.Measurements[0].Hex != "b07af9620f3b839b47996422ddec6058338951d984e312115131ea82705eaf5b6bdf8a9ece31a5a608eb0cf2e4872b01" {
		t.Errorf("measurement %+v", c.Measurements[0])
	}
	if !strings.HasPrefix(c.ReportData, "0102030405000000") || !strings.HasPrefix(c.ChipID, "3ac3fe21e13fb099") {
		t.Errorf("report data %s chip %s", c.ReportData, c.ChipID)
	}
	if want := time.Date(2029, 9, 24, 0, 55, 28, 0, time.UTC); !c.Expiry.Equal(want) {
		t.Errorf("expiry %s, want the VCEK's NotAfter %s", c.Expiry, want)
	}
}

// The recorded TDX quote (a Sapphire Rapids TD's, from go-tdx-guest's test
// data) passes every signature and chain check against Intel's real root
// with Intel's recorded TCB info, QE identity and CRLs: the PCK chain, the
// CRLs, the TCB info's and QE identity's signatures, the quote's and QE
// report's signatures, FMSPC, MRSIGNERSEAM and SEAM attributes. It is then
// refused at the last step, the TCB appraisal: its platform's CPU SVNs
// are below every level of that TCB info. go-tdx-guest checks all the
// signatures first, so a flipped bit turns this refusal into a signature
// one (TestRealTDXFlippedBit).
func TestRealTDXQuoteStaleTCB(t *testing.T) {
	_, err := Verify(realTDX(t), realTDXOpts())
	wantRefused(t, err, ReasonTCB, "PCK CPUSVN 03030202020100020000000000000000", "below every TCB level", "no matching TCB level found")
}

// --- Forgeries of real evidence, each refused with its reason ---

func TestRealSNPFlippedBit(t *testing.T) {
	for _, off := range []int{0x50, 0x90, 0x1a0, 0x2a0 + 8} { // report data, measurement, chip id, signature
		ev := clone(realSNP(t))
		ev.Raw[off] ^= 0x01
		_, err := Verify(ev, realSNPOpts())
		if off == 0x1a0 {
			// The chip id is checked against the VCEK before the signature.
			wantRefused(t, err, ReasonPlatform, "VCEK of chip")
			continue
		}
		wantRefused(t, err, ReasonSignature, "signature")
	}
}

func TestRealTDXFlippedBit(t *testing.T) {
	ev := clone(realTDX(t))
	ev.Raw[0x30+0x208] ^= 0x01 // header (0x30) + report data (body offset 0x208)
	_, err := Verify(ev, realTDXOpts())
	wantRefused(t, err, ReasonSignature, "unable to verify message digest")
}

func TestRealTDXTrailingBytes(t *testing.T) {
	ev := clone(realTDX(t))
	ev.Raw = append(ev.Raw, "extra"...)
	_, err := Verify(ev, realTDXOpts())
	wantRefused(t, err, ReasonMalformed, "5 unsigned bytes")
}

func TestRealSNPStaleTCB(t *testing.T) {
	o := realSNPOpts()
	o.MinTCB = map[Kind]MinTCB{KindSEVSNP: {BootloaderSPL: 2, SNPSPL: 5, MicrocodeSPL: 69}}
	_, err := Verify(realSNP(t), o)
	wantRefused(t, err, ReasonTCB, "microcode SPL is 68, the minimum is 69")
	o.MinTCB = map[Kind]MinTCB{KindSEVSNP: {BootloaderSPL: 2, SNPSPL: 5, MicrocodeSPL: 68}}
	if _, err := Verify(realSNP(t), o); err != nil {
		t.Fatalf("at the minimum: %v", err)
	}
}

func TestRealTDXStaleCollateral(t *testing.T) {
	o := realTDXOpts()
	o.MinTCB = map[Kind]MinTCB{KindTDX: {TCBEvaluationDataNumber: 16}}
	_, err := Verify(realTDX(t), o)
	wantRefused(t, err, ReasonTCB, "stale TCB info", "evaluation data number 15, the minimum is 16")
}

func TestRealTDXExpiredCollateral(t *testing.T) {
	o := realTDXOpts()
	o.Now = time.Date(2023, 7, 20, 0, 0, 0, 0, time.UTC)
	_, err := Verify(realTDX(t), o)
	wantRefused(t, err, ReasonExpired, "tcb_info.json expired at 2023-07-18T08:42:58Z")
	o.Now = time.Date(2023, 6, 1, 0, 0, 0, 0, time.UTC)
	_, err = Verify(realTDX(t), o)
	wantRefused(t, err, ReasonExpired, "not valid until")
}

// Replay: the right evidence, verified against another (a newer) nonce.
// The recorded evidence binds report data that is not the gpunet binding
// of any nonce the chain gives out.
func TestRealEvidenceWrongNonce(t *testing.T) {
	o := realSNPOpts()
	o.SkipBinding, o.Nonce, o.Key = false, []byte{1, 2, 3, 4, 5}, []byte("age1key")
	_, err := Verify(realSNP(t), o)
	wantRefused(t, err, ReasonBinding, "does not bind nonce 0102030405")
}

func TestRealSNPDebugPolicy(t *testing.T) {
	o := realSNPOpts()
	o.AllowDebug = false
	_, err := Verify(realSNP(t), o)
	wantRefused(t, err, ReasonPolicy, "allows debugging")
}

func TestRealSNPNeedsCRL(t *testing.T) {
	o := realSNPOpts()
	o.AllowMissingCRL = false
	_, err := Verify(realSNP(t), o)
	wantRefused(t, err, ReasonCollateral, "missing crl.der")
}

// Collateral of another platform, with real vendor certificates: the
// Genoa cert_chain for a Milan report.
func TestRealSNPOtherPlatformChain(t *testing.T) {
	ev := clone(realSNP(t))
	g, err := os.ReadFile("testdata/snp/genoa_cert_chain.pem")
	if err != nil {
		t.Fatal(err)
	}
	ev.Collateral[SNPCertChain] = g
	_, err = Verify(ev, realSNPOpts())
	wantRefused(t, err, ReasonPlatform, "product Milan-B0", "the Genoa chain")
}

func TestRealTDXOtherPlatformTCBInfo(t *testing.T) {
	ev := clone(realTDX(t))
	ev.Collateral[TDXTCBInfo] = bytes.Replace(ev.Collateral[TDXTCBInfo], []byte(`"fmspc":"50806f000000"`), []byte(`"fmspc":"00906ed50000"`), 1)
	_, err := Verify(ev, realTDXOpts())
	wantRefused(t, err, ReasonPlatform, "FMSPC 00906ed50000", "collateral of another platform")
}

func TestUntrustedRoots(t *testing.T) {
	p := testTDXPKI(t)
	_, err := Verify(realTDX(t), Options{Now: tdxAt, SkipBinding: true, TrustedRoots: p.roots()})
	wantRefused(t, err, ReasonChain, "unknown authority")
	s := testSNPPKI(t)
	o := realSNPOpts()
	o.TrustedRoots = s.roots()
	_, err = Verify(realSNP(t), o)
	wantRefused(t, err, ReasonChain, "ARK-Milan", "not a trusted root")
}

func TestMissingCollateral(t *testing.T) {
	for _, n := range CollateralNames(KindTDX) {
		ev := clone(realTDX(t))
		delete(ev.Collateral, n)
		_, err := Verify(ev, realTDXOpts())
		wantRefused(t, err, ReasonCollateral, "missing "+n)
	}
	ev := clone(realSNP(t))
	delete(ev.Collateral, SNPVCEK)
	_, err := Verify(ev, realSNPOpts())
	wantRefused(t, err, ReasonCollateral, "missing vcek.der")
	ev = clone(realSNP(t))
	ev.Collateral["notes.txt"] = []byte("x")
	_, err = Verify(ev, realSNPOpts())
	wantRefused(t, err, ReasonCollateral, `unexpected collateral "notes.txt"`)
}

func TestOptionsAndKinds(t *testing.T) {
	_, err := Verify(realSNP(t), Options{SkipBinding: true, TrustedRoots: DefaultRoots()})
	wantRefused(t, err, ReasonOptions, "Options.Now")
	_, err = Verify(realSNP(t), Options{Now: snpAt, TrustedRoots: DefaultRoots()})
	wantRefused(t, err, ReasonOptions, "no nonce")
	_, err = Verify(realSNP(t), Options{Now: snpAt, SkipBinding: true})
	wantRefused(t, err, ReasonOptions, "no trusted roots")
	_, err = Verify(Evidence{Kind: KindNVIDIAGPU, Raw: []byte("{}")}, Options{Now: snpAt, SkipBinding: true, TrustedRoots: DefaultRoots()})
	wantRefused(t, err, ReasonMalformed, "NVIDIA GPU report")
	_, err = Verify(Evidence{Kind: "nvidia-dpu", Raw: []byte("{}")}, Options{Now: snpAt, SkipBinding: true, TrustedRoots: DefaultRoots()})
	wantRefused(t, err, ReasonUnsupported, "nvidia-dpu")
	for raw, want := range map[string]Kind{"testdata/tdx/quote.dat": KindTDX, "testdata/snp/report.bin": KindSEVSNP} {
		b, _ := os.ReadFile(raw)
		if k, err := DetectKind(b); k != want || err != nil {
			t.Errorf("DetectKind(%s) = %s, %v", raw, k, err)
		}
	}
}

// --- Evidence signed by the test PKI over chosen report data ---

var (
	nonce1 = []byte("chain nonce at height 100")
	nonce2 = []byte("chain nonce at height 200")
	key1   = []byte("age1qyqszqgpqyqszqgpqyqszqgpqyqszqgpqyqszqgpqyqszqgpqyqs3290gq")
	key2   = []byte("age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwj")
)

func TestBindingTDX(t *testing.T) {
	p := testTDXPKI(t)
	ev := Evidence{Kind: KindTDX, Raw: p.quote(ReportData(nonce1, key1)), Collateral: p.collateral(tdxCollateralOpts{})}
	o := Options{Now: tdxAt, Nonce: nonce1, Key: key1, TrustedRoots: p.roots()}
	c, err := Verify(ev, o)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Bound || !c.BindingChecked || c.TCBStatus != "UpToDate" || c.Platform != "FMSPC 50806f000000" || !c.RevocationChecked || len(c.Measurements) != 5 {
		t.Errorf("claims %+v", c)
	}
	if want := time.Date(2023, 7, 8, 0, 0, 0, 0, time.UTC); !c.Expiry.Equal(want) {
		t.Errorf("expiry %s, want %s", c.Expiry, want)
	}
	// Replay: the same quote, a later nonce.
	o.Nonce = nonce2
	_, err = Verify(ev, o)
	wantRefused(t, err, ReasonBinding, "replayed")
	// Another agent's key.
	o.Nonce, o.Key = nonce1, key2
	_, err = Verify(ev, o)
	wantRefused(t, err, ReasonBinding, "another nonce or key")
}

func TestBindingSNP(t *testing.T) {
	s := testSNPPKI(t)
	ev := Evidence{Kind: KindSEVSNP, Raw: s.report(ReportData(nonce1, key1)), Collateral: s.collateral(false)}
	o := Options{Now: snpAt, Nonce: nonce1, Key: key1, TrustedRoots: s.roots()}
	c, err := Verify(ev, o)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Bound || c.Debug || !c.RevocationChecked {
		t.Errorf("claims %+v", c)
	}
	o.Nonce = nonce2
	_, err = Verify(ev, o)
	wantRefused(t, err, ReasonBinding, "replayed")
	o.Nonce, o.Key = nonce1, key2
	_, err = Verify(ev, o)
	wantRefused(t, err, ReasonBinding, "another nonce or key")
}

func TestRevokedTDX(t *testing.T) {
	p := testTDXPKI(t)
	ev := Evidence{Kind: KindTDX, Raw: p.quote(ReportData(nonce1, key1)), Collateral: p.collateral(tdxCollateralOpts{revokePCK: true})}
	_, err := Verify(ev, Options{Now: tdxAt, Nonce: nonce1, Key: key1, TrustedRoots: p.roots()})
	wantRefused(t, err, ReasonRevoked, "PCK Leaf certificate", "revoked")
}

func TestRevokedSNP(t *testing.T) {
	s := testSNPPKI(t)
	ev := Evidence{Kind: KindSEVSNP, Raw: s.report(ReportData(nonce1, key1)), Collateral: s.collateral(true)}
	_, err := Verify(ev, Options{Now: snpAt, Nonce: nonce1, Key: key1, TrustedRoots: s.roots()})
	wantRefused(t, err, ReasonRevoked, "the ASK", "revoked")
	// A CRL not signed by the ARK.
	ev.Collateral[SNPCRL] = s.collateral(false)[SNPCRL]
	ev.Collateral[SNPCRL][len(ev.Collateral[SNPCRL])-1] ^= 1
	_, err = Verify(ev, Options{Now: snpAt, Nonce: nonce1, Key: key1, TrustedRoots: s.roots()})
	wantRefused(t, err, ReasonSignature, "crl.der is not signed")
}

// Collateral of another platform, signed by the (test) vendor: TCB info
// for another FMSPC, a VCEK of another chip.
func TestOtherPlatformTDX(t *testing.T) {
	p := testTDXPKI(t)
	col := p.collateral(tdxCollateralOpts{tcbInfo: func(ti map[string]any) { ti["fmspc"] = "00906ed50000" }})
	ev := Evidence{Kind: KindTDX, Raw: p.quote(ReportData(nonce1, key1)), Collateral: col}
	_, err := Verify(ev, Options{Now: tdxAt, Nonce: nonce1, Key: key1, TrustedRoots: p.roots()})
	wantRefused(t, err, ReasonPlatform, "FMSPC 00906ed50000", "FMSPC 50806f000000")
}

func TestOtherPlatformSNP(t *testing.T) {
	s := testSNPPKI(t)
	ev := Evidence{Kind: KindSEVSNP, Raw: s.report(ReportData(nonce1, key1)), Collateral: s.collateral(false)}
	ev.Raw[0x1a0] ^= 0xff // the report comes from another chip than the VCEK's
	_, err := Verify(ev, Options{Now: snpAt, Nonce: nonce1, Key: key1, TrustedRoots: s.roots()})
	wantRefused(t, err, ReasonPlatform, "VCEK of chip", "another platform")
}

// The TCB info's status for the platform's level is OutOfDate.
func TestOutOfDateTDX(t *testing.T) {
	p := testTDXPKI(t)
	col := p.collateral(tdxCollateralOpts{tcbInfo: func(ti map[string]any) {
		ti["tcbLevels"].([]any)[0].(map[string]any)["tcbStatus"] = "OutOfDate"
	}})
	ev := Evidence{Kind: KindTDX, Raw: p.quote(ReportData(nonce1, key1)), Collateral: col}
	_, err := Verify(ev, Options{Now: tdxAt, Nonce: nonce1, Key: key1, TrustedRoots: p.roots()})
	wantRefused(t, err, ReasonTCB, `found "OutOfDate"`)
}

// Verify is a function of its inputs: the same answer every time.
func TestDeterministic(t *testing.T) {
	p := testTDXPKI(t)
	ev := Evidence{Kind: KindTDX, Raw: p.quote(ReportData(nonce1, key1)), Collateral: p.collateral(tdxCollateralOpts{})}
	o := Options{Now: tdxAt, Nonce: nonce1, Key: key1, TrustedRoots: p.roots()}
	first, err := Verify(ev, o)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		c, err := Verify(ev, o)
		if err != nil || c.ReportData != first.ReportData || !c.Expiry.Equal(first.Expiry) {
			t.Fatalf("run %d: %+v, %v", i, c, err)
		}
		_, e1 := Verify(realTDX(t), realTDXOpts())
		_, e2 := Verify(realTDX(t), realTDXOpts())
		if e1.Error() != e2.Error() {
			t.Fatalf("refusals differ: %v / %v", e1, e2)
		}
	}
}

func TestReportData(t *testing.T) {
	a := ReportData([]byte("ab"), []byte("c"))
	b := ReportData([]byte("a"), []byte("bc"))
	if a == b {
		t.Error("length prefixes do not separate nonce from key")
	}
	// A vector, so that producer and verifier on any platform agree.
	if got := ReportData([]byte{1, 2, 3}, []byte("k")); fmt.Sprintf("%x", got[:8]) != reportDataVector {
		t.Errorf("ReportData(010203, \"k\") starts %x, want %s", got[:8], reportDataVector)
	}
}

// reportDataVector is the first 8 bytes of ReportData(010203, "k"), computed
// independently (Python's hashlib) from the definition in docs/confidential.md.
const reportDataVector = "6f099cf71547344c"
