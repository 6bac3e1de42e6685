// Package attest verifies TEE evidence offline and deterministically: a raw
// Intel TDX quote (v4) or a raw AMD SEV-SNP attestation report, with the
// vendor collateral it needs (Intel PCS TCB info, QE identity and CRLs; AMD
// KDS VCEK, cert_chain and CRL) passed in as named byte blobs, the roots of
// trust, the minimum TCB levels and the verification instant passed in as
// Options. It uses the vendors' maintained Go verifiers,
// github.com/google/go-tdx-guest and github.com/google/go-sev-guest, with
// getters that serve only the given blobs: nothing is fetched, no clock is
// read, no randomness is used, so every validator that runs Verify on the
// same inputs gets the same answer (issue 31; docs/confidential.md).
//
// The evidence binds a chain nonce and the agent's job-encryption key
// through its 64-byte report data: ReportData(nonce, key) is
// SHA-512("gpunet-attest-v1" || len(nonce) || nonce || len(key) || key),
// lengths as 4-byte big-endian. The producer (Producer) asks the TEE for
// evidence over exactly those bytes; Verify recomputes them.
//
// NVIDIA GPU evidence (KindNVIDIAGPU, nvgpu.go) is verified by this
// package's own code, there being no maintained Go verifier for it: the
// SPDM GET_MEASUREMENTS report, its P-384 signature by the GPU's
// attestation key, and the key's certificate chain to NVIDIA's Device
// Identity CA. Its 32-byte SPDM nonce binds the first 32 bytes of
// ReportData(nonce, key).
package attest

import (
	"bytes"
	"crypto/sha512"
	"crypto/x509"
	"embed"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"
)

// Kind is the type of evidence.
type Kind string

// The kinds of evidence.
const (
	KindTDX       Kind = "tdx"
	KindSEVSNP    Kind = "sev-snp"
	KindNVIDIAGPU Kind = "nvidia-gpu"
)

// Kinds lists the kinds in a fixed order.
var Kinds = []Kind{KindTDX, KindSEVSNP, KindNVIDIAGPU}

// ParseKind parses a kind's name ("tdx", "sev-snp" or "snp", "nvidia-gpu").
func ParseKind(s string) (Kind, error) {
	switch strings.ToLower(s) {
	case "tdx":
		return KindTDX, nil
	case "sev-snp", "snp", "sevsnp":
		return KindSEVSNP, nil
	case "nvidia-gpu", "nvidia", "gpu":
		return KindNVIDIAGPU, nil
	}
	return "", fmt.Errorf("unknown evidence kind %q (want tdx, sev-snp or nvidia-gpu)", s)
}

// Collateral names: the files of a collateral directory, each the body of
// the vendor service's answer (issuer chains are the PCS answers'
// *-Issuer-Chain headers, URL-encoded as sent or as plain PEM).
const (
	// Intel PCS (TDX).
	TDXTCBInfo         = "tcb_info.json"                // GET /tdx/certification/v4/tcb?fmspc=…
	TDXTCBInfoChain    = "tcb_info_issuer_chain.pem"    // its TCB-Info-Issuer-Chain header
	TDXQEIdentity      = "qe_identity.json"             // GET /tdx/certification/v4/qe/identity
	TDXQEIdentityChain = "qe_identity_issuer_chain.pem" // its SGX-Enclave-Identity-Issuer-Chain header
	TDXPCKCRL          = "pck_crl.der"                  // GET /sgx/certification/v4/pckcrl?ca=platform|processor&encoding=der
	TDXPCKCRLChain     = "pck_crl_issuer_chain.pem"     // its SGX-PCK-CRL-Issuer-Chain header
	TDXRootCACRL       = "root_ca_crl.der"              // the Intel SGX Root CA's CRL distribution point
	// AMD KDS (SEV-SNP).
	SNPVCEK      = "vcek.der"       // GET /vcek/v1/{product}/{hwid}?blSPL=…&teeSPL=…&snpSPL=…&ucodeSPL=…
	SNPCertChain = "cert_chain.pem" // GET /vcek/v1/{product}/cert_chain: ASK then ARK
	SNPCRL       = "crl.der"        // GET /vcek/v1/{product}/crl
)

