package ledger

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpunet/gpunet/internal/address"
)

// The TEE trust tier (issue 31, docs/confidential.md): a provider proves
// with TEE evidence (an Intel TDX quote, an AMD SEV-SNP report) that its
// job-encryption key lives in a measured confidential guest; jobs with
// trust: tee are placed only on providers whose attestation is valid, and
// their key is granted only to the attested key.
//
// The ledger verifies evidence offline and deterministically, but cannot
// itself parse quotes or X.509 (it depends on the standard library only,
// and verification belongs to internal/attest): the adapter that builds a
// node's Ledger sets Ledger.Attest to attest.Verify, as it sets Verify for
// signatures. Everything verification reads travels in the tx or is in
// state: the evidence, the vendor collateral, the root certificates (whose
// SHA-256 the chain trusts, AttestRoots), the nonce (a per-provider seed
// recorded by MsgRequestAttestation) and the block time.

// The TEE messages' types (70 and up: 60-63 are delegation's).
const (
	MsgTypeRequestAttestation MsgType = 70
	MsgTypeAttest             MsgType = 71
)

// TEE kinds a MsgAttest may carry (attest.Kind's names): a CPU TEE's, or
// TEEKindNVIDIAGPU for a message with GPU evidence only (tee_gpu.go).
const (
	TEEKindTDX    = "tdx"
	TEEKindSEVSNP = "sev-snp"
)

// TrustTEE is JobSpec.Trust for jobs that run only on attested providers.
const TrustTEE = "tee"

// Limits of a MsgAttest: what one piece of evidence and its collateral
// take (docs/ledger.md, TEE attestation). Real TDX collateral is ~20 KiB
// (TCB info ~10 KiB, PCK CRL a few KiB, chains ~2 KiB each), a quote
// ~5 KiB; an SNP report 1184 bytes and its VCEK, cert_chain and CRL
// ~8 KiB: all well under params.max_tx_bytes (256 KiB).
const (
	maxAttestEvidence   = 64 << 10
	maxAttestBlob       = 64 << 10
	maxAttestCollateral = 12
	maxAttestRoots      = 8
	maxAttestRootBytes  = 8 << 10
	maxMeasurements     = 16
	maxMeasurementHex   = 128 // a 64-byte register in hex
)

// DefaultAttestRoots are the SHA-256 of the DER of the vendors' roots of
// trust attest.DefaultRoots embeds: the AMD ARKs of Genoa, Milan and
// Turin, the Intel SGX Root CA, and NVIDIA's Device Identity CA (abciapp's
// test checks they agree). A genesis's attest_roots replaces them.
var DefaultAttestRoots = []string{
	"4c6598d19c18719c5dfd4a7d335f674e5bfe1d8f800cea2cf270c10d103db2f1",
	"69d063b45344d26a2e94e1f4210de49ef555308287d4c174445c95639a540bcd",
	"1f084161a44bb6d93778a904877d4819cafa5d05ef4193b2ded9dd9c73dd3f6a",
	"44a0196b2b99f889b8e149e95b807a350e7424964399e885a7cbb8ccfab674d3",
	"102bf659d5419614c9d8e6aecebc80454eb26b1df6a769ac720b9a690b167b48",
}

// AttestRequest is what the verifier is asked: the evidence and its
// collateral as the tx carries them, the trusted roots it carries (only
// those whose hash the chain trusts), and what the chain binds and
// requires.
type AttestRequest struct {
	Kind string
	Raw  []byte
	// Collateral maps a collateral name to its bytes; a verifier must not
	// iterate it in an order that matters.
	Collateral map[string][]byte
	Roots      [][]byte // DER certificates
	Now        time.Time
	Nonce, Key []byte
	// TDXMinTCBEval and SNPMinTCB are the minimum TCB levels
	// (params.attest_tdx_min_tcb_eval, attest_snp_min_tcb).
	TDXMinTCBEval uint64
	SNPMinTCB     uint64
}

