// Package attesttest is a test-only PKI that stands in for Intel's and
// AMD's: it signs TEE evidence of the recorded vectors' shapes (a TDX
// quote, an SEV-SNP report) over report data of the caller's choosing, and
// issues the collateral that verifies it, so that tests of the ledger and
// the agent can make evidence a real TEE would make, over a chain nonce
// and key, and verify it with the real attest.Verify. Its roots are
// trusted only where a test passes them (Options.TrustedRoots, a
// genesis's attest_roots). It ships in no binary (internal/archtest).
//
// The TDX collateral is valid in June 2023 only (TDXTime); the SNP
// collateral from 2023 to 2030 (SNPTime, and the wall clock until then).
package attesttest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"embed"
	"encoding/asn1"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/attest"

	sabi "github.com/google/go-sev-guest/abi"
	"github.com/google/go-sev-guest/kds"
	stest "github.com/google/go-sev-guest/testing"
	tabi "github.com/google/go-tdx-guest/abi"
	tpb "github.com/google/go-tdx-guest/proto/tdx"
	"google.golang.org/protobuf/proto"
)

//go:embed testdata
var files embed.FS

// TDXTime and SNPTime are instants at which the PKIs' collateral is valid.
var (
	TDXTime = time.Date(2023, 6, 20, 0, 0, 0, 0, time.UTC)
	SNPTime = time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)
)

// parsePEM parses PEM certificates.
func parsePEM(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no certificate")
	}
	return out, nil
}

// RootDER returns the TDX PKI's root certificate, DER.
func (p *TDX) RootDER() []byte { return p.root.Raw }

// RootDER returns the SNP PKI's root (its ARK), DER.
func (s *SNP) RootDER() []byte { return s.signer.Ark.Raw }

func intelName(cn string) pkix.Name {
	return pkix.Name{CommonName: cn, Organization: []string{"Intel Corporation"}, Locality: []string{"Santa Clara"}, Province: []string{"CA"}, Country: []string{"US"}}
}

// sgxExtOID is the Intel SGX extension of PCK certificates (FMSPC, TCB…).
var sgxExtOID = asn1.ObjectIdentifier{1, 2, 840, 113741, 1, 13, 1}

type TDX struct {
	rootKey, platKey, pckKey, tcbKey *ecdsa.PrivateKey
	root, plat, pck, tcbSigner       *x509.Certificate
	template                         *tpb.QuoteV4
	tcbInfo, qeIdentity              map[string]any // the recorded bodies' signed objects
}

var (
	tdxOnce sync.Once
	tdxVal  *TDX
)

func mustKey() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return k
}

func mustCert(tmpl, parent *x509.Certificate, pub any, key *ecdsa.PrivateKey) *x509.Certificate {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, key)
	if err != nil {
		panic(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		panic(err)
	}
	return c
}

func date(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }

