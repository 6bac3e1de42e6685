package attest

import (
	"errors"
	"fmt"

	sabi "github.com/google/go-sev-guest/abi"
	sclient "github.com/google/go-sev-guest/client"
	tclient "github.com/google/go-tdx-guest/client"
)

// Producer asks a TEE for evidence over 64 bytes of report data: the
// agent's side, inside a confidential guest. It cannot run on a machine
// that is not one; tests drive it with recorded evidence
// (docs/confidential.md says what has run on real hardware).
type Producer interface {
	Kind() Kind
	// Produce returns the evidence for reportData, with whatever
	// collateral the TEE hands out with it (an SNP VCEK from the host's
	// certificate table); the rest comes from the vendor's service.
	Produce(reportData [64]byte) (Evidence, error)
}

// Produce asks p for evidence that binds nonce and key (ReportData).
func Produce(p Producer, nonce, key []byte) (Evidence, error) {
	if len(nonce) == 0 {
		return Evidence{}, errors.New("attest: no nonce to bind")
	}
	ev, err := p.Produce(ReportData(nonce, key))
	if err != nil {
		return Evidence{}, fmt.Errorf("attest: %s evidence: %w", p.Kind(), err)
	}
	return ev, nil
}

// TDXProducer gets a TDX quote through go-tdx-guest's client: the kernel's
// configfs-tsm report interface, or /dev/tdx_guest.
type TDXProducer struct {
	// QuoteProvider is a go-tdx-guest client.QuoteProvider or
	// client.Device; nil opens the guest's (client.GetQuoteProvider).
	QuoteProvider any
}

// Kind is KindTDX.
func (TDXProducer) Kind() Kind { return KindTDX }

// Produce gets a quote over reportData.
func (p TDXProducer) Produce(reportData [64]byte) (Evidence, error) {
	qp := p.QuoteProvider
	if qp == nil {
		var err error
		if qp, err = tdxQuoteProvider(); err != nil {
			return Evidence{}, err
		}
	}
	raw, err := tclient.GetRawQuote(qp, reportData)
	if err != nil {
		return Evidence{}, err
	}
	return Evidence{Kind: KindTDX, Raw: raw, Collateral: map[string][]byte{}}, nil
}

// SNPProducer gets an SEV-SNP extended report through go-sev-guest's
// client: configfs-tsm or /dev/sev-guest.
type SNPProducer struct {
	// QuoteProvider nil opens the guest's (client.GetQuoteProvider).
	QuoteProvider sclient.QuoteProvider
}

// Kind is KindSEVSNP.
func (SNPProducer) Kind() Kind { return KindSEVSNP }

// Produce gets a report over reportData; the VCEK of the host's
// certificate table, when there is one, goes into the collateral.
func (p SNPProducer) Produce(reportData [64]byte) (Evidence, error) {
	qp := p.QuoteProvider
	if qp == nil {
		var err error
		if qp, err = sclient.GetQuoteProvider(); err != nil {
			return Evidence{}, err
		}
	}
	raw, err := qp.GetRawQuote(reportData)
	if err != nil {
		return Evidence{}, err
	}
	if len(raw) < sabi.ReportSize {
		return Evidence{}, fmt.Errorf("SEV-SNP report of %d bytes, want at least %d", len(raw), sabi.ReportSize)
	}
	ev := Evidence{Kind: KindSEVSNP, Raw: append([]byte(nil), raw[:sabi.ReportSize]...), Collateral: map[string][]byte{}}
	if len(raw) > sabi.ReportSize {
		att, err := sabi.ReportCertsToProto(raw)
		if err != nil {
			return Evidence{}, fmt.Errorf("SEV-SNP certificate table: %w", err)
		}
		if v := att.GetCertificateChain().GetVcekCert(); len(v) > 0 {
			ev.Collateral[SNPVCEK] = v
		}
	}
	return ev, nil
}

// tdxQuoteProvider opens the guest's quote provider; a nil *T in an
// interface would not be nil, so the pointer is checked first.
func tdxQuoteProvider() (any, error) {
	qp, err := tclient.GetQuoteProvider()
	if err != nil {
		return nil, err
	}
	if qp == nil {
		return nil, errors.New("no TDX quote provider")
	}
	return qp, nil
}