// CollateralNames returns the collateral names a kind takes, in a fixed
// order.
func CollateralNames(k Kind) []string {
	switch k {
	case KindTDX:
		return []string{TDXTCBInfo, TDXTCBInfoChain, TDXQEIdentity, TDXQEIdentityChain, TDXPCKCRL, TDXPCKCRLChain, TDXRootCACRL}
	case KindSEVSNP:
		return []string{SNPVCEK, SNPCertChain, SNPCRL}
	case KindNVIDIAGPU:
		return []string{GPUCertChain}
	}
	return nil
}

// Evidence is one piece of evidence and the vendor collateral that
// verifies it.
type Evidence struct {
	Kind Kind
	// Raw is the evidence as the TEE produced it: a TDX quote, an SNP
	// attestation report (without the certificate table), an NVIDIA GPU's
	// SPDM GET_MEASUREMENTS request and response.
	Raw []byte
	// Collateral maps a collateral name (CollateralNames) to its bytes.
	// Verify only looks names up; it never iterates the map.
	Collateral map[string][]byte
}

// MinTCB is the minimum TCB a kind's evidence must show. Zero fields
// require nothing.
type MinTCB struct {
	// TDX: Intel's TCB evaluation data number that both the TCB info and
	// the QE identity must carry at least (older collateral is stale:
	// it may call UpToDate a TCB that Intel has since called OutOfDate),
	// and the TD's TEE_TCB_SVN, component by component.
	TCBEvaluationDataNumber int
	TEETCBSVN               [16]byte
	// SEV-SNP: the report's REPORTED_TCB security patch levels.
	BootloaderSPL, TEESPL, SNPSPL, MicrocodeSPL uint8
}

// Options are the inputs of Verify besides the evidence. The zero value
// of each boolean is the strict choice.
type Options struct {
	// Now is the instant the evidence and its collateral must be valid at
	// (the block time, on the ledger). Required: Verify reads no clock.
	Now time.Time
	// Nonce and Key are what the report data must bind (ReportData).
	Nonce []byte
	Key   []byte
	// SkipBinding verifies the evidence without checking its report data
	// (the CLI without --nonce); the ledger never sets it.
	SkipBinding bool
	// TrustedRoots are the vendors' root certificates, each a DER
	// certificate or a PEM bundle: the Intel SGX Root CA for TDX, the AMD
	// ARK of each product line for SEV-SNP, NVIDIA's Device Identity CA
	// for GPUs. DefaultRoots returns the published ones.
	TrustedRoots [][]byte
	// MinTCB is the minimum TCB per kind.
	MinTCB map[Kind]MinTCB
	// AllowMissingCRL accepts SEV-SNP evidence whose collateral has no
	// crl.der (revocation then is not checked, and Claims says so). TDX
	// collateral always needs both CRLs.
	AllowMissingCRL bool
	// AllowDebug accepts evidence from a debuggable guest (SNP policy
	// DEBUG, TDX TD_ATTRIBUTES.DEBUG), whose memory the host can read.
	AllowDebug bool
}

// Measurement is one named measurement register.
type Measurement struct {
	Name string `json:"name"`
	Hex  string `json:"hex"`
}

// Claims are what verified evidence proves.
type Claims struct {
	Vendor string `json:"vendor"` // Intel, AMD, NVIDIA
	Kind   Kind   `json:"kind"`
	TEE    string `json:"tee"` // TDX, SEV-SNP, GPU confidential computing
	// Measurements: TDX MRTD, RTMR0-3; SNP MEASUREMENT, HOST_DATA;
	// NVIDIA GPU MEASUREMENTS, SHA-384 of the signed measurement record.
	Measurements []Measurement `json:"measurements"`
	// TCBStatus is Intel's status of the platform's TCB level (the
	// library accepts UpToDate only) for TDX; for SNP, that the reported
	// TCB meets the minimum.
	TCBStatus string `json:"tcb_status"`
	// TCB is the TCB level in words.
	TCB        string `json:"tcb"`
	ReportData string `json:"report_data"`
	// Bound: the report data is ReportData(Nonce, Key) of the options.
	Bound bool `json:"bound"`
	// BindingChecked is false when SkipBinding was set.
	BindingChecked bool   `json:"binding_checked"`
	Nonce          string `json:"nonce,omitempty"`
	Key            string `json:"key,omitempty"`
	// Platform names the platform family (TDX: FMSPC; SNP: product; GPU:
	// the DeviceID certificate's model); ChipID the chip (TDX: the PCK
	// certificate's PPID; SNP: CHIP_ID; GPU: GPUClaims.ID).
	Platform string `json:"platform"`
	ChipID   string `json:"chip_id"`
	Debug    bool   `json:"debug"`
	// RevocationChecked: the vendor CRLs were checked.
	RevocationChecked bool `json:"revocation_checked"`
	// Expiry is the earliest NotAfter / nextUpdate of the certificates
	// and collateral used: the evidence verifies until then at most.
	Expiry time.Time `json:"expiry"`
	// GPU is what NVIDIA GPU evidence proves besides (nil for CPU TEEs).
	GPU *GPUClaims `json:"gpu,omitempty"`
}