// testTDXPKI builds (once) a root "Intel SGX Root CA", a PCK Platform CA,
// a PCK certificate carrying the recorded PCK certificate's SGX extension
// (so FMSPC and TCB are the recorded platform's), and a TCB signing
// certificate: the names go-tdx-guest checks.
func NewTDX() *TDX {
	tdxOnce.Do(func() {
		p := &TDX{rootKey: mustKey(), platKey: mustKey(), pckKey: mustKey(), tcbKey: mustKey()}
		raw, err := files.ReadFile("testdata/quote.dat")
		if err != nil {
			panic(err)
		}
		q, err := tabi.QuoteToProto(raw)
		if err != nil {
			panic(err)
		}
		p.template = q.(*tpb.QuoteV4)
		chain, err := parsePEM(p.template.SignedData.CertificationData.QeReportCertificationData.PckCertificateChainData.PckCertChain)
		if err != nil {
			panic(err)
		}
		var sgxExt []pkix.Extension
		for _, e := range chain[0].Extensions {
			if e.Id.Equal(sgxExtOID) {
				sgxExt = append(sgxExt, e)
			}
		}
		ca := func(sn int64, cn string) *x509.Certificate {
			return &x509.Certificate{
				SerialNumber: big.NewInt(sn), Subject: intelName(cn),
				NotBefore: date(2018, 5, 21), NotAfter: date(2049, 12, 31),
				IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
				CRLDistributionPoints: []string{"https://certificates.trustedservices.intel.com/IntelSGXRootCA.der"},
			}
		}
		rootT := ca(1, "Intel SGX Root CA")
		p.root = mustCert(rootT, rootT, &p.rootKey.PublicKey, p.rootKey)
		p.plat = mustCert(ca(2, "Intel SGX PCK Platform CA"), p.root, &p.platKey.PublicKey, p.rootKey)
		p.pck = mustCert(&x509.Certificate{
			SerialNumber: big.NewInt(0x5ec0de), Subject: intelName("Intel SGX PCK Certificate"),
			NotBefore: date(2022, 9, 20), NotAfter: date(2029, 9, 20),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtraExtensions: sgxExt,
			// The six extensions go-tdx-guest counts on a PCK certificate.
			BasicConstraintsValid: true, SubjectKeyId: []byte{1, 2, 3, 4},
			CRLDistributionPoints: []string{"https://api.trustedservices.intel.com/sgx/certification/v4/pckcrl?ca=platform&encoding=der"},
		}, p.plat, &p.pckKey.PublicKey, p.platKey)
		p.tcbSigner = mustCert(&x509.Certificate{
			SerialNumber: big.NewInt(3), Subject: intelName("Intel SGX TCB Signing"),
			NotBefore: date(2018, 5, 21), NotAfter: date(2025, 5, 21),
			KeyUsage: x509.KeyUsageDigitalSignature,
		}, p.root, &p.tcbKey.PublicKey, p.rootKey)
		p.tcbInfo = signedObject("testdata/tcb_info.json", "tcbInfo")
		p.qeIdentity = signedObject("testdata/qe_identity.json", "enclaveIdentity")
		tdxVal = p
	})
	return tdxVal
}

func signedObject(file, field string) map[string]any {
	b, err := files.ReadFile(file)
	if err != nil {
		panic(err)
	}
	var outer map[string]json.RawMessage
	if err := json.Unmarshal(b, &outer); err != nil {
		panic(err)
	}
	var m map[string]any
	if err := json.Unmarshal(outer[field], &m); err != nil {
		panic(err)
	}
	return m
}

func rawSig(key *ecdsa.PrivateKey, msg []byte) []byte {
	h := sha256.Sum256(msg)
	r, s, err := ecdsa.Sign(rand.Reader, key, h[:])
	if err != nil {
		panic(err)
	}
	out := make([]byte, 64)
	r.FillBytes(out[:32])
	s.FillBytes(out[32:])
	return out
}

