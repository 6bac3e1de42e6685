package attest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/asn1"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync"
)

// NVIDIA GPU evidence (Hopper, confidential-computing mode): what NVML's
// nvmlDeviceGetConfComputeGpuAttestationReport returns, an SPDM 1.1
// GET_MEASUREMENTS request (which carries the requester's 32-byte nonce)
// followed by the GPU's MEASUREMENTS response (DMTF measurement blocks,
// NVIDIA's opaque data, and an ECDSA P-384 signature over SHA-384 of the
// request and the response up to the signature), and the GPU's attestation
// certificate chain from nvmlDeviceGetConfComputeGpuCertificate: the
// attestation key (AK) certificate first, then the DeviceID certificate
// NVIDIA provisioned into the GPU, NVIDIA's intermediates, and NVIDIA's
// Device Identity CA.
//
// Evidence.Raw is the report's bytes; Evidence.Collateral[GPUCertChain] the
// chain in PEM. The binding: the request's nonce is the first 32 bytes of
// ReportData(nonce, key), so the GPU's evidence binds the same chain nonce
// and agent key as the CPU TEE's report data.

// GPUCertChain is the collateral name of an NVIDIA GPU's attestation
// certificate chain (PEM, AK certificate first), as NVML returns it.
const GPUCertChain = "gpu_cert_chain.pem"

// Bounds of NVIDIA evidence: NVML's buffers are 8 KiB for the report and
// 5 KiB for the attestation chain; a Hopper chain has 5 certificates.
const (
	MaxGPUReport    = 8192
	MaxGPUCertChain = 16 << 10
	maxGPUCerts     = 8
	maxGPUBlocks    = 255
	maxOpaqueFields = 64
)

// SPDM constants of a GET_MEASUREMENTS exchange.
const (
	spdmVersion11         = 0x11
	spdmGetMeasurements   = 0xE0
	spdmMeasurements      = 0x60
	spdmRequestLen        = 37 // version, code, param1, param2, nonce, slot
	spdmNonceLen          = 32
	spdmSigRequested      = 0x01 // param1 bit 0: a signature is requested
	spdmAllMeasurements   = 0xFF // param2: every measurement block
	dmtfMeasurementSpec   = 0x01
	p384SignatureLen      = 96 // r || s, 48 bytes each
	spdmResponseHeaderLen = 8
)

// NVIDIA's opaque-data field types (the OPAQUE_FIELD_ID_* of its
// verifier) that Verify reads.
const (
	opaqueDriverVersion = 3
	opaqueGPUInfo       = 4
	opaqueSKU           = 5
	opaqueVBIOSVersion  = 6
	opaqueBoardID       = 14
	opaqueChipSKU       = 15
	opaqueChipSKUMod    = 16
	opaqueProject       = 17
	opaqueProjectSKU    = 18
	opaqueProjectSKUMod = 19
	opaqueFWID          = 20
	opaqueProtectedPCIe = 21
	opaqueChipInfo      = 35
	opaqueFeatureFlag   = 36
)

// GPUMeasurement is one DMTF measurement block of the response.
type GPUMeasurement struct {
	Index     uint8
	ValueType uint8 // DMTFSpecMeasurementValueType
	Value     []byte
}

// GPUReport is a parsed NVIDIA GPU attestation report.
type GPUReport struct {
	Version      uint8 // SPDM version, 0x11
	Nonce        [spdmNonceLen]byte
	SlotID       uint8
	Measurements []GPUMeasurement
	// RecordHash is SHA-384 of the measurement record as signed: the
	// blocks in the GPU's order.
	RecordHash [48]byte
	// ResponderNonce is the GPU's own nonce.
	ResponderNonce [spdmNonceLen]byte
	// Opaque maps an opaque field's type to its data, each type once.
	Opaque    map[uint16][]byte
	Signature []byte
	// Signed is the request and the response up to the signature.
	Signed []byte
}

