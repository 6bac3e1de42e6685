package attest

import (
	"bytes"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/url"
	"slices"
	"strings"

	tabi "github.com/google/go-tdx-guest/abi"
	"github.com/google/go-tdx-guest/pcs"
	tpb "github.com/google/go-tdx-guest/proto/tdx"
	tverify "github.com/google/go-tdx-guest/verify"
)

// The PCS issuer-chain headers, as go-tdx-guest looks them up.
const (
	hdrTCBInfoChain    = "Tcb-Info-Issuer-Chain"
	hdrQEIdentityChain = "Sgx-Enclave-Identity-Issuer-Chain"
	hdrPCKCRLChain     = "Sgx-Pck-Crl-Issuer-Chain"
)

// tdxCollateral is the decoded TDX collateral.
type tdxCollateral struct {
	tcbInfoBody, qeIdentityBody []byte
	tcbInfo                     pcs.TdxTcbInfo
	qeIdentity                  pcs.QeIdentity
	tcbChain, qeChain, crlChain []*x509.Certificate
	pckCRLBody, rootCRLBody     []byte
	pckCRL, rootCRL             *x509.RevocationList
}

// issuerChain decodes a PCS *-Issuer-Chain header value: URL-encoded as
// sent, or plain PEM; it must hold the signing certificate then the root.
func issuerChain(ev Evidence, name string) ([]*x509.Certificate, error) {
	b, err := needBlob(ev, name, "a PCS issuer-chain header")
	if err != nil {
		return nil, err
	}
	s := strings.TrimSpace(string(b))
	if !strings.HasPrefix(s, "-----BEGIN CERTIFICATE-----") {
		if s, err = url.QueryUnescape(s); err != nil {
			return nil, refuse(ReasonCollateral, "%s: neither PEM nor a URL-encoded PEM header: %v", name, err)
		}
	}
	certs, err := parseCerts([]byte(s))
	if err != nil {
		return nil, refuse(ReasonCollateral, "%s: %v", name, err)
	}
	if len(certs) != 2 {
		return nil, refuse(ReasonCollateral, "%s holds %d certificates, want 2 (signing certificate, root)", name, len(certs))
	}
	return certs, nil
}

func decodeTDXCollateral(ev Evidence) (*tdxCollateral, error) {
	c := &tdxCollateral{}
	var err error
	if c.tcbInfoBody, err = needBlob(ev, TDXTCBInfo, "Intel PCS TDX TCB info"); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(c.tcbInfoBody, &c.tcbInfo); err != nil {
		return nil, refuse(ReasonCollateral, "%s: %v", TDXTCBInfo, err)
	}
	if c.qeIdentityBody, err = needBlob(ev, TDXQEIdentity, "Intel PCS TDX QE identity"); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(c.qeIdentityBody, &c.qeIdentity); err != nil {
		return nil, refuse(ReasonCollateral, "%s: %v", TDXQEIdentity, err)
	}
	if c.tcbChain, err = issuerChain(ev, TDXTCBInfoChain); err != nil {
		return nil, err
	}
	if c.qeChain, err = issuerChain(ev, TDXQEIdentityChain); err != nil {
		return nil, err
	}
	if c.crlChain, err = issuerChain(ev, TDXPCKCRLChain); err != nil {
		return nil, err
	}
	if c.pckCRLBody, err = needBlob(ev, TDXPCKCRL, "Intel PCS PCK CRL"); err != nil {
		return nil, err
	}
	if c.pckCRL, err = parseCRL(c.pckCRLBody); err != nil {
		return nil, refuse(ReasonCollateral, "%s: %v", TDXPCKCRL, err)
	}
	c.pckCRLBody = c.pckCRL.Raw
	if c.rootCRLBody, err = needBlob(ev, TDXRootCACRL, "Intel SGX Root CA CRL"); err != nil {
		return nil, err
	}
	if c.rootCRL, err = parseCRL(c.rootCRLBody); err != nil {
		return nil, refuse(ReasonCollateral, "%s: %v", TDXRootCACRL, err)
	}
	c.rootCRLBody = c.rootCRL.Raw
	return c, nil
}

// tdxGetter serves go-tdx-guest's PCS requests from the collateral only.
type tdxGetter struct {
	fmspc, ca   string
	rootCRLURLs []string
	c           *tdxCollateral
}

