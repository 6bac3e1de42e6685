package attest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gpuAt is an instant inside the recorded GPU chains' validity (their
// latest NotBefore is 2022-03-01; they are valid until 9999).
var gpuAt = time.Date(2025, time.March, 1, 0, 0, 0, 0, time.UTC)

// realGPU reads a recorded NVIDIA sample: "hopper" (hopperAttestationReport.txt
// with hopperCertChain.txt) or "old" (attestationReport.txt with
// gpuAkCertChain.txt).
func realGPU(t testing.TB, which string) Evidence {
	t.Helper()
	rep, chain := "hopperAttestationReport.txt", "hopperCertChain.txt"
	if which == "old" {
		rep, chain = "attestationReport.txt", "gpuAkCertChain.txt"
	}
	h, err := os.ReadFile(filepath.Join("testdata", "nvidia", rep))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := hex.DecodeString(strings.TrimSpace(string(h)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := os.ReadFile(filepath.Join("testdata", "nvidia", chain))
	if err != nil {
		t.Fatal(err)
	}
	return Evidence{Kind: KindNVIDIAGPU, Raw: raw, Collateral: map[string][]byte{GPUCertChain: c}}
}

func gpuOpts() Options { return Options{Now: gpuAt, SkipBinding: true, TrustedRoots: DefaultRoots()} }

func TestRealNVIDIAGPUVerifies(t *testing.T) {
	for _, tc := range []struct {
		which                      string
		id, model, driver, vbios   string
		fwid, deviceName, recorded string
	}{
		{"hopper", "41431D480FE5E87274", "GH100 A01 GSP BROM", "550.90.07", "96.00.9F.00.01", "f5c384aebb579217a2c66b17ed0f28e6a9b8d639041acd7b4721cec004f7275494ba94bb5cdfdb3055ee051762b1f75d", "NVIDIA:GH100:48B02D92494BADF4", "931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb"},
		{"old", "41FFEEB20009E0BE49", "GH100 A01 GSP BROM", "545.00", "96.00.5E.00.01", "", "NVIDIA:GH100:48B02DB73E52137E", "4cff7f5380ead8fad8ec2c531c110aca4302a88f603792801a8ca29ee151af2e"},
	} {
		t.Run(tc.which, func(t *testing.T) {
			c, err := Verify(realGPU(t, tc.which), gpuOpts())
			if err != nil {
				t.Fatal(err)
			}
			g := c.GPU
			if c.Vendor != "NVIDIA" || c.Kind != KindNVIDIAGPU || g == nil {
				t.Fatalf("claims %+v", c)
			}
			if g.ID != tc.id || c.ChipID != tc.id || g.Model != tc.model || g.DriverVersion != tc.driver || g.VBIOSVersion != tc.vbios || g.FWID != tc.fwid || g.DeviceName != tc.deviceName {
				t.Errorf("got id %s model %q driver %q vbios %q fwid %q name %q, want %s %q %q %q %q %q", g.ID, g.Model, g.DriverVersion, g.VBIOSVersion, g.FWID, g.DeviceName, tc.id, tc.model, tc.driver, tc.vbios, tc.fwid, tc.deviceName)
			}
			if c.ReportData != tc.recorded {
				t.Errorf("report data (SPDM nonce) %s, want %s", c.ReportData, tc.recorded)
			}
			if g.Blocks != 64 || len(c.Measurements) != 1 || len(c.Measurements[0].Hex) != 96 {
				t.Errorf("blocks %d measurements %+v", g.Blocks, c.Measurements)
			}
			if !c.Expiry.Equal(time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)) {
				t.Errorf("expiry %v", c.Expiry)
			}
			t.Logf("%+v %+v", c, g)
		})
	}
}

// splitPEM returns the PEM certificates of a chain, one blob each.
func splitPEM(t *testing.T, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for _, p := range strings.SplitAfter(string(b), "-----END CERTIFICATE-----") {
		if strings.TrimSpace(p) != "" {
			out = append(out, []byte(strings.TrimSpace(p)+"\n"))
		}
	}
	return out
}

// Every forgery of the real Hopper evidence is refused with its reason.
func TestRealNVIDIAGPUForgeries(t *testing.T) {
	hopper, old := realGPU(t, "hopper"), realGPU(t, "old")
	hc, oc := splitPEM(t, hopper.Collateral[GPUCertChain]), splitPEM(t, old.Collateral[GPUCertChain])
	if len(hc) != 5 || len(oc) != 5 {
		t.Fatalf("chains of %d and %d certificates, want 5", len(hc), len(oc))
	}
	recorded, _ := hex.DecodeString("931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb")
	chainOf := func(parts ...[]byte) map[string][]byte {
		return map[string][]byte{GPUCertChain: bytes.Join(parts, nil)}
	}
	otherRoot := selfSignedP384(t)
	akRootPEM := rootSignedAK(t)
	for _, tc := range []struct {
		name   string
		ev     func() Evidence
		opts   func(o *Options)
		reason Reason
		words  []string
	}{
		{"flipped bit in a measurement", func() Evidence { e := clone(hopper); e.Raw[37+8+4+3+10] ^= 1; return e }, nil, ReasonSignature, []string{"signature does not verify"}},
		{"flipped bit in the driver version", func() Evidence {
			e := clone(hopper)
			i := bytes.Index(e.Raw, []byte("550.90.07"))
			e.Raw[i] ^= 1
			return e
		}, nil, ReasonSignature, []string{"signature does not verify"}},
		{"flipped bit in the signature", func() Evidence { e := clone(hopper); e.Raw[len(e.Raw)-5] ^= 1; return e }, nil, ReasonSignature, nil},
		{"flipped bit in the request nonce", func() Evidence { e := clone(hopper); e.Raw[4] ^= 1; return e }, nil, ReasonSignature, nil},
		{"wrong nonce", func() Evidence { return clone(hopper) }, func(o *Options) { o.SkipBinding = false; o.Nonce = []byte("a chain nonce") }, ReasonBinding, []string{"SPDM nonce 931d8dd0"}},
		{"the recorded nonce itself is not a binding", func() Evidence { return clone(hopper) }, func(o *Options) { o.SkipBinding = false; o.Nonce = recorded }, ReasonBinding, nil},
		{"a chain to another root", func() Evidence { return clone(hopper) }, func(o *Options) { o.TrustedRoots = [][]byte{otherRoot} }, ReasonChain, []string{"not a trusted root"}},
		{"only Intel's and AMD's roots", func() Evidence { return clone(hopper) }, func(o *Options) {
			o.TrustedRoots = nil
			for _, r := range DefaultRoots() {
				if !bytes.Contains(r, []byte("MIICCzCCAZCgAwIBAgIQLTZwscoQBBHB")) {
					o.TrustedRoots = append(o.TrustedRoots, r)
				}
			}
		}, ReasonChain, nil},
		{"a self-made root in the chain", func() Evidence {
			e := clone(hopper)
			e.Collateral = chainOf(hc[0], hc[1], hc[2], hc[3], derPEM(t, otherRoot))
			return e
		}, func(o *Options) { o.TrustedRoots = append(o.TrustedRoots, otherRoot) }, ReasonChain, []string{"is not signed by certificate 4"}},
		{"expired chain", func() Evidence { return clone(hopper) }, func(o *Options) { o.Now = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, ReasonExpired, []string{"expired at 9999-12-31T23:59:59Z"}},
		{"before the chain was issued", func() Evidence { return clone(hopper) }, func(o *Options) { o.Now = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC) }, ReasonExpired, []string{"not valid until 2020-10-17"}},
		{"truncated report", func() Evidence { e := clone(hopper); e.Raw = e.Raw[:len(e.Raw)-1]; return e }, nil, ReasonMalformed, []string{"want a 96-byte P-384 signature"}},
		{"report cut in the measurements", func() Evidence { e := clone(hopper); e.Raw = e.Raw[:1000]; return e }, nil, ReasonMalformed, []string{"measurement record of 3520 bytes"}},
		{"a byte appended", func() Evidence { e := clone(hopper); e.Raw = append(e.Raw, 0); return e }, nil, ReasonMalformed, nil},
		{"leaf swapped from the other sample", func() Evidence {
			e := clone(hopper)
			e.Collateral = chainOf(oc[0], hc[1], hc[2], hc[3], hc[4])
			return e
		}, nil, ReasonChain, []string{"certificate 0 (GH100 A01 GSP FMC LF) is not signed by certificate 1"}},
		{"the other sample's whole chain", func() Evidence {
			e := clone(hopper)
			e.Collateral = old.Collateral
			return e
		}, nil, ReasonSignature, []string{"another GPU"}},
		{"the other sample's report with this chain", func() Evidence {
			e := clone(old)
			e.Collateral = hopper.Collateral
			return e
		}, nil, ReasonSignature, nil},
		{"no chain", func() Evidence { e := clone(hopper); e.Collateral = nil; return e }, nil, ReasonCollateral, []string{"missing gpu_cert_chain.pem"}},
		{"AK certificate alone", func() Evidence { e := clone(hopper); e.Collateral = chainOf(hc[0]); return e }, nil, ReasonCollateral, []string{"has 1 certificates"}},
		{"AK certificate issued by the root", func() Evidence {
			// A root that signed an AK certificate itself: its serial
			// would be every such GPU's identity.
			e := clone(hopper)
			e.Collateral = chainOf(akRootPEM...)
			return e
		}, func(o *Options) { o.TrustedRoots = [][]byte{akRootPEM[1]} }, ReasonChain, []string{"issued by a root"}},
		{"chain out of order", func() Evidence {
			e := clone(hopper)
			e.Collateral = chainOf(hc[1], hc[0], hc[2], hc[3], hc[4])
			return e
		}, nil, ReasonChain, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := gpuOpts()
			if tc.opts != nil {
				tc.opts(&o)
			}
			_, err := Verify(tc.ev(), o)
			wantRefused(t, err, tc.reason, tc.words...)
		})
	}
}

