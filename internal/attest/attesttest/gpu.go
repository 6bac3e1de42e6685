package attesttest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/binary"
	"encoding/hex"
	"math/big"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/attest"
)

// GPUTime is an instant at which the GPU PKI's certificates are valid
// (2023 to 2040).
var GPUTime = time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)

// GPU is a test stand-in for one NVIDIA Hopper GPU and NVIDIA's device
// PKI: a root "NVIDIA Device Identity CA" (P-384, shared by every test
// GPU), a DeviceID certificate whose serial number is the GPU's identity,
// and an attestation key (AK) certificate with the DICE FWID extension and
// NVIDIA's subject alternative name, as the recorded chains have. Report
// signs SPDM GET_MEASUREMENTS exchanges of the recorded reports' shape.
type GPU struct {
	ak    *ecdsa.PrivateKey
	chain []*x509.Certificate // AK, DeviceID, root
	fwid  [48]byte
	// UUID is what State reports (an attest.GPUProducer's NVML UUID).
	UUID  string
	mu    sync.Mutex
	calls int
}

var (
	gpuRootOnce sync.Once
	gpuRootKey  *ecdsa.PrivateKey
	gpuRoot     *x509.Certificate
)

func p384Key() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return k
}

func testGPURoot() (*ecdsa.PrivateKey, *x509.Certificate) {
	gpuRootOnce.Do(func() {
		gpuRootKey = p384Key()
		name := pkix.Name{CommonName: "NVIDIA Device Identity CA", Organization: []string{"NVIDIA (test)"}}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(1), Subject: name, NotBefore: date(2023, 1, 1), NotAfter: date(2040, 1, 1),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		}
		gpuRoot = mustCert(tmpl, tmpl, &gpuRootKey.PublicKey, gpuRootKey)
	})
	return gpuRootKey, gpuRoot
}

// GPURootDER returns the GPU PKI's root certificate, DER.
func GPURootDER() []byte { _, r := testGPURoot(); return r.Raw }

// GPURootHash returns the hex SHA-256 of GPURootDER (for a genesis's
// attest_roots).
func GPURootHash() string {
	h := sha256.Sum256(GPURootDER())
	return hex.EncodeToString(h[:])
}

// NewGPU makes a test GPU whose DeviceID certificate has serial number
// serial: its identity as attest.GPUClaims.ID, upper-case hex.
func NewGPU(serial uint64) *GPU {
	rootKey, root := testGPURoot()
	devKey, ak := p384Key(), p384Key()
	dev := mustCert(&x509.Certificate{
		SerialNumber: new(big.Int).SetUint64(serial),
		Subject:      pkix.Name{CommonName: "GH100 A01 GSP BROM", Organization: []string{"NVIDIA Corporation"}, SerialNumber: new(big.Int).SetUint64(serial).Text(16)},
		NotBefore:    date(2023, 1, 1), NotAfter: date(2040, 1, 1),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}, root, &devKey.PublicKey, rootKey)
	g := &GPU{ak: ak}
	fw := sha512.Sum384(big.NewInt(int64(serial)).Bytes())
	g.fwid = fw
	tcbInfo, err := asn1.Marshal(struct {
		V    int
		FWID struct {
			Alg  asn1.ObjectIdentifier
			Hash []byte
		}
	}{V: 1, FWID: struct {
		Alg  asn1.ObjectIdentifier
		Hash []byte
	}{asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 2}, fw[:]}})
	if err != nil {
		panic(err)
	}
	san, err := asn1.Marshal([]asn1.RawValue{{FullBytes: otherName("NVIDIA:GH100:" + new(big.Int).SetUint64(serial).Text(16))}})
	if err != nil {
		panic(err)
	}
	leaf := mustCert(&x509.Certificate{
		SerialNumber: new(big.Int).SetUint64(serial<<8 | 1),
		Subject:      pkix.Name{CommonName: "GH100 A01 GSP FMC LF", Organization: []string{"NVIDIA Corporation"}},
		NotBefore:    date(2023, 1, 1), NotAfter: date(2040, 1, 1),
		KeyUsage: x509.KeyUsageDigitalSignature,
		ExtraExtensions: []pkix.Extension{
			{Id: asn1.ObjectIdentifier{2, 5, 29, 17}, Value: san},
			{Id: asn1.ObjectIdentifier{2, 23, 133, 5, 4, 1}, Value: tcbInfo},
		},
	}, dev, &ak.PublicKey, devKey)
	g.chain = []*x509.Certificate{leaf, dev, root}
	return g
}

