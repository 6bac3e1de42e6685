package attest

import (
	"bytes"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	sabi "github.com/google/go-sev-guest/abi"
	"github.com/google/go-sev-guest/kds"
	spb "github.com/google/go-sev-guest/proto/sevsnp"
	sverify "github.com/google/go-sev-guest/verify"
	"github.com/google/go-sev-guest/verify/trust"
)

// snpGetter serves go-sev-guest's KDS requests from the collateral only:
// the CRL, and nothing else (certificate fetching is disabled).
type snpGetter struct {
	crlURLs []string
	crl     []byte
}

func (g *snpGetter) Get(u string) ([]byte, error) {
	if g.crl != nil && slices.Contains(g.crlURLs, u) {
		return g.crl, nil
	}
	return nil, fmt.Errorf("offline verification: no collateral serves %s", u)
}

func tcbString(t kds.TCBParts) string {
	return fmt.Sprintf("bootloader %d, TEE %d, SNP %d, microcode %d", t.BlSpl, t.TeeSpl, t.SnpSpl, t.UcodeSpl)
}

func verifySNP(ev Evidence, opts Options, roots []*x509.Certificate) (c *Claims, rd []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			c, rd, err = nil, nil, refuse(ReasonMalformed, "SEV-SNP report: the decoder failed: %v", r)
		}
	}()
	if len(ev.Raw) != sabi.ReportSize {
		return nil, nil, refuse(ReasonMalformed, "SEV-SNP report of %d bytes, want %d (the report alone, without a certificate table)", len(ev.Raw), sabi.ReportSize)
	}
	if err := sabi.ValidateReportFormat(ev.Raw); err != nil {
		return nil, nil, refuse(ReasonMalformed, "SEV-SNP report: %v", err)
	}
	report, err := sabi.ReportToProto(ev.Raw)
	if err != nil {
		return nil, nil, refuse(ReasonMalformed, "SEV-SNP report: %v", err)
	}
	info, err := sabi.ParseSignerInfo(report.GetSignerInfo())
	if err != nil {
		return nil, nil, refuse(ReasonMalformed, "SEV-SNP report signer info: %v", err)
	}
	if info.SigningKey != sabi.VcekReportSigner {
		return nil, nil, refuse(ReasonUnsupported, "SEV-SNP report signed by the %v (VCEK-signed reports are verified)", info.SigningKey)
	}

	// Collateral.
	vcekDER, err := needBlob(ev, SNPVCEK, "AMD KDS VCEK certificate")
	if err != nil {
		return nil, nil, err
	}
	vcek, err := trust.ParseCert(vcekDER)
	if err != nil {
		return nil, nil, refuse(ReasonCollateral, "%s: %v", SNPVCEK, err)
	}
	chainPEM, err := needBlob(ev, SNPCertChain, "AMD KDS cert_chain: ASK and ARK")
	if err != nil {
		return nil, nil, err
	}
	askDER, arkDER, err := kds.ParseProductCertChain(chainPEM)
	if err != nil {
		return nil, nil, refuse(ReasonCollateral, "%s: %v", SNPCertChain, err)
	}
	ask, err := x509.ParseCertificate(askDER)
	if err != nil {
		return nil, nil, refuse(ReasonCollateral, "%s: ASK: %v", SNPCertChain, err)
	}
	var crl *x509.RevocationList
	if b := ev.Collateral[SNPCRL]; len(b) > 0 {
		if crl, err = parseCRL(b); err != nil {
			return nil, nil, refuse(ReasonCollateral, "%s: %v", SNPCRL, err)
		}
	} else if !opts.AllowMissingCRL {
		return nil, nil, refuse(ReasonCollateral, "missing %s (AMD KDS CRL of the product line): revocation cannot be checked", SNPCRL)
	}

	// The ARK must be a trusted root, byte for byte.
	var ark *x509.Certificate
	for _, r := range roots {
		if bytes.Equal(r.Raw, arkDER) {
			ark = r
			break
		}
	}
	if ark == nil {
		cn := "?"
		if a, err := x509.ParseCertificate(arkDER); err == nil {
			cn = a.Subject.CommonName
		}
		return nil, nil, refuse(ReasonChain, "the ARK in %s (%s) is not a trusted root", SNPCertChain, cn)
	}
	productLine, ok := strings.CutPrefix(ark.Subject.CommonName, "ARK-")
	if !ok {
		return nil, nil, refuse(ReasonChain, "trusted root %q is not an AMD ARK", ark.Subject.CommonName)
	}

	// Collateral of another platform.
	exts, err := kds.VcekCertificateExtensions(vcek)
	if err != nil {
		return nil, nil, refuse(ReasonCollateral, "%s: %v", SNPVCEK, err)
	}
	if got := kds.ProductLineOfProductName(exts.ProductName); got != productLine {
		return nil, nil, refuse(ReasonPlatform, "%s is for product %s; %s is the %s chain (collateral of another platform)", SNPVCEK, exts.ProductName, SNPCertChain, productLine)
	}
	if fms := report.GetCpuid1EaxFms(); fms != 0 {
		if got := kds.ProductLineFromFms(fms); got != productLine {
			return nil, nil, refuse(ReasonPlatform, "the report comes from a %s CPU; the collateral is for %s (collateral of another platform)", got, productLine)
		}
	}
	if !bytes.Equal(exts.HWID, report.GetChipId()) {
		return nil, nil, refuse(ReasonPlatform, "%s is the VCEK of chip %x…; the report comes from chip %x… (collateral of another platform)", SNPVCEK, head(exts.HWID), head(report.GetChipId()))
	}
	reported := kds.DecomposeTCBVersion(kds.TCBVersion(report.GetReportedTcb()))
	if exts.TCBVersion != kds.TCBVersion(report.GetReportedTcb()) {
		return nil, nil, refuse(ReasonPlatform, "%s certifies TCB (%s); the report's REPORTED_TCB is (%s): the VCEK of another TCB", SNPVCEK, tcbString(kds.DecomposeTCBVersion(exts.TCBVersion)), tcbString(reported))
	}

	// Validity at Now, and the earliest expiry.
	v := &validity{now: opts.Now}
	for _, x := range []struct {
		what string
		c    *x509.Certificate
	}{{"VCEK", vcek}, {"ASK", ask}, {"ARK", ark}} {
		if err := v.cert(x.what, x.c); err != nil {
			return nil, nil, err
		}
	}
	if crl != nil {
		if err := v.crl(SNPCRL, crl); err != nil {
			return nil, nil, err
		}
		if err := crl.CheckSignatureFrom(ark); err != nil {
			return nil, nil, refuse(ReasonSignature, "%s is not signed by %s: %v", SNPCRL, ark.Subject.CommonName, err)
		}
		for _, rc := range crl.RevokedCertificateEntries {
			switch {
			case rc.SerialNumber.Cmp(ask.SerialNumber) == 0:
				return nil, nil, refuse(ReasonRevoked, "the ASK (%s, serial %x) was revoked at %s by %s", ask.Subject.CommonName, ask.SerialNumber, rc.RevocationTime.UTC().Format("2006-01-02T15:04:05Z"), SNPCRL)
			case rc.SerialNumber.Cmp(vcek.SerialNumber) == 0:
				return nil, nil, refuse(ReasonRevoked, "the VCEK (serial %x) was revoked at %s by %s", vcek.SerialNumber, rc.RevocationTime.UTC().Format("2006-01-02T15:04:05Z"), SNPCRL)
			}
		}
	}

	// The minimum TCB.
	min := opts.MinTCB[KindSEVSNP]
	for _, x := range []struct {
		name     string
		got, min uint8
	}{
		{"bootloader", reported.BlSpl, min.BootloaderSPL}, {"TEE", reported.TeeSpl, min.TEESPL},
		{"SNP", reported.SnpSpl, min.SNPSPL}, {"microcode", reported.UcodeSpl, min.MicrocodeSPL},
	} {
		if x.got < x.min {
			return nil, nil, refuse(ReasonTCB, "stale TCB: the report's %s SPL is %d, the minimum is %d (REPORTED_TCB %s)", x.name, x.got, x.min, tcbString(reported))
		}
	}

	policy, err := sabi.ParseSnpPolicy(report.GetPolicy())
	if err != nil {
		return nil, nil, refuse(ReasonMalformed, "SEV-SNP report policy: %v", err)
	}
	if policy.Debug && !opts.AllowDebug {
		return nil, nil, refuse(ReasonPolicy, "the guest policy (0x%x) allows debugging: the host can read its memory", report.GetPolicy())
	}

	// The library: VCEK → ASK → trusted ARK, the ASK's revocation, the
	// report's signature.
	root := &trust.AMDRootCerts{ProductLine: productLine, ProductCerts: &trust.ProductCerts{Ask: ask, Ark: ark}, CRL: crl}
	attestation := &spb.Attestation{
		Report:           report,
		CertificateChain: &spb.CertificateChain{VcekCert: vcek.Raw, AskCert: ask.Raw, ArkCert: ark.Raw},
	}
	lopts := &sverify.Options{
		CheckRevocations:    crl != nil,
		DisableCertFetching: true,
		Getter:              &snpGetter{crlURLs: ask.CRLDistributionPoints, crl: rawOf(crl)},
		Now:                 opts.Now,
		TrustedRoots:        map[string][]*trust.AMDRootCerts{productLine: {root}},
	}
	if err := sverify.SnpAttestation(attestation, lopts); err != nil {
		return nil, nil, classify("go-sev-guest", err)
	}

	c = &Claims{
		Vendor: "AMD",
		TEE:    "SEV-SNP",
		Measurements: []Measurement{
			{"MEASUREMENT", hex.EncodeToString(report.GetMeasurement())},
			{"HOST_DATA", hex.EncodeToString(report.GetHostData())},
		},
		TCBStatus:         "meets the minimum",
		TCB:               tcbString(reported),
		Platform:          "AMD " + productLine + " (" + exts.ProductName + ")",
		ChipID:            hex.EncodeToString(report.GetChipId()),
		Debug:             policy.Debug,
		RevocationChecked: crl != nil,
		Expiry:            v.expiry.UTC(),
	}
	return c, report.GetReportData(), nil
}

func rawOf(c *x509.RevocationList) []byte {
	if c == nil {
		return nil
	}
	return c.Raw
}

func head(b []byte) []byte {
	if len(b) > 8 {
		return b[:8]
	}
	return b
}