// AttestClaims is what verified evidence proves, as the ledger records
// it.
type AttestClaims struct {
	// Measurement is the guest's launch measurement in hex: the TD's MRTD
	// (TDX), the report's MEASUREMENT (SEV-SNP).
	Measurement string
	// TCBStatus is the platform's TCB status in the vendor's word
	// ("UpToDate").
	TCBStatus string
	// Expiry is the earliest expiry of the certificates and collateral
	// the evidence rests on.
	Expiry time.Time
	// GPUID is an NVIDIA GPU's attested identity (its DeviceID
	// certificate's serial, upper-case hex); GPUMode its multi-GPU mode
	// where the evidence shows one (SPT, MPT, PPCIE). Empty for CPU TEEs.
	GPUID, GPUMode string
}

// AttestVerifier verifies TEE evidence offline: its answer must depend on
// the request only (no clock, no network, no randomness), the same on
// every node. abciapp sets attest.Verify.
type AttestVerifier func(AttestRequest) (AttestClaims, error)

// Attestation is a provider's TEE record (Provider.TEE): its pending nonce
// and what its last accepted evidence proved.
type Attestation struct {
	// Nonce is the challenge MsgRequestAttestation recorded at
	// NonceHeight; evidence must bind it within params.attest_nonce_blocks.
	// It is cleared when evidence over it is accepted, so that evidence
	// is never accepted twice.
	Nonce       *Hash  `json:"nonce,omitempty"`
	NonceHeight uint64 `json:"nonce_height,omitempty"`
	// Kind is the TEE (TEEKindTDX, TEEKindSEVSNP); "" before the first
	// accepted evidence.
	Kind        string `json:"kind,omitempty"`
	Measurement string `json:"measurement,omitempty"`
	TCBStatus   string `json:"tcb_status,omitempty"`
	// Key is the encryption key the evidence bound: job keys go only to
	// a provider whose EncryptionKey still is this one.
	Key string `json:"key,omitempty"`
	// Height and Expiry (unix seconds): when the evidence was accepted,
	// and until when it counts (the collateral's earliest expiry, capped
	// at params.attest_max_validity after Height's block time).
	Height uint64 `json:"height,omitempty"`
	Expiry int64  `json:"expiry,omitempty"`
	// Lapsed is set by the sweep of the first block at or after Expiry
	// (market_tee.go): the provider's units left the TEE market and its
	// trust: tee service replicas were replaced.
	Lapsed bool `json:"lapsed,omitempty" rec:"since=8"`
	// GPUs are the provider's GPUs whose NVIDIA evidence the chain
	// verified (tee_gpu.go); held while it is online.
	GPUs []AttestedGPU `json:"gpus,omitempty" rec:"since=8"`
}

// AttestedAt reports whether p's attestation is valid at unix time now:
// accepted, unexpired, and over the encryption key p declares now.
func (p *Provider) AttestedAt(now int64) bool {
	a := p.TEE
	return a != nil && a.Kind != "" && !a.Lapsed && now < a.Expiry && a.Key == p.EncryptionKey
}

// MsgRequestAttestation asks the chain for an attestation nonce: the
// ledger records one derived from the block's seed, valid for
// params.attest_nonce_blocks blocks.
type MsgRequestAttestation struct{}

// AttestBlob is one named piece of collateral.
type AttestBlob struct {
	Name string `json:"name"`
	Data []byte `json:"data"`
}

// MsgAttest carries TEE evidence over the sender's pending nonce and its
// EncryptionKey (ReportData in internal/attest), the vendor collateral
// that verifies it, and the root certificates its chains end in.
type MsgAttest struct {
	Kind     string `json:"kind"`
	Evidence []byte `json:"evidence"`
	// Collateral is in strictly increasing name order.
	Collateral []AttestBlob `json:"collateral"`
	// Roots are DER certificates; those whose SHA-256 the chain trusts
	// are passed to the verifier, the others left out.
	Roots [][]byte `json:"roots"`
	// GPUs are NVIDIA GPUs' evidence over the same nonce and key
	// (tee_gpu.go): with a CPU TEE's evidence, or alone (Kind
	// nvidia-gpu, no Evidence).
	GPUs []AttestGPU `json:"gpus,omitempty"`
}