// ParseGPUReport parses an SPDM 1.1 GET_MEASUREMENTS request and response
// as NVML returns them, checking every length; it verifies nothing.
func ParseGPUReport(b []byte) (*GPUReport, error) {
	if len(b) > MaxGPUReport {
		return nil, fmt.Errorf("report of %d bytes, at most %d", len(b), MaxGPUReport)
	}
	if len(b) < spdmRequestLen+spdmResponseHeaderLen+spdmNonceLen+2+p384SignatureLen {
		return nil, fmt.Errorf("report of %d bytes is too short for an SPDM GET_MEASUREMENTS request and a signed response", len(b))
	}
	r := &GPUReport{Version: b[0], SlotID: b[36]}
	if b[0] != spdmVersion11 || b[1] != spdmGetMeasurements {
		return nil, fmt.Errorf("request: version %#x code %#x, want SPDM 1.1 (0x11) GET_MEASUREMENTS (0xe0)", b[0], b[1])
	}
	if b[2]&spdmSigRequested == 0 {
		return nil, fmt.Errorf("request: param1 %#x does not ask for a signature", b[2])
	}
	if b[3] != spdmAllMeasurements {
		return nil, fmt.Errorf("request: param2 %#x, want 0xff (all measurement blocks)", b[3])
	}
	if b[36] > 7 {
		return nil, fmt.Errorf("request: slot %d, want 0 to 7", b[36])
	}
	copy(r.Nonce[:], b[4:36])

	resp := b[spdmRequestLen:]
	if resp[0] != b[0] || resp[1] != spdmMeasurements {
		return nil, fmt.Errorf("response: version %#x code %#x, want %#x MEASUREMENTS (0x60)", resp[0], resp[1], b[0])
	}
	nBlocks := int(resp[4])
	recLen := int(resp[5]) | int(resp[6])<<8 | int(resp[7])<<16
	if nBlocks == 0 {
		return nil, fmt.Errorf("response: no measurement blocks")
	}
	p := spdmResponseHeaderLen
	if recLen > len(resp)-p {
		return nil, fmt.Errorf("response: measurement record of %d bytes, %d left", recLen, len(resp)-p)
	}
	rec := resp[p : p+recLen]
	r.RecordHash = sha512.Sum384(rec)
	var seen [256]bool
	for q := 0; q < len(rec); {
		if len(r.Measurements) == nBlocks {
			return nil, fmt.Errorf("response: %d bytes of measurement record after its %d blocks", len(rec)-q, nBlocks)
		}
		if len(rec)-q < 4 {
			return nil, fmt.Errorf("response: measurement block %d: truncated header", len(r.Measurements))
		}
		idx, spec, size := rec[q], rec[q+1], int(binary.LittleEndian.Uint16(rec[q+2:]))
		q += 4
		if idx == 0 || idx == 0xFF || seen[idx] {
			return nil, fmt.Errorf("response: measurement block index %d is reserved or repeated", idx)
		}
		seen[idx] = true
		if spec != dmtfMeasurementSpec {
			return nil, fmt.Errorf("response: measurement block %d: specification %#x, want DMTF (0x01)", idx, spec)
		}
		if size < 3 || size > len(rec)-q {
			return nil, fmt.Errorf("response: measurement block %d of %d bytes, %d left in the record", idx, size, len(rec)-q)
		}
		m := rec[q : q+size]
		q += size
		vsize := int(binary.LittleEndian.Uint16(m[1:3]))
		if vsize != size-3 {
			return nil, fmt.Errorf("response: measurement block %d: value of %d bytes in a block of %d", idx, vsize, size)
		}
		r.Measurements = append(r.Measurements, GPUMeasurement{Index: idx, ValueType: m[0], Value: m[3:]})
	}
	if len(r.Measurements) != nBlocks {
		return nil, fmt.Errorf("response: %d measurement blocks, the header says %d", len(r.Measurements), nBlocks)
	}
	p += recLen
	if len(resp)-p < spdmNonceLen+2 {
		return nil, fmt.Errorf("response: truncated after the measurement record")
	}
	copy(r.ResponderNonce[:], resp[p:p+spdmNonceLen])
	p += spdmNonceLen
	opLen := int(binary.LittleEndian.Uint16(resp[p:]))
	p += 2
	if opLen > len(resp)-p {
		return nil, fmt.Errorf("response: opaque data of %d bytes, %d left", opLen, len(resp)-p)
	}
	var err error
	if r.Opaque, err = parseOpaque(resp[p : p+opLen]); err != nil {
		return nil, fmt.Errorf("response: opaque data: %w", err)
	}
	p += opLen
	if len(resp)-p != p384SignatureLen {
		return nil, fmt.Errorf("response: %d bytes after the opaque data, want a %d-byte P-384 signature", len(resp)-p, p384SignatureLen)
	}
	r.Signature = resp[p:]
	r.Signed = b[:len(b)-p384SignatureLen]
	return r, nil
}