// Reason is why evidence was refused, one word for callers to switch on.
type Reason string

// The reasons.
const (
	ReasonOptions     Reason = "options"     // the options are unusable (no Now, no roots)
	ReasonMalformed   Reason = "malformed"   // the evidence does not decode
	ReasonUnsupported Reason = "unsupported" // a kind or format not verified
	ReasonCollateral  Reason = "collateral"  // collateral missing, unexpected or undecodable
	ReasonSignature   Reason = "signature"   // a signature does not verify (a flipped bit)
	ReasonChain       Reason = "chain"       // a certificate chain does not reach a trusted root
	ReasonRevoked     Reason = "revoked"     // a certificate is on its issuer's CRL
	ReasonExpired     Reason = "expired"     // a certificate or collateral is not valid at Now
	ReasonTCB         Reason = "tcb"         // TCB out of date or below the minimum
	ReasonPlatform    Reason = "platform"    // collateral of another platform
	ReasonPolicy      Reason = "policy"      // a debuggable guest
	ReasonBinding     Reason = "binding"     // report data does not bind this nonce and key
)

// Error is a refusal: its Reason and what exactly failed.
type Error struct {
	Reason Reason
	Msg    string
}

func (e *Error) Error() string { return string(e.Reason) + ": " + e.Msg }

func refuse(r Reason, format string, a ...any) *Error {
	return &Error{Reason: r, Msg: fmt.Sprintf(format, a...)}
}

// ReasonOf returns err's Reason, or "" when err is not an *Error.
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// bindingDomain separates gpunet's report data from any other use.
const bindingDomain = "gpunet-attest-v1"

// ReportData is the 64-byte report data that binds nonce and key:
// SHA-512("gpunet-attest-v1" || u32be(len(nonce)) || nonce || u32be(len(key)) || key).
// The producer asks the TEE for evidence over it; Verify checks it.
func ReportData(nonce, key []byte) [64]byte {
	h := sha512.New()
	h.Write([]byte(bindingDomain))
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(nonce)))
	h.Write(n[:])
	h.Write(nonce)
	binary.BigEndian.PutUint32(n[:], uint32(len(key)))
	h.Write(n[:])
	h.Write(key)
	var out [64]byte
	h.Sum(out[:0])
	return out
}

// MaxEvidence bounds Raw and each collateral blob: a quote with its
// certificate chain is ~5 KiB, TCB info ~10 KiB, a PCK CRL grows with
// revocations.
const MaxEvidence = 1 << 20