// Type implements Msg.
func (*MsgRequestAttestation) Type() MsgType { return MsgTypeRequestAttestation }

// Type implements Msg.
func (*MsgAttest) Type() MsgType { return MsgTypeAttest }

// ValidateBasic implements Msg.
func (*MsgRequestAttestation) ValidateBasic() error { return nil }

// ValidateBasic implements Msg.
func (m *MsgAttest) ValidateBasic() error {
	switch m.Kind {
	case TEEKindTDX, TEEKindSEVSNP:
		if len(m.Evidence) == 0 || len(m.Evidence) > maxAttestEvidence {
			return invalid("evidence of %d bytes: want 1 to %d", len(m.Evidence), maxAttestEvidence)
		}
	case TEEKindNVIDIAGPU:
		if len(m.Evidence) > 0 || len(m.Collateral) > 0 || len(m.GPUs) == 0 {
			return invalid("kind nvidia-gpu carries GPU evidence only: gpus, and no evidence or collateral (a CPU TEE's evidence goes under its own kind, with gpus beside it)")
		}
	default:
		return invalid("kind %q: want tdx, sev-snp or nvidia-gpu", m.Kind)
	}
	if err := checkAttestGPUs(m.GPUs); err != nil {
		return err
	}
	if len(m.Collateral) > maxAttestCollateral {
		return invalid("%d collateral blobs, at most %d", len(m.Collateral), maxAttestCollateral)
	}
	for i, c := range m.Collateral {
		if c.Name == "" || len(c.Name) > 64 || strings.ContainsAny(c.Name, "/\\\x00") {
			return invalid("collateral[%d].name %q: want a file name of 1 to 64 bytes", i, c.Name)
		}
		if i > 0 && c.Name <= m.Collateral[i-1].Name {
			return invalid("collateral[%d].name %q: names must be in increasing order, each once", i, c.Name)
		}
		if len(c.Data) == 0 || len(c.Data) > maxAttestBlob {
			return invalid("collateral %q of %d bytes: want 1 to %d", c.Name, len(c.Data), maxAttestBlob)
		}
	}
	if len(m.Roots) == 0 || len(m.Roots) > maxAttestRoots {
		return invalid("%d roots: want 1 to %d DER certificates", len(m.Roots), maxAttestRoots)
	}
	for i, r := range m.Roots {
		if len(r) == 0 || len(r) > maxAttestRootBytes {
			return invalid("roots[%d] of %d bytes: want a DER certificate of 1 to %d", i, len(r), maxAttestRootBytes)
		}
	}
	return nil
}

// AttestNonce is the nonce MsgRequestAttestation records for provider in
// the block of height and seed.
func AttestNonce(seed Hash, provider address.Address, height uint64) Hash {
	h := sha256.New()
	h.Write([]byte("gpunet-attest-nonce-v1"))
	h.Write(seed[:])
	h.Write(provider[:])
	h.Write(binary.BigEndian.AppendUint64(nil, height))
	var out Hash
	h.Sum(out[:0])
	return out
}

func execRequestAttestation(o *Overlay, from address.Address, info BlockInfo) ([]Event, error) {
	p, err := mustProvider(o, from)
	if err != nil {
		return nil, err
	}
	a := Attestation{}
	if p.TEE != nil {
		a = *p.TEE
	}
	n := AttestNonce(info.Seed, from, uint64(info.Height))
	a.Nonce, a.NonceHeight = &n, uint64(info.Height)
	p.TEE = &a
	setProvider(o, p)
	return []Event{{Type: "attest_nonce", Attrs: []Attr{
		{"provider", from.String()}, {"nonce", hex.EncodeToString(n[:])}, {"height", fmt.Sprint(info.Height)},
	}}}, nil
}