// otherName encodes an otherName GeneralName of NVIDIA's type holding s.
func otherName(s string) []byte {
	v, _ := asn1.MarshalWithParams(s, "utf8")
	inner, _ := asn1.Marshal(struct {
		Type  asn1.ObjectIdentifier
		Value asn1.RawValue
	}{asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 412, 274, 1}, asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 0, IsCompound: true, Bytes: v}})
	// Retag the SEQUENCE as [0] constructed.
	inner[0] = 0xA0
	return inner
}

// CertChain returns the GPU's attestation chain as NVML gives it (PEM, AK
// first, ending in the root).
func (g *GPU) CertChain() []byte { return pemOf(g.chain...) }

// Report returns a signed SPDM 1.1 GET_MEASUREMENTS request and response
// over nonce, of the recorded Hopper reports' shape: 8 measurement blocks
// of 48 bytes, NVIDIA opaque data (driver 550.90.07, VBIOS 96.00.9F.00.01,
// the FWID of the AK certificate), an ECDSA P-384 signature.
func (g *GPU) Report(nonce [32]byte) []byte {
	b := []byte{0x11, 0xE0, 0x01, 0xFF}
	b = append(b, nonce[:]...)
	b = append(b, 0) // slot 0
	const blocks = 8
	var rec []byte
	for i := 1; i <= blocks; i++ {
		v := sha512.Sum384([]byte{byte(i)})
		rec = append(rec, byte(i), 0x01)
		rec = binary.LittleEndian.AppendUint16(rec, 51)
		rec = append(rec, 0x01)
		rec = binary.LittleEndian.AppendUint16(rec, 48)
		rec = append(rec, v[:]...)
	}
	b = append(b, 0x11, 0x60, 0x00, 0x00, blocks, byte(len(rec)), byte(len(rec)>>8), byte(len(rec)>>16))
	b = append(b, rec...)
	resp := sha256.Sum256(nonce[:])
	b = append(b, resp[:]...)
	var op []byte
	field := func(t uint16, v []byte) {
		op = binary.LittleEndian.AppendUint16(op, t)
		op = binary.LittleEndian.AppendUint16(op, uint16(len(v)))
		op = append(op, v...)
	}
	field(6, []byte{0x00, 0x9f, 0x00, 0x96, 0x01, 0x00, 0x00, 0x00})
	field(14, []byte{0xb1, 0x03, 0x00, 0x00})
	field(15, []byte("882\x00"))
	field(17, []byte("1010\x00"))
	field(18, []byte("0200\x00"))
	field(3, []byte("550.90.07\x00"))
	field(20, g.fwid[:])
	b = binary.LittleEndian.AppendUint16(b, uint16(len(op)))
	b = append(b, op...)
	h := sha512.Sum384(b)
	r, s, err := ecdsa.Sign(rand.Reader, g.ak, h[:])
	if err != nil {
		panic(err)
	}
	sig := make([]byte, 96)
	r.FillBytes(sig[:48])
	s.FillBytes(sig[48:])
	return append(b, sig...)
}

// Kind implements attest.Producer.
func (g *GPU) Kind() attest.Kind { return attest.KindNVIDIAGPU }

// Produce implements attest.Producer, as attest.GPUProducer does: the
// report over reportData's first 32 bytes, and the chain.
func (g *GPU) Produce(reportData [64]byte) (attest.Evidence, error) {
	g.mu.Lock()
	g.calls++
	g.mu.Unlock()
	var n [32]byte
	copy(n[:], reportData[:32])
	return attest.Evidence{Kind: attest.KindNVIDIAGPU, Raw: g.Report(n), Collateral: map[string][]byte{attest.GPUCertChain: g.CertChain()}}, nil
}

// State reports the GPU's UUID and CC on, as NVML would.
func (g *GPU) State() (string, attest.GPUCCState, error) {
	return g.UUID, attest.GPUCCState{Environment: 2, CCFeature: 1}, nil
}

// Calls returns how many times Produce ran.
func (g *GPU) Calls() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls
}

// Evidence returns the GPU's evidence over the SPDM nonce
// attest.GPUNonce(nonce, key), as an NVML producer gives it.
func (g *GPU) Evidence(nonce, key []byte) attest.Evidence {
	return attest.Evidence{Kind: attest.KindNVIDIAGPU, Raw: g.Report(attest.GPUNonce(nonce, key)), Collateral: map[string][]byte{attest.GPUCertChain: g.CertChain()}}
}