// selfSignedP384 is a root named like NVIDIA's, of another key.
func selfSignedP384(t *testing.T) []byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "NVIDIA Device Identity CA", Organization: []string{"NVIDIA"}},
		NotBefore: time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// rootSignedAK returns an AK-like certificate signed directly by a new
// root, and that root, each PEM.
func rootSignedAK(t *testing.T) [][]byte {
	t.Helper()
	rk, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ak, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	from, to := time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC)
	rt := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "root"}, NotBefore: from, NotAfter: to, IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	rootDER, err := x509.CreateCertificate(rand.Reader, rt, rt, &rk.PublicKey, rk)
	if err != nil {
		t.Fatal(err)
	}
	root, _ := x509.ParseCertificate(rootDER)
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "AK"}, NotBefore: from, NotAfter: to, KeyUsage: x509.KeyUsageDigitalSignature}, root, &ak.PublicKey, rk)
	if err != nil {
		t.Fatal(err)
	}
	return [][]byte{derPEM(t, leafDER), derPEM(t, rootDER)}
}

func derPEM(t *testing.T, der []byte) []byte {
	t.Helper()
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// A bundle round-trips, and a bundle of the recorded evidence verifies.
func TestGPUBundle(t *testing.T) {
	hopper := realGPU(t, "hopper")
	b, err := MarshalGPUBundle(hopper, "GPU-1234", &GPUCCState{Environment: 2, CCFeature: 1})
	if err != nil {
		t.Fatal(err)
	}
	if k, err := DetectKind(b); err != nil || k != KindNVIDIAGPU {
		t.Fatalf("DetectKind: %v %v", k, err)
	}
	ev, bun, err := ParseGPUBundle(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ev.Raw, hopper.Raw) || !bytes.Equal(ev.Collateral[GPUCertChain], hopper.Collateral[GPUCertChain]) || bun.UUID != "GPU-1234" || bun.CCState.CCFeature != 1 {
		t.Fatalf("bundle did not round-trip: %+v", bun)
	}
	if _, err := Verify(ev, gpuOpts()); err != nil {
		t.Fatal(err)
	}
	rec, err := os.ReadFile(filepath.Join("testdata", "nvidia", "hopper_bundle.json"))
	if err != nil {
		t.Fatal(err)
	}
	rev, _, err := ParseGPUBundle(rec)
	if err != nil || !bytes.Equal(rev.Raw, hopper.Raw) || !bytes.Equal(rev.Collateral[GPUCertChain], hopper.Collateral[GPUCertChain]) {
		t.Fatalf("testdata/nvidia/hopper_bundle.json is not the recorded Hopper report and chain (%v)", err)
	}
	for _, bad := range []string{`{"report":"zz","cert_chain":"x"}`, `{"report":"00"}`, `{"kind":"tdx","report":"00","cert_chain":"x"}`, `{"report":"00","cert_chain":"x","extra":1}`, `[]`} {
		if _, _, err := ParseGPUBundle([]byte(bad)); ReasonOf(err) == "" {
			t.Errorf("bundle %s: %v, want a refusal", bad, err)
		}
	}
}