func (l *Ledger) execAttest(o *Overlay, from address.Address, m *MsgAttest, params Params, info BlockInfo) ([]Event, error) {
	p, err := mustProvider(o, from)
	if err != nil {
		return nil, err
	}
	if p.TEE == nil || p.TEE.Nonce == nil {
		return nil, fmt.Errorf("%s has no attestation nonce (send request_attestation first, then evidence over its nonce): %w", from, ErrAttestation)
	}
	if h := uint64(info.Height); h > p.TEE.NonceHeight+params.AttestNonceBlocks {
		return nil, fmt.Errorf("attestation nonce of height %d is stale at height %d (valid for params.attest_nonce_blocks = %d blocks): request a new one: %w", p.TEE.NonceHeight, h, params.AttestNonceBlocks, ErrAttestation)
	}
	if p.EncryptionKey == "" {
		return nil, fmt.Errorf("%s declares no encryption key for the evidence to bind: %w", from, ErrAttestation)
	}
	trusted := GetAttestRoots(o)
	roots := make([][]byte, 0, len(m.Roots))
	for _, r := range m.Roots {
		// Roots the chain does not trust are left out: evidence that
		// chains only to them fails the verifier's chain check.
		if sum := sha256.Sum256(r); slices.Contains(trusted, hex.EncodeToString(sum[:])) {
			roots = append(roots, r)
		}
	}
	if len(roots) == 0 {
		return nil, fmt.Errorf("none of the %d roots is a root of trust of this chain (attest_roots: the SHA-256 of the roots' DER): %w", len(m.Roots), ErrAttestation)
	}
	if info.Time.IsZero() {
		// CheckTx: without the block's time the evidence cannot be
		// verified; the block that holds the tx verifies it.
		return nil, nil
	}
	if l.Attest == nil {
		return nil, fmt.Errorf("this node has no attestation verifier (Ledger.Attest): %w", ErrAttestation)
	}
	nonce := *p.TEE.Nonce
	a := *p.TEE
	a.Nonce, a.NonceHeight = nil, 0
	var events []Event
	if m.Kind != TEEKindNVIDIAGPU {
		coll := make(map[string][]byte, len(m.Collateral))
		for _, c := range m.Collateral {
			coll[c.Name] = c.Data
		}
		claims, err := l.Attest(AttestRequest{
			Kind: m.Kind, Raw: m.Evidence, Collateral: coll, Roots: roots, Now: info.Time,
			Nonce: nonce[:], Key: []byte(p.EncryptionKey),
			TDXMinTCBEval: params.AttestTDXMinTCBEval, SNPMinTCB: params.AttestSNPMinTCB,
		})
		if err != nil {
			return nil, fmt.Errorf("%s evidence refused: %w: %w", m.Kind, err, ErrAttestation)
		}
		if len(claims.Measurement) == 0 || len(claims.Measurement) > maxMeasurementHex || len(claims.TCBStatus) > maxTextLength {
			return nil, fmt.Errorf("verifier's claims out of bounds (measurement of %d characters): %w", len(claims.Measurement), ErrInternal)
		}
		a.Kind, a.Measurement, a.TCBStatus = m.Kind, strings.ToLower(claims.Measurement), claims.TCBStatus
		a.Key, a.Height, a.Expiry = p.EncryptionKey, uint64(info.Height), capExpiry(claims.Expiry, params, info)
		a.Lapsed = false // fresh evidence: counts again until its own expiry (market_tee.go)
		events = append(events, Event{Type: "attested", Attrs: []Attr{
			{"provider", from.String()}, {"kind", m.Kind}, {"measurement", a.Measurement},
			{"expiry", fmt.Sprint(a.Expiry)},
		}})
	}
	if len(m.GPUs) > 0 {
		gpus, evs, err := l.attestGPUs(o, p, m.GPUs, roots, nonce[:], params, info)
		if err != nil {
			return nil, err
		}
		a.GPUs = gpus
		events = append(events, evs...)
		// Taking a squatter offline may have moved p in the online
		// index: write p as it is stored now.
		if p, err = mustProvider(o, from); err != nil {
			return nil, err
		}
	}
	p.TEE = &a
	setProvider(o, p)
	return events, nil
}

