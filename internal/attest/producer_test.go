package attest

import (
	"fmt"
	"testing"

	spb "github.com/google/go-sev-guest/proto/sevsnp"
)

// tdxRecorder is a go-tdx-guest client.QuoteProvider that answers with
// evidence of the test PKI over the report data asked for.
type tdxRecorder struct{ p *tdxPKI }

func (tdxRecorder) IsSupported() error { return nil }
func (r tdxRecorder) GetRawQuote(rd [64]byte) ([]uint8, error) {
	return r.p.quote(rd), nil
}

// snpRecorder is a go-sev-guest client.QuoteProvider: it answers with
// recorded reports, by report data, followed by the host's certificate
// table, as the kernel does.
type snpRecorder struct {
	reports map[[64]byte][]byte
	table   []byte
}

func (snpRecorder) IsSupported() bool        { return true }
func (snpRecorder) Product() *spb.SevProduct { return nil }
func (r snpRecorder) GetRawQuote(rd [64]byte) ([]uint8, error) {
	rep, ok := r.reports[rd]
	if !ok {
		return nil, fmt.Errorf("no recorded report for report data %x", rd)
	}
	return append(append([]byte{}, rep...), r.table...), nil
}

func TestProduceTDX(t *testing.T) {
	p := testTDXPKI(t)
	ev, err := Produce(TDXProducer{QuoteProvider: tdxRecorder{p}}, nonce1, key1)
	if err != nil {
		t.Fatal(err)
	}
	ev.Collateral = p.collateral(tdxCollateralOpts{})
	c, err := Verify(ev, Options{Now: tdxAt, Nonce: nonce1, Key: key1, TrustedRoots: p.roots()})
	if err != nil || !c.Bound {
		t.Fatalf("%+v, %v", c, err)
	}
}

func TestProduceSNP(t *testing.T) {
	s := testSNPPKI(t)
	table, err := s.signer.CertTableBytes()
	if err != nil {
		t.Fatal(err)
	}
	rd := ReportData(nonce1, key1)
	recorded := realSNP(t)
	var realRD [64]byte
	copy(realRD[:], recorded.Raw[0x50:0x90])
	rec := snpRecorder{reports: map[[64]byte][]byte{rd: s.report(rd), realRD: recorded.Raw}, table: table}

	// Evidence of the test signer, bound: the VCEK comes from the
	// certificate table, the rest of the collateral from KDS.
	ev, err := Produce(SNPProducer{QuoteProvider: rec}, nonce1, key1)
	if err != nil {
		t.Fatal(err)
	}
	if string(ev.Collateral[SNPVCEK]) != string(s.signer.Vcek.Raw) {
		t.Fatal("the VCEK of the certificate table is not in the collateral")
	}
	col := s.collateral(false)
	ev.Collateral[SNPCertChain], ev.Collateral[SNPCRL] = col[SNPCertChain], col[SNPCRL]
	if c, err := Verify(ev, Options{Now: snpAt, Nonce: nonce1, Key: key1, TrustedRoots: s.roots()}); err != nil || !c.Bound {
		t.Fatalf("%+v, %v", c, err)
	}

	// The recorded real report, replayed through the producer.
	ev, err = SNPProducer{QuoteProvider: rec}.Produce(realRD)
	if err != nil {
		t.Fatal(err)
	}
	ev.Collateral = recorded.Collateral
	if _, err := Verify(ev, realSNPOpts()); err != nil {
		t.Fatal(err)
	}
}