func pemOf(certs ...*x509.Certificate) []byte {
	var out []byte
	for _, c := range certs {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return out
}

// quote signs a quote of the recorded quote's shape over reportData, with
// a fresh attestation key certified through the test PCK.
func (p *TDX) Quote(reportData [64]byte) []byte {
	q := proto.Clone(p.template).(*tpb.QuoteV4)
	q.TdQuoteBody.ReportData = reportData[:]
	ak := mustKey()
	pub, err := ak.PublicKey.Bytes() // 0x04 || X || Y
	if err != nil {
		panic(err)
	}
	akBytes := pub[1:]
	q.SignedData.EcdsaAttestationKey = akBytes
	qe := q.SignedData.CertificationData.QeReportCertificationData
	h := sha256.Sum256(append(append([]byte{}, akBytes...), qe.QeAuthData.Data...))
	qe.QeReport.ReportData = append(h[:], make([]byte, 32)...)
	rep, err := tabi.EnclaveReportToAbiBytes(qe.QeReport)
	if err != nil {
		panic(err)
	}
	qe.QeReportSignature = rawSig(p.pckKey, rep)
	chain := pemOf(p.pck, p.plat, p.root)
	delta := uint32(len(chain)) - qe.PckCertificateChainData.Size
	qe.PckCertificateChainData.PckCertChain = chain
	qe.PckCertificateChainData.Size = uint32(len(chain))
	q.SignedData.CertificationData.Size += delta
	q.SignedDataSize += delta
	hdr, err := tabi.HeaderToAbiBytes(q.Header)
	if err != nil {
		panic(err)
	}
	body, err := tabi.TdQuoteBodyToAbiBytes(q.TdQuoteBody)
	if err != nil {
		panic(err)
	}
	q.SignedData.Signature = rawSig(ak, append(hdr, body...))
	out, err := tabi.QuoteToAbiBytes(q)
	if err != nil {
		panic(err)
	}
	return out
}

// sign returns a PCS body {"field": obj, "signature": hex} signed by the
// test TCB signing key.
func (p *TDX) sign(field string, obj map[string]any) []byte {
	raw, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	out, _ := json.Marshal(map[string]any{field: json.RawMessage(raw), "signature": hex.EncodeToString(rawSig(p.tcbKey, raw))})
	return out
}

func deepCopy(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var out map[string]any
	json.Unmarshal(b, &out)
	return out
}

// tdxCollateralOpts changes what the test PKI issues.
type TDXOptions struct {
	RevokePCK bool                 // the PCK CRL lists the PCK certificate
	TCBInfo   func(map[string]any) // edits the TCB info before signing
}

// collateral issues the collateral for p's quotes: the recorded TCB info
// and QE identity re-signed (the first TCB level lowered to the recorded
// platform's SVNs, so that it is UpToDate), and CRLs.
func (p *TDX) Collateral(o TDXOptions) map[string][]byte {
	ti := deepCopy(p.tcbInfo)
	lvl := ti["tcbLevels"].([]any)[0].(map[string]any)["tcb"].(map[string]any)
	for _, k := range []string{"sgxtcbcomponents", "tdxtcbcomponents"} {
		for _, c := range lvl[k].([]any) {
			c.(map[string]any)["svn"] = 0
		}
	}
	if o.TCBInfo != nil {
		o.TCBInfo(ti)
	}
	crl := func(issuer *x509.Certificate, key *ecdsa.PrivateKey, revoked ...*big.Int) []byte {
		var entries []x509.RevocationListEntry
		for _, sn := range revoked {
			entries = append(entries, x509.RevocationListEntry{SerialNumber: sn, RevocationTime: date(2023, 6, 8)})
		}
		der, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{
			Number: big.NewInt(1), ThisUpdate: date(2023, 6, 8), NextUpdate: date(2023, 7, 8),
			RevokedCertificateEntries: entries,
		}, issuer, key)
		if err != nil {
			panic(err)
		}
		return der
	}
	var revoked []*big.Int
	if o.RevokePCK {
		revoked = append(revoked, p.pck.SerialNumber)
	}
	return map[string][]byte{
		"tcb_info.json":                p.sign("tcbInfo", ti),
		"tcb_info_issuer_chain.pem":    pemOf(p.tcbSigner, p.root),
		"qe_identity.json":             p.sign("enclaveIdentity", deepCopy(p.qeIdentity)),
		"qe_identity_issuer_chain.pem": pemOf(p.tcbSigner, p.root),
		"pck_crl.der":                  crl(p.plat, p.platKey, revoked...),
		"pck_crl_issuer_chain.pem":     pemOf(p.plat, p.root),
		"root_ca_crl.der":              crl(p.root, p.rootKey),
	}
}

func (p *TDX) Roots() [][]byte { return [][]byte{pemOf(p.root)} }

// testSNP is go-sev-guest's test-only AMD signer (its ARK, ASK and VCEK
// keys ship with the library), with a VCEK for the recorded report's chip
// and TCB.
type SNP struct {
	signer   *stest.AmdSigner
	recorded []byte // the recorded report
}

var (
	snpOnce sync.Once
	snpVal  *SNP
)