func chainHeader(certs []*x509.Certificate) []string {
	var b bytes.Buffer
	for _, c := range certs {
		pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return []string{url.QueryEscape(b.String())}
}

func (g *tdxGetter) Get(u string) (map[string][]string, []byte, error) {
	switch {
	case u == pcs.TcbInfoURL(g.fmspc):
		return map[string][]string{hdrTCBInfoChain: chainHeader(g.c.tcbChain)}, g.c.tcbInfoBody, nil
	case u == pcs.QeIdentityURL():
		return map[string][]string{hdrQEIdentityChain: chainHeader(g.c.qeChain)}, g.c.qeIdentityBody, nil
	case u == pcs.PckCrlURL(g.ca):
		return map[string][]string{hdrPCKCRLChain: chainHeader(g.c.crlChain)}, g.c.pckCRLBody, nil
	case slices.Contains(g.rootCRLURLs, u):
		return nil, g.c.rootCRLBody, nil
	}
	return nil, nil, fmt.Errorf("offline verification: no collateral serves %s", u)
}

// tdx TD_ATTRIBUTES bit 0: the TD is debuggable.
const tdAttributesDebug = 0x01

func verifyTDX(ev Evidence, opts Options, roots []*x509.Certificate) (c *Claims, rd []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			c, rd, err = nil, nil, refuse(ReasonMalformed, "TDX quote: the decoder failed: %v", r)
		}
	}()
	anyQuote, err := tabi.QuoteToProto(ev.Raw)
	if err != nil {
		return nil, nil, refuse(ReasonMalformed, "TDX quote: %v", err)
	}
	quote, ok := anyQuote.(*tpb.QuoteV4)
	if !ok {
		return nil, nil, refuse(ReasonUnsupported, "TDX quote of type %T (QuoteV4 is verified)", anyQuote)
	}
	if n := len(quote.GetExtraBytes()); n > 0 {
		return nil, nil, refuse(ReasonMalformed, "TDX quote: %d unsigned bytes after the signed data", n)
	}
	if quote.GetHeader().GetTeeType() != tabi.TeeTDX {
		return nil, nil, refuse(ReasonUnsupported, "quote TEE type 0x%x is not TDX (0x%x)", quote.GetHeader().GetTeeType(), tabi.TeeTDX)
	}
	body := quote.GetTdQuoteBody()

	chain, err := parseCerts(quote.GetSignedData().GetCertificationData().GetQeReportCertificationData().GetPckCertificateChainData().GetPckCertChain())
	if err != nil || len(chain) != 3 {
		return nil, nil, refuse(ReasonMalformed, "TDX quote: PCK certificate chain: want PCK, intermediate and root certificates (%d, %v)", len(chain), err)
	}
	pck, inter, qroot := chain[0], chain[1], chain[2]
	ext, err := pcs.PckCertificateExtensions(pck)
	if err != nil {
		return nil, nil, refuse(ReasonMalformed, "TDX quote: PCK certificate extensions: %v", err)
	}

	col, err := decodeTDXCollateral(ev)
	if err != nil {
		return nil, nil, err
	}
	ti, qi := col.tcbInfo.TcbInfo, col.qeIdentity.EnclaveIdentity

	// Collateral of another platform.
	if ti.ID != "TDX" {
		return nil, nil, refuse(ReasonPlatform, "%s is TCB info for %q, not TDX", TDXTCBInfo, ti.ID)
	}
	if !strings.EqualFold(ti.Fmspc, ext.FMSPC) || !strings.EqualFold(ti.PceID, ext.PCEID) {
		return nil, nil, refuse(ReasonPlatform, "%s is for FMSPC %s PCEID %s; the quote's PCK certificate is of FMSPC %s PCEID %s (collateral of another platform)", TDXTCBInfo, ti.Fmspc, ti.PceID, ext.FMSPC, ext.PCEID)
	}
	if qi.ID != "TD_QE" {
		return nil, nil, refuse(ReasonPlatform, "%s is the identity of %q, not the TDX quoting enclave TD_QE", TDXQEIdentity, qi.ID)
	}
	if col.pckCRL.Issuer.String() != pck.Issuer.String() {
		return nil, nil, refuse(ReasonPlatform, "%s is the CRL of %q; the PCK certificate is issued by %q", TDXPCKCRL, col.pckCRL.Issuer.CommonName, pck.Issuer.CommonName)
	}
	ca := "platform"
	if pck.Issuer.CommonName == "Intel SGX PCK Processor CA" {
		ca = "processor"
	}

	// Validity at Now, and the earliest expiry.
	v := &validity{now: opts.Now}
	for _, x := range []struct {
		what string
		c    *x509.Certificate
	}{
		{"PCK", pck}, {"PCK intermediate", inter}, {"PCK root", qroot},
		{"TCB info signing", col.tcbChain[0]}, {"TCB info root", col.tcbChain[1]},
		{"QE identity signing", col.qeChain[0]}, {"QE identity root", col.qeChain[1]},
		{"PCK CRL issuer", col.crlChain[0]}, {"PCK CRL root", col.crlChain[1]},
	} {
		if err := v.cert(x.what, x.c); err != nil {
			return nil, nil, err
		}
	}
	if err := v.window(TDXTCBInfo, ti.IssueDate, ti.NextUpdate); err != nil {
		return nil, nil, err
	}
	if err := v.window(TDXQEIdentity, qi.IssueDate, qi.NextUpdate); err != nil {
		return nil, nil, err
	}
	if err := v.crl(TDXPCKCRL, col.pckCRL); err != nil {
		return nil, nil, err
	}
	if err := v.crl(TDXRootCACRL, col.rootCRL); err != nil {
		return nil, nil, err
	}

	// The minimum TCB.
	min := opts.MinTCB[KindTDX]
	if ti.TcbEvaluationDataNumber < min.TCBEvaluationDataNumber {
		return nil, nil, refuse(ReasonTCB, "stale TCB info: %s has TCB evaluation data number %d, the minimum is %d", TDXTCBInfo, ti.TcbEvaluationDataNumber, min.TCBEvaluationDataNumber)
	}
	if qi.TcbEvaluationDataNumber < min.TCBEvaluationDataNumber {
		return nil, nil, refuse(ReasonTCB, "stale QE identity: %s has TCB evaluation data number %d, the minimum is %d", TDXQEIdentity, qi.TcbEvaluationDataNumber, min.TCBEvaluationDataNumber)
	}
	svn := body.GetTeeTcbSvn()
	for i := range min.TEETCBSVN {
		if i >= len(svn) || svn[i] < min.TEETCBSVN[i] {
			return nil, nil, refuse(ReasonTCB, "TEE_TCB_SVN %x is below the minimum %x (component %d)", svn, min.TEETCBSVN, i)
		}
	}

	debug := len(body.GetTdAttributes()) > 0 && body.GetTdAttributes()[0]&tdAttributesDebug != 0
	if debug && !opts.AllowDebug {
		return nil, nil, refuse(ReasonPolicy, "the TD is debuggable (TD_ATTRIBUTES %x): the host can read its memory", body.GetTdAttributes())
	}

	pool := x509.NewCertPool()
	for _, r := range roots {
		pool.AddCert(r)
	}
	var rootURLs []string
	rootURLs = append(rootURLs, col.qeChain[1].CRLDistributionPoints...)
	lopts := &tverify.Options{
		CheckRevocations: true,
		GetCollateral:    true,
		Getter:           &tdxGetter{fmspc: ext.FMSPC, ca: ca, rootCRLURLs: rootURLs, c: col},
		Now:              opts.Now,
		TrustedRoots:     pool,
	}
	if err := tverify.TdxQuote(quote, lopts); err != nil {
		if strings.Contains(err.Error(), "no matching TCB level found") {
			return nil, nil, refuse(ReasonTCB, "the platform's TCB (PCK CPUSVN %x PCESVN %d, TEE_TCB_SVN %x) is below every TCB level of %s (evaluation data number %d): Intel supports no such TCB (go-tdx-guest: %v)",
				ext.TCB.CPUSvn, ext.TCB.PCESvn, svn, TDXTCBInfo, ti.TcbEvaluationDataNumber, err)
		}
		return nil, nil, classify("go-tdx-guest", err)
	}

	c = &Claims{
		Vendor: "Intel",
		TEE:    "TDX",
		Measurements: []Measurement{
			{"MRTD", hex.EncodeToString(body.GetMrTd())},
		},
		TCBStatus: "UpToDate",
		TCB: fmt.Sprintf("TEE_TCB_SVN %x, PCK CPUSVN %x PCESVN %d, TCB evaluation data number %d",
			svn, ext.TCB.CPUSvn, ext.TCB.PCESvn, ti.TcbEvaluationDataNumber),
		Platform:          "FMSPC " + strings.ToLower(ext.FMSPC),
		ChipID:            strings.ToLower(ext.PPID),
		Debug:             debug,
		RevocationChecked: true,
		Expiry:            v.expiry.UTC(),
	}
	for i, r := range body.GetRtmrs() {
		c.Measurements = append(c.Measurements, Measurement{fmt.Sprintf("RTMR%d", i), hex.EncodeToString(r)})
	}
	return c, body.GetReportData(), nil
}