// parseOpaque parses NVIDIA's opaque data: fields of a 2-byte type, a
// 2-byte size and the data, little-endian, each type at most once.
func parseOpaque(b []byte) (map[uint16][]byte, error) {
	out := map[uint16][]byte{}
	for p := 0; p < len(b); {
		if len(out) == maxOpaqueFields {
			return nil, fmt.Errorf("more than %d fields", maxOpaqueFields)
		}
		if len(b)-p < 4 {
			return nil, fmt.Errorf("truncated field header at byte %d", p)
		}
		typ, size := binary.LittleEndian.Uint16(b[p:]), int(binary.LittleEndian.Uint16(b[p+2:]))
		p += 4
		if size > len(b)-p {
			return nil, fmt.Errorf("field %d of %d bytes, %d left", typ, size, len(b)-p)
		}
		if _, dup := out[typ]; dup {
			return nil, fmt.Errorf("field %d twice", typ)
		}
		out[typ] = b[p : p+size]
		p += size
	}
	return out, nil
}

// cString is an opaque text field up to its first NUL.
func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return strings.ToValidUTF8(string(b), "?")
}

// vbiosVersion formats NVIDIA's 8-byte VBIOS version field as nvidia-smi
// does: "96.00.9F.00.01".
func vbiosVersion(b []byte) string {
	if len(b) != 8 {
		return fmt.Sprintf("%X", b)
	}
	return fmt.Sprintf("%02X.%02X.%02X.%02X.%02X", b[3], b[2], b[1], b[0], b[4])
}

// GPUClaims are what verified NVIDIA GPU evidence proves, besides Claims.
type GPUClaims struct {
	// ID is the GPU's identity: the serial number (upper-case hex) of its
	// DeviceID certificate, which NVIDIA's provisioning CA issued for the
	// key fused into this GPU (the AK certificate's issuer). It does not
	// change with firmware.
	ID string `json:"id"`
	// Model is the DeviceID certificate's common name, NVIDIA's hwmodel
	// ("GH100 A01 GSP BROM").
	Model string `json:"model"`
	// UEID is NVIDIA's ueid claim: the AK certificate's serial number in
	// decimal (it changes when the GPU's firmware changes).
	UEID string `json:"ueid"`
	// DeviceName is the AK certificate's NVIDIA subject-alternative name
	// ("NVIDIA:GH100:48B02D92494BADF4"), when it has one.
	DeviceName    string `json:"device_name,omitempty"`
	DriverVersion string `json:"driver_version"`
	VBIOSVersion  string `json:"vbios_version"`
	BoardID       string `json:"board_id,omitempty"`
	ChipSKU       string `json:"chip_sku,omitempty"`
	Project       string `json:"project,omitempty"`
	ProjectSKU    string `json:"project_sku,omitempty"`
	// FWID is the firmware ID in the report (hex), matched against the AK
	// certificate's TCG DICE extension; empty in reports without one.
	FWID string `json:"fwid,omitempty"`
	// FeatureFlag is the multi-GPU mode of the opaque data (SPT, MPT,
	// PPCIE) where the report has it.
	FeatureFlag string `json:"feature_flag,omitempty"`
	// ProtectedPCIe is the opaque data's protected-PCIe status byte, where
	// present (hex).
	ProtectedPCIe string `json:"protected_pcie,omitempty"`
	// Blocks is the number of measurement blocks; the measurement claim
	// is SHA-384 of the record that holds them.
	Blocks int `json:"blocks"`
}