// capExpiry is an attestation's expiry: the evidence's, at most
// params.attest_max_validity after the block.
func capExpiry(t time.Time, params Params, info BlockInfo) int64 {
	expiry := t.Unix()
	if limit := info.Time.Unix() + int64(params.AttestMaxValidity); expiry > limit {
		expiry = limit
	}
	return expiry
}

// GetAttestRoots returns the hex SHA-256 of the DER root certificates the
// chain trusts: its genesis's attest_roots, or DefaultAttestRoots.
func GetAttestRoots(kv KV) []string {
	b := kv.Get(keyAttestRoots)
	if b == nil {
		return slices.Clone(DefaultAttestRoots)
	}
	var out []string
	if err := json.Unmarshal(b, &out); err != nil {
		panic(fmt.Sprintf("corrupt %s: %v", keyAttestRoots, err)) // the block fails and the node halts
	}
	return out
}

// maxAttestRootsTotal is the most roots of trust tee/roots holds.
const maxAttestRootsTotal = 64

// setAttestRoots writes the roots of trust (a passed attest_roots
// proposal), in the order given.
func setAttestRoots(o *Overlay, roots []string) {
	b, err := json.Marshal(roots)
	if err != nil {
		panic(err) // strings always marshal
	}
	o.Set(keyAttestRoots, b)
}

// isRootHash reports whether r is a root's hash as the chain keeps it: the
// SHA-256 of a DER certificate in 64 lower-case hex digits.
func isRootHash(r string) bool {
	b, err := hex.DecodeString(r)
	return err == nil && len(b) == sha256.Size && strings.ToLower(r) == r
}

// checkRootChange checks an attest_roots proposal's lists on their own:
// at least one root, each a root hash, none twice in either or both.
func checkRootChange(add, remove []string) error {
	if len(add)+len(remove) == 0 {
		return invalid("an attest_roots proposal adds or removes at least one root (add_roots, remove_roots)")
	}
	if len(add) > maxAttestRootsTotal || len(remove) > maxAttestRootsTotal {
		return invalid("an attest_roots proposal adds and removes at most %d roots each, not %d and %d", maxAttestRootsTotal, len(add), len(remove))
	}
	all := append(slices.Clone(add), remove...)
	for i, r := range all {
		name, at := "add_roots", i
		if i >= len(add) {
			name, at = "remove_roots", i-len(add)
		}
		if !isRootHash(r) {
			return invalid("%s[%d] %q: want the SHA-256 of a DER root certificate, 64 lower-case hex digits", name, at, r)
		}
		if slices.Contains(all[:i], r) {
			return invalid("%s[%d] %s is listed twice", name, at, r)
		}
	}
	return nil
}

// applyRootChange returns roots with remove taken out and add appended,
// or why it does not apply: a root to add that is trusted already, one to
// remove that is not, or more than maxAttestRootsTotal in the result.
func applyRootChange(roots, add, remove []string) ([]string, error) {
	for _, r := range remove {
		if !slices.Contains(roots, r) {
			return nil, fmt.Errorf("remove_roots: %s is not a root of trust of this chain", r)
		}
	}
	for _, r := range add {
		if slices.Contains(roots, r) {
			return nil, fmt.Errorf("add_roots: %s is a root of trust of this chain already", r)
		}
	}
	out := slices.DeleteFunc(slices.Clone(roots), func(r string) bool { return slices.Contains(remove, r) })
	out = append(out, add...)
	if len(out) > maxAttestRootsTotal {
		return nil, fmt.Errorf("the chain would trust %d roots, at most %d", len(out), maxAttestRootsTotal)
	}
	return out, nil
}

// checkAttestRoots checks a genesis's attest_roots: each 64 lower-case hex
// digits, once.
func checkAttestRoots(roots []string) error {
	if len(roots) > maxAttestRootsTotal {
		return fmt.Errorf("attest_roots lists %d roots, at most %d", len(roots), maxAttestRootsTotal)
	}
	for i, r := range roots {
		if !isRootHash(r) {
			return fmt.Errorf("attest_roots[%d] %q: want the SHA-256 of a DER root certificate, 64 lower-case hex digits", i, r)
		}
		if slices.Contains(roots[:i], r) {
			return fmt.Errorf("attest_roots[%d] %s is listed twice", i, r)
		}
	}
	return nil
}