// Verify verifies ev at opts.Now against opts.TrustedRoots, with only the
// collateral in ev, and returns what it proves, or an *Error.
func Verify(ev Evidence, opts Options) (*Claims, error) {
	if opts.Now.IsZero() {
		return nil, refuse(ReasonOptions, "no verification instant (Options.Now): Verify reads no clock")
	}
	if len(ev.Raw) == 0 {
		return nil, refuse(ReasonMalformed, "empty evidence")
	}
	if len(ev.Raw) > MaxEvidence {
		return nil, refuse(ReasonMalformed, "evidence of %d bytes (at most %d)", len(ev.Raw), MaxEvidence)
	}
	if !opts.SkipBinding && len(opts.Nonce) == 0 {
		return nil, refuse(ReasonOptions, "no nonce to check the report data against (set Options.Nonce, or SkipBinding)")
	}
	if err := checkCollateralNames(ev); err != nil {
		return nil, err
	}
	roots, err := parseRoots(opts.TrustedRoots)
	if err != nil {
		return nil, err
	}
	var c *Claims
	var reportData []byte
	switch ev.Kind {
	case KindTDX:
		c, reportData, err = verifyTDX(ev, opts, roots)
	case KindSEVSNP:
		c, reportData, err = verifySNP(ev, opts, roots)
	case KindNVIDIAGPU:
		c, reportData, err = verifyNVGPU(ev, opts, roots)
	default:
		return nil, refuse(ReasonUnsupported, "unknown evidence kind %q", ev.Kind)
	}
	if err != nil {
		return nil, err
	}
	c.Kind = ev.Kind
	c.ReportData = fmt.Sprintf("%x", reportData)
	if !opts.SkipBinding {
		c.BindingChecked = true
		want := ReportData(opts.Nonce, opts.Key)
		if ev.Kind == KindNVIDIAGPU {
			// The SPDM nonce holds 32 bytes: the first half (GPUNonce).
			want := GPUNonce(opts.Nonce, opts.Key)
			if !bytes.Equal(reportData, want[:]) {
				return nil, refuse(ReasonBinding, "the GPU report's SPDM nonce %x does not bind nonce %x and key %x (want %x): evidence made for another nonce or key, or replayed", reportData, opts.Nonce, opts.Key, want)
			}
		} else if !bytes.Equal(reportData, want[:]) {
			return nil, refuse(ReasonBinding, "report data %x does not bind nonce %x and key %x (want %x): evidence made for another nonce or key, or replayed", reportData, opts.Nonce, opts.Key, want)
		}
		c.Nonce = fmt.Sprintf("%x", opts.Nonce)
		c.Key = fmt.Sprintf("%x", opts.Key)
		c.Bound = true
	}
	return c, nil
}

func checkCollateralNames(ev Evidence) error {
	// Sorted so that the first unexpected name is the same on every run.
	names := make([]string, 0, len(ev.Collateral))
	for n := range ev.Collateral {
		names = append(names, n)
	}
	slices.Sort(names)
	known := CollateralNames(ev.Kind)
	for _, n := range names {
		if !slices.Contains(known, n) {
			return refuse(ReasonCollateral, "unexpected collateral %q for %s evidence (it takes %s)", n, ev.Kind, strings.Join(known, ", "))
		}
		if len(ev.Collateral[n]) > MaxEvidence {
			return refuse(ReasonCollateral, "collateral %q of %d bytes (at most %d)", n, len(ev.Collateral[n]), MaxEvidence)
		}
	}
	return nil
}

// needBlob returns the named collateral or a refusal naming it.
func needBlob(ev Evidence, name, what string) ([]byte, error) {
	b := ev.Collateral[name]
	if len(b) == 0 {
		return nil, refuse(ReasonCollateral, "missing %s (%s) for %s evidence", name, what, ev.Kind)
	}
	return b, nil
}

// parseRoots parses each trusted root: DER, or PEM with one or more
// certificates.
func parseRoots(in [][]byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for i, b := range in {
		certs, err := parseCerts(b)
		if err != nil {
			return nil, refuse(ReasonOptions, "trusted root %d: %v", i, err)
		}
		out = append(out, certs...)
	}
	if len(out) == 0 {
		return nil, refuse(ReasonOptions, "no trusted roots (Options.TrustedRoots; DefaultRoots has the vendors')")
	}
	return out, nil
}

// parseCerts parses a DER certificate or PEM CERTIFICATE blocks (nothing
// else may follow them but whitespace and NULs).
func parseCerts(b []byte) ([]*x509.Certificate, error) {
	if !bytes.Contains(b, []byte("-----BEGIN")) {
		c, err := x509.ParseCertificate(b)
		if err != nil {
			return nil, err
		}
		return []*x509.Certificate{c}, nil
	}
	var out []*x509.Certificate
	rest := b
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %q, want CERTIFICATE", blk.Type)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(bytes.Trim(rest, " \t\r\n\x00")) != 0 {
		return nil, fmt.Errorf("%d bytes after the last PEM certificate", len(rest))
	}
	if len(out) == 0 {
		return nil, errors.New("no certificate")
	}
	return out, nil
}

// parseCRL parses a DER or PEM CRL.
func parseCRL(b []byte) (*x509.RevocationList, error) {
	if blk, _ := pem.Decode(b); blk != nil {
		b = blk.Bytes
	}
	return x509.ParseRevocationList(b)
}

//go:embed roots/*.pem
var rootFiles embed.FS