// tcgDICETcbInfo is the TCG DICE TcbInfo extension, whose last 48 bytes in
// NVIDIA Hopper AK certificates are the firmware ID (SHA-384).
var tcgDICETcbInfo = asn1.ObjectIdentifier{2, 23, 133, 5, 4, 1}

// nvidiaSANOID is NVIDIA's otherName type in its AK certificates'
// subject alternative name.
var nvidiaSANOID = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 412, 274, 1}

func verifyNVGPU(ev Evidence, opts Options, roots []*x509.Certificate) (c *Claims, rd []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			c, rd, err = nil, nil, refuse(ReasonMalformed, "NVIDIA GPU evidence: the decoder failed: %v", r)
		}
	}()
	rep, err := ParseGPUReport(ev.Raw)
	if err != nil {
		return nil, nil, refuse(ReasonMalformed, "NVIDIA GPU report: %v", err)
	}
	chainPEM, err := needBlob(ev, GPUCertChain, "the GPU's attestation certificate chain from NVML")
	if err != nil {
		return nil, nil, err
	}
	if len(chainPEM) > MaxGPUCertChain {
		return nil, nil, refuse(ReasonCollateral, "%s of %d bytes (at most %d)", GPUCertChain, len(chainPEM), MaxGPUCertChain)
	}
	chain, err := parseCerts(chainPEM)
	if err != nil {
		return nil, nil, refuse(ReasonCollateral, "%s: %v", GPUCertChain, err)
	}
	if len(chain) < 2 || len(chain) > maxGPUCerts {
		return nil, nil, refuse(ReasonCollateral, "%s has %d certificates: want the AK certificate, the DeviceID certificate and NVIDIA's CAs (2 to %d)", GPUCertChain, len(chain), maxGPUCerts)
	}
	v := validity{now: opts.Now}
	if err := verifyGPUChain(chain, roots, &v); err != nil {
		return nil, nil, err
	}
	ak, dev := chain[0], chain[1]
	// The identity is the AK certificate's issuer: a GPU's DeviceID
	// certificate, never a CA every GPU shares.
	if bytes.Equal(dev.RawIssuer, dev.RawSubject) || slices.ContainsFunc(roots, func(r *x509.Certificate) bool { return bytes.Equal(r.Raw, dev.Raw) }) {
		return nil, nil, refuse(ReasonChain, "the AK certificate (%s) is issued by a root (%s), not by a GPU's DeviceID certificate", ak.Subject.CommonName, dev.Subject.CommonName)
	}
	if ak.IsCA || (ak.KeyUsage != 0 && ak.KeyUsage&x509.KeyUsageDigitalSignature == 0) {
		return nil, nil, refuse(ReasonChain, "the AK certificate (%s) is a CA or may not sign (key usage %#x)", ak.Subject.CommonName, ak.KeyUsage)
	}
	pub, ok := ak.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P384() {
		return nil, nil, refuse(ReasonCollateral, "AK certificate (%s) has a %T key, want ECDSA P-384", ak.Subject.CommonName, ak.PublicKey)
	}
	digest := sha512.Sum384(rep.Signed)
	rs, ss := new(big.Int).SetBytes(rep.Signature[:48]), new(big.Int).SetBytes(rep.Signature[48:])
	if !ecdsa.Verify(pub, digest[:], rs, ss) {
		return nil, nil, refuse(ReasonSignature, "the report's P-384 signature does not verify with the AK certificate's key (%s, serial %X): altered report, or a report of another GPU", ak.Subject.CommonName, ak.SerialNumber)
	}

	g := &GPUClaims{
		ID: fmt.Sprintf("%X", dev.SerialNumber), Model: dev.Subject.CommonName, UEID: ak.SerialNumber.String(),
		DeviceName:    nvidiaDeviceName(ak),
		DriverVersion: cString(rep.Opaque[opaqueDriverVersion]),
		VBIOSVersion:  vbiosVersion(rep.Opaque[opaqueVBIOSVersion]),
		ChipSKU:       cString(rep.Opaque[opaqueChipSKU]),
		Project:       cString(rep.Opaque[opaqueProject]),
		ProjectSKU:    cString(rep.Opaque[opaqueProjectSKU]),
		Blocks:        len(rep.Measurements),
	}
	if b := rep.Opaque[opaqueBoardID]; len(b) == 4 {
		g.BoardID = fmt.Sprintf("%#x", binary.LittleEndian.Uint32(b))
	}
	if b, ok := rep.Opaque[opaqueProtectedPCIe]; ok {
		g.ProtectedPCIe = hex.EncodeToString(b)
	}
	if b, ok := rep.Opaque[opaqueFeatureFlag]; ok {
		if len(b) != 4 {
			return nil, nil, refuse(ReasonMalformed, "NVIDIA GPU report: feature flag of %d bytes, want 4", len(b))
		}
		switch f := binary.LittleEndian.Uint32(b); f {
		case 0:
			g.FeatureFlag = "SPT"
		case 1:
			g.FeatureFlag = "MPT"
		case 2:
			g.FeatureFlag = "PPCIE"
		default:
			g.FeatureFlag = fmt.Sprintf("unknown(%d)", f)
		}
	}
	if g.DriverVersion == "" {
		return nil, nil, refuse(ReasonMalformed, "NVIDIA GPU report: no driver version in the opaque data")
	}
	if fw, ok := rep.Opaque[opaqueFWID]; ok {
		g.FWID = hex.EncodeToString(fw)
		certFW := akFWID(ak)
		if certFW == nil {
			return nil, nil, refuse(ReasonPlatform, "the report has FWID %x and the AK certificate no TCG DICE FWID to match", fw)
		}
		if !bytes.Equal(certFW, fw) {
			return nil, nil, refuse(ReasonPlatform, "the report's FWID %x is not the AK certificate's %x: the report is of other firmware than the certificate", fw, certFW)
		}
	}

	c = &Claims{
		Vendor: "NVIDIA", TEE: "GPU confidential computing",
		Measurements: []Measurement{{Name: "MEASUREMENTS", Hex: hex.EncodeToString(rep.RecordHash[:])}},
		TCBStatus:    "not appraised (no reference measurements)",
		TCB:          fmt.Sprintf("driver %s, VBIOS %s", g.DriverVersion, g.VBIOSVersion),
		Platform:     g.Model,
		ChipID:       g.ID,
		Expiry:       v.expiry,
		GPU:          g,
	}
	return c, rep.Nonce[:], nil
}