// checkTrust checks a spec's trust tier and pinned measurements.
func (s *JobSpec) checkTrust() error {
	switch s.Trust {
	case "", TrustTEE:
	default:
		return invalid("trust %q: want tee, or nothing", s.Trust)
	}
	if len(s.TEEMeasurements) > 0 && s.Trust != TrustTEE {
		return invalid("tee_measurements need trust: tee")
	}
	if len(s.TEEMeasurements) > maxMeasurements {
		return invalid("tee_measurements lists %d, at most %d", len(s.TEEMeasurements), maxMeasurements)
	}
	for i, m := range s.TEEMeasurements {
		if b, err := hex.DecodeString(m); err != nil || len(b) == 0 || len(m) > maxMeasurementHex || strings.ToLower(m) != m {
			return invalid("tee_measurements[%d] %q: want lower-case hex of at most %d digits", i, m, maxMeasurementHex)
		}
	}
	return nil
}

// teeAdmits returns the placement filter of a trust: tee spec at unix
// time now (nil for other specs): a provider whose attestation is valid,
// over its current key, of one of the pinned measurements if any; and,
// for a spec that asks for GPUs, with at least that many GPUs whose NVIDIA
// evidence is valid at now and whose agent reported confidential
// computing on (tee_gpu.go): the job's data is decrypted in the guest and
// then lives in the GPUs' memory, which only CC mode keeps from the host.
func teeAdmits(o KV, s *JobSpec, now int64) func(address.Address) bool {
	if s.Trust != TrustTEE {
		return nil
	}
	return func(a address.Address) bool {
		p, ok, err := GetProvider(o, a)
		if err != nil || !ok || !p.AttestedAt(now) {
			return false
		}
		if s.GPUCount > 0 && ccGPUs(p, now) < s.GPUCount {
			return false
		}
		return len(s.TEEMeasurements) == 0 || slices.Contains(s.TEEMeasurements, p.TEE.Measurement)
	}
}

// ccGPUs counts p's GPUs whose attestation is valid at unix time now and
// whose agent reported CC mode on.
func ccGPUs(p *Provider, now int64) uint64 {
	var n uint64
	for _, g := range attestedGPUs(p) {
		if now < g.Expiry && g.CC == GPUCCOn {
			n++
		}
	}
	return n
}

// checkTEEGrant refuses a key for a trust: tee job to a provider whose
// attestation is not valid at the block's time (CheckTx, without one,
// checks the rest) or is over another key than the one it declares.
func checkTEEGrant(o KV, j *Job, prov address.Address, info BlockInfo) error {
	if j.Spec.Trust != TrustTEE {
		return nil
	}
	p, err := mustProvider(o, prov)
	if err != nil {
		return err
	}
	a := p.TEE
	switch {
	case a == nil || a.Kind == "":
		return fmt.Errorf("job %d is trust: tee and %s is not attested: its key goes to attested providers only: %w", j.ID, prov, ErrAttestation)
	case a.Key != p.EncryptionKey:
		return fmt.Errorf("job %d is trust: tee and %s's encryption key is not the one its evidence attested: %w", j.ID, prov, ErrAttestation)
	case !info.Time.IsZero() && info.Time.Unix() >= a.Expiry:
		return fmt.Errorf("job %d is trust: tee and %s's attestation expired at %d: %w", j.ID, prov, a.Expiry, ErrAttestation)
	case len(j.Spec.TEEMeasurements) > 0 && !slices.Contains(j.Spec.TEEMeasurements, a.Measurement):
		return fmt.Errorf("job %d is trust: tee and %s's measurement %s is not one the job pins: %w", j.ID, prov, a.Measurement, ErrAttestation)
	}
	return nil
}