// DefaultRoots returns the vendors' published roots of trust, as the
// libraries embed them: the Intel SGX Root CA, and the AMD ARKs of Milan,
// Genoa and Turin; and NVIDIA's Device Identity CA, as NVIDIA's verifier
// (nvtrust) ships it. The ledger's parameters start from these.
func DefaultRoots() [][]byte {
	names, _ := fs.Glob(rootFiles, "roots/*.pem") // sorted
	var out [][]byte
	for _, n := range names {
		b, _ := rootFiles.ReadFile(n)
		out = append(out, b)
	}
	return out
}

// validity tracks the earliest expiry of what verified evidence rests on,
// and refuses what is not valid at now.
type validity struct {
	now    time.Time
	expiry time.Time
}

// window checks notBefore <= now <= notAfter for what and keeps the
// earliest notAfter.
func (v *validity) window(what string, notBefore, notAfter time.Time) error {
	if v.expiry.IsZero() || notAfter.Before(v.expiry) {
		v.expiry = notAfter
	}
	if v.now.Before(notBefore) {
		return refuse(ReasonExpired, "%s is not valid until %s (verifying at %s)", what, notBefore.UTC().Format(time.RFC3339), v.now.UTC().Format(time.RFC3339))
	}
	if v.now.After(notAfter) {
		return refuse(ReasonExpired, "%s expired at %s (verifying at %s)", what, notAfter.UTC().Format(time.RFC3339), v.now.UTC().Format(time.RFC3339))
	}
	return nil
}

func (v *validity) cert(what string, c *x509.Certificate) error {
	return v.window(what+" certificate ("+c.Subject.CommonName+")", c.NotBefore, c.NotAfter)
}

func (v *validity) crl(what string, c *x509.RevocationList) error {
	if c.NextUpdate.IsZero() {
		return refuse(ReasonCollateral, "%s has no nextUpdate", what)
	}
	return v.window(what, c.ThisUpdate, c.NextUpdate)
}

// classify turns a library's error into a refusal; the libraries return
// plain strings, so this reads their words. Verify runs its own checks for
// the reasons tests pin (expiry, platform, TCB minimum, binding) before it
// calls a library, so this is the second line.
func classify(lib string, err error) *Error {
	msg := err.Error()
	l := strings.ToLower(msg)
	r := ReasonSignature
	switch {
	case strings.Contains(l, "revoked"):
		r = ReasonRevoked
	case strings.Contains(l, "expired") || strings.Contains(l, "not yet valid"):
		r = ReasonExpired
	case strings.Contains(l, "tcb status") || strings.Contains(l, "tcb level") || strings.Contains(l, "outofdate"):
		r = ReasonTCB
	case strings.Contains(l, "fmspc") || strings.Contains(l, "pceid") || strings.Contains(l, "product name") || strings.Contains(l, "stepping"):
		r = ReasonPlatform
	case strings.Contains(l, "unknown authority") || strings.Contains(l, "trusted roots") || strings.Contains(l, "pck certificate:") ||
		strings.Contains(l, "unable to validate") || strings.Contains(l, "signing certificate"):
		r = ReasonChain
	case strings.Contains(l, "missing") || strings.Contains(l, "collateral"):
		r = ReasonCollateral
	}
	return refuse(r, "%s: %s", lib, msg)
}

// DetectKind tells the kind of raw evidence from its shape: a TDX quote
// starts with version 4 and TEE type 0x81; an SNP report is 1184 bytes
// of version 2 or later; an NVIDIA evidence bundle is JSON.
func DetectKind(raw []byte) (Kind, error) {
	switch {
	case len(raw) >= 8 && binary.LittleEndian.Uint16(raw[0:2]) == 4 && binary.LittleEndian.Uint32(raw[4:8]) == 0x81:
		return KindTDX, nil
	case len(raw) == 0x4a0 && binary.LittleEndian.Uint32(raw[0:4]) >= 2 && binary.LittleEndian.Uint32(raw[0:4]) < 16:
		return KindSEVSNP, nil
	case len(bytes.TrimSpace(raw)) > 0 && (bytes.TrimSpace(raw)[0] == '{' || bytes.TrimSpace(raw)[0] == '['):
		return KindNVIDIAGPU, nil
	}
	return "", refuse(ReasonMalformed, "evidence of %d bytes is neither a TDX quote (v4), an SEV-SNP report (1184 bytes) nor an NVIDIA evidence bundle (JSON); name its kind with --kind", len(raw))
}