// verifyGPUChain checks that each certificate is signed by the next and
// the last by (or is) a trusted root, every one valid at v.now, the
// issuers CAs, and no unknown critical extension.
func verifyGPUChain(chain, roots []*x509.Certificate, v *validity) error {
	for i, c := range chain {
		if len(c.UnhandledCriticalExtensions) > 0 {
			return refuse(ReasonChain, "certificate %d (%s) has an unknown critical extension %v", i, c.Subject.CommonName, c.UnhandledCriticalExtensions[0])
		}
		what := "AK"
		if i > 0 {
			what = fmt.Sprintf("GPU chain's certificate %d", i)
		}
		if err := v.cert(what, c); err != nil {
			return err
		}
		if i == 0 {
			continue
		}
		if !c.IsCA {
			return refuse(ReasonChain, "certificate %d (%s) issues certificate %d but is not a CA", i, c.Subject.CommonName, i-1)
		}
		if c.MaxPathLen >= 0 && (c.MaxPathLen > 0 || c.MaxPathLenZero) && i-1 > c.MaxPathLen {
			return refuse(ReasonChain, "certificate %d (%s) allows %d CAs below it, the chain has %d", i, c.Subject.CommonName, c.MaxPathLen, i-1)
		}
		if err := signedBy(chain[i-1], c); err != nil {
			return refuse(ReasonChain, "certificate %d (%s) is not signed by certificate %d (%s): %v", i-1, chain[i-1].Subject.CommonName, i, c.Subject.CommonName, err)
		}
	}
	last := chain[len(chain)-1]
	for _, r := range roots {
		if bytes.Equal(last.Raw, r.Raw) {
			return nil
		}
	}
	for _, r := range roots {
		if signedBy(last, r) == nil {
			return v.cert("NVIDIA root", r)
		}
	}
	return refuse(ReasonChain, "the GPU chain ends in %q (SHA-256 %x), which is not a trusted root and is signed by none", last.Subject.String(), sha256.Sum256(last.Raw))
}