func NewSNP() *SNP {
	snpOnce.Do(func() {
		raw, err := files.ReadFile("testdata/report.bin")
		if err != nil {
			panic(err)
		}
		r, err := sabi.ReportToProto(raw)
		if err != nil {
			panic(err)
		}
		tcb := kds.DecomposeTCBVersion(kds.TCBVersion(r.ReportedTcb))
		created := date(2022, 9, 24)
		b := &stest.AmdSignerBuilder{
			Keys: stest.DefaultAmdKeys(), ProductName: "Milan-B0", CSPID: "go-sev-guest",
			ArkCreationTime: created, AskCreationTime: created, AsvkCreationTime: created, VcekCreationTime: created,
			VcekCustom: stest.CertOverride{Extensions: stest.CustomExtensions(tcb, r.ChipId, "", "Milan-B0")},
		}
		s, err := b.TestOnlyCertChain()
		if err != nil {
			panic(err)
		}
		snpVal = &SNP{signer: s, recorded: raw}
	})
	return snpVal
}

// report signs a copy of the recorded report over reportData, with the
// debug policy bit cleared.
func (s *SNP) Report(reportData [64]byte) []byte {
	r := append([]byte{}, s.recorded...)
	copy(r[0x50:0x90], reportData[:])
	r[0x0a] &^= 0x08 // POLICY bit 19: DEBUG
	R, S, err := s.signer.Sign(sabi.SignedComponent(r))
	if err != nil {
		panic(err)
	}
	if err := sabi.SetSignature(R, S, r); err != nil {
		panic(err)
	}
	return r
}

// collateral is the VCEK, cert_chain and a CRL (revoking the ASK when
// asked) of the test signer.
func (s *SNP) Collateral(revokeASK bool) map[string][]byte {
	var entries []x509.RevocationListEntry
	if revokeASK {
		entries = append(entries, x509.RevocationListEntry{SerialNumber: s.signer.Ask.SerialNumber, RevocationTime: date(2023, 1, 1)})
	}
	crl, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{
		Number: big.NewInt(1), ThisUpdate: date(2023, 1, 1), NextUpdate: date(2030, 1, 1),
		RevokedCertificateEntries: entries, SignatureAlgorithm: x509.SHA384WithRSAPSS,
	}, s.signer.Ark, s.signer.Keys.Ark)
	if err != nil {
		panic(err)
	}
	return map[string][]byte{
		"vcek.der":       s.signer.Vcek.Raw,
		"cert_chain.pem": pemOf(s.signer.Ask, s.signer.Ark),
		"crl.der":        crl,
	}
}

func (s *SNP) Roots() [][]byte { return [][]byte{pemOf(s.signer.Ark)} }

// Producer is an attest.Producer that signs with the test PKIs: the
// evidence a TEE of its kind would give, with all its collateral.
type Producer struct {
	K     attest.Kind // attest.KindTDX or attest.KindSEVSNP
	mu    sync.Mutex
	calls int
}

// Calls returns how many times Produce ran.
func (p *Producer) Calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// Kind implements attest.Producer.
func (p *Producer) Kind() attest.Kind { return p.K }

// Produce implements attest.Producer.
func (p *Producer) Produce(reportData [64]byte) (attest.Evidence, error) {
	p.mu.Lock()
	p.calls++
	p.mu.Unlock()
	switch p.K {
	case attest.KindTDX:
		t := NewTDX()
		return attest.Evidence{Kind: p.K, Raw: t.Quote(reportData), Collateral: t.Collateral(TDXOptions{})}, nil
	case attest.KindSEVSNP:
		s := NewSNP()
		return attest.Evidence{Kind: p.K, Raw: s.Report(reportData), Collateral: s.Collateral(false)}, nil
	}
	return attest.Evidence{}, errors.New("attesttest: no test PKI for kind " + string(p.K))
}

// Roots returns the root certificates (DER) of both test PKIs.
func Roots() [][]byte { return [][]byte{NewTDX().RootDER(), NewSNP().RootDER()} }

// RootHashes returns the hex SHA-256 of Roots: a genesis's attest_roots
// that trusts the test PKIs.
func RootHashes() []string {
	var out []string
	for _, r := range Roots() {
		h := sha256.Sum256(r)
		out = append(out, hex.EncodeToString(h[:]))
	}
	return out
}