// signedBy checks c's issuer name and signature against parent. A link
// that verified once is remembered (linkCache): every H100's chain shares
// NVIDIA's upper links, and a GPU attests again with the same chain.
func signedBy(c, parent *x509.Certificate) error {
	if !bytes.Equal(c.RawIssuer, parent.RawSubject) {
		return fmt.Errorf("issuer %q is not %q", c.Issuer.String(), parent.Subject.String())
	}
	h := sha256.New()
	h.Write(parent.Raw)
	h.Write(c.Raw)
	var k [32]byte
	h.Sum(k[:0])
	if links.has(k) {
		return nil
	}
	if err := c.CheckSignatureFrom(parent); err != nil {
		return err
	}
	links.add(k)
	return nil
}

// linkCache remembers certificate links (SHA-256 of parent and child DER)
// whose signature verified. It holds only successes of a pure check, so
// it changes how long Verify takes, never its answer; it is bounded
// (emptied when full).
type linkCache struct {
	mu sync.Mutex
	m  map[[32]byte]struct{}
}

const maxCachedLinks = 4096

var links linkCache

func (l *linkCache) has(k [32]byte) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.m[k]
	return ok
}

func (l *linkCache) add(k [32]byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil || len(l.m) >= maxCachedLinks {
		l.m = make(map[[32]byte]struct{})
	}
	l.m[k] = struct{}{}
}

func (l *linkCache) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m = nil
}

// akFWID returns the firmware ID of a Hopper AK certificate: the last 48
// bytes of its TCG DICE TcbInfo extension.
func akFWID(c *x509.Certificate) []byte {
	for _, e := range c.Extensions {
		if e.Id.Equal(tcgDICETcbInfo) && len(e.Value) >= 48 {
			return e.Value[len(e.Value)-48:]
		}
	}
	return nil
}

// nvidiaDeviceName returns the NVIDIA otherName of c's subject alternative
// name ("NVIDIA:GH100:…"), or "".
func nvidiaDeviceName(c *x509.Certificate) string {
	for _, e := range c.Extensions {
		if !e.Id.Equal(asn1.ObjectIdentifier{2, 5, 29, 17}) {
			continue
		}
		var names []asn1.RawValue
		if _, err := asn1.Unmarshal(e.Value, &names); err != nil {
			return ""
		}
		for _, n := range names {
			if n.Class != asn1.ClassContextSpecific || n.Tag != 0 {
				continue
			}
			var other struct {
				Type  asn1.ObjectIdentifier
				Value asn1.RawValue `asn1:"explicit,tag:0"`
			}
			if _, err := asn1.UnmarshalWithParams(n.FullBytes, &other, "tag:0"); err != nil || !other.Type.Equal(nvidiaSANOID) {
				continue
			}
			var s string
			if _, err := asn1.UnmarshalWithParams(other.Value.Bytes, &s, "utf8"); err == nil && len(s) <= 128 {
				return s
			}
		}
	}
	return ""
}

// GPUNonce is the SPDM nonce an agent asks its GPU to sign: the first 32
// bytes of ReportData(nonce, key).
func GPUNonce(nonce, key []byte) [32]byte {
	rd := ReportData(nonce, key)
	var out [32]byte
	copy(out[:], rd[:32])
	return out
}

// GPUBundle is the file format of NVIDIA GPU evidence for `gpunet attest
// verify`: JSON with the report in hex (as NVIDIA's tools print it) and
// the certificate chain in PEM. CCState is what NVML reported about the
// GPU's confidential-computing mode when the report was taken; the report
// does not sign it, so it is shown, never trusted.
type GPUBundle struct {
	Kind      Kind   `json:"kind"` // nvidia-gpu
	Report    string `json:"report"`
	CertChain string `json:"cert_chain"`
	// UUID is the GPU's UUID as NVML reports it (informative).
	UUID    string      `json:"uuid,omitempty"`
	CCState *GPUCCState `json:"cc_state,omitempty"`
}

// GPUCCState is NVML's nvmlSystemGetConfComputeState.
type GPUCCState struct {
	Environment  uint32 `json:"environment"`   // 0 unavailable, 1 simulated, 2 hardware
	CCFeature    uint32 `json:"cc_feature"`    // 0 off, 1 on
	DevToolsMode uint32 `json:"devtools_mode"` // 0 off, 1 on
}

// Mode is the state as one word: "on", "devtools" (on, with developer
// tools that let the host read the GPU's memory), or "off".
func (s GPUCCState) Mode() string {
	switch {
	case s.CCFeature == 1 && s.DevToolsMode == 1:
		return "devtools"
	case s.CCFeature == 1:
		return "on"
	}
	return "off"
}

// ParseGPUBundle decodes a GPU evidence bundle into Evidence.
func ParseGPUBundle(b []byte) (Evidence, *GPUBundle, error) {
	if len(b) > 2*MaxGPUReport+MaxGPUCertChain+4096 {
		return Evidence{}, nil, refuse(ReasonMalformed, "NVIDIA evidence bundle of %d bytes is too large", len(b))
	}
	var bun GPUBundle
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&bun); err != nil {
		return Evidence{}, nil, refuse(ReasonMalformed, "NVIDIA evidence bundle: %v (want {\"kind\":\"nvidia-gpu\",\"report\":HEX,\"cert_chain\":PEM})", err)
	}
	if bun.Kind != "" && bun.Kind != KindNVIDIAGPU {
		return Evidence{}, nil, refuse(ReasonMalformed, "NVIDIA evidence bundle of kind %q, want nvidia-gpu", bun.Kind)
	}
	raw, err := hex.DecodeString(strings.TrimSpace(bun.Report))
	if err != nil {
		return Evidence{}, nil, refuse(ReasonMalformed, "NVIDIA evidence bundle: report: %v (want hex)", err)
	}
	if bun.CertChain == "" {
		return Evidence{}, nil, refuse(ReasonCollateral, "NVIDIA evidence bundle has no cert_chain")
	}
	return Evidence{Kind: KindNVIDIAGPU, Raw: raw, Collateral: map[string][]byte{GPUCertChain: []byte(bun.CertChain)}}, &bun, nil
}

// MarshalGPUBundle writes ev (NVIDIA GPU evidence) as a bundle.
func MarshalGPUBundle(ev Evidence, uuid string, cc *GPUCCState) ([]byte, error) {
	if ev.Kind != KindNVIDIAGPU {
		return nil, fmt.Errorf("evidence of kind %s is not an NVIDIA GPU's", ev.Kind)
	}
	return json.MarshalIndent(GPUBundle{Kind: KindNVIDIAGPU, Report: hex.EncodeToString(ev.Raw), CertChain: string(ev.Collateral[GPUCertChain]), UUID: uuid, CCState: cc}, "", "  ")
}
