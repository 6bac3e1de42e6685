package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gpunet/gpunet/internal/attest"
	"github.com/gpunet/gpunet/internal/ledger"
)

// The attestation loop (issue 31, docs/confidential.md): an agent that
// runs in a confidential guest, configured with a TEE producer, keeps the
// chain's record of its attestation valid. It asks the chain for a nonce
// (request_attestation), has the TEE make evidence that binds the nonce
// and its encryption key, adds the vendor collateral from its collateral
// directory, sends it (attest), and does it again RenewBefore ahead of
// the recorded expiry.

// TEEOptions configure the attestation loop; a nil Producer and no GPUs
// turn it off.
type TEEOptions struct {
	// Producer makes the evidence: attest.TDXProducer or
	// attest.SNPProducer in a guest, a test PKI's in tests; nil with GPUs
	// for GPU evidence alone (it proves the GPUs' identity, not a TEE).
	Producer attest.Producer
	// GPUs make NVIDIA GPU evidence over the same nonce and key
	// (attest.GPUProducer; attesttest.GPU in tests), sent beside the
	// TEE's, each under the UUID its State reports.
	GPUs []GPUProducer
	// CollateralDir holds the vendor collateral the TEE does not hand
	// out, one file per attest.CollateralNames name (`gpunet attest
	// verify --collateral` reads the same layout); "" for none.
	CollateralDir string
	// Roots are the DER or PEM root certificates the evidence chains to;
	// nil is attest.DefaultRoots. Those the chain does not trust are
	// ignored by it.
	Roots [][]byte
	// RenewBefore is how long ahead of the recorded expiry new evidence
	// is sent; 0 is DefaultRenewBefore.
	RenewBefore time.Duration
}

// GPUProducer is an attest.Producer of NVIDIA GPU evidence that tells the
// GPU's NVML UUID and CC state (attest.GPUProducer).
type GPUProducer interface {
	attest.Producer
	State() (uuid string, cc attest.GPUCCState, err error)
}

// DefaultRenewBefore is how early the agent renews its attestation: a
// day ahead of a week's validity (params.attest_max_validity).
const DefaultRenewBefore = 24 * time.Hour

// attestLoop runs until ctx ends, every poll seeing whether the
// attestation needs renewing; failures are logged and retried.
func (a *Agent) attestLoop(ctx context.Context) {
	t := a.o.TEE
	if t.Producer == nil && len(t.GPUs) == 0 {
		return
	}
	renew := t.RenewBefore
	if renew <= 0 {
		renew = DefaultRenewBefore
	}
	backoff := a.o.Poll
	for {
		wait := a.o.Poll
		if err := a.attestOnce(ctx, renew); err != nil {
			if ctx.Err() != nil {
				return
			}
			a.log.Warn("TEE attestation failed; retrying", "err", err, "in", backoff)
			a.update(func(s *Status) { s.AttestError = err.Error() })
			wait, backoff = backoff, min(2*backoff, time.Minute)
		} else {
			backoff = a.o.Poll
		}
		select {
		case <-ctx.Done():
			return
		case <-a.clk.After(wait):
		}
	}
}

// attestOnce sends evidence when the record's attestation is missing,
// over another key, or due for renewal; otherwise it does nothing.
func (a *Agent) attestOnce(ctx context.Context, renew time.Duration) error {
	body, err := a.o.Chain.Provider(ctx, a.o.Key.Address)
	if err != nil || body == nil || body.Record == nil {
		return nil // not registered yet: the main loop registers
	}
	p := body.Record
	if p.EncryptionKey == "" {
		return errors.New("the provider declares no encryption key for evidence to bind")
	}
	now := a.clk.Now()
	uuids, err := a.gpuUUIDs()
	if err != nil {
		return err
	}
	cpuDue := a.o.TEE.Producer != nil && (p.TEE == nil || p.TEE.Kind == "" || p.TEE.Key != p.EncryptionKey || time.Unix(p.TEE.Expiry, 0).Sub(now) <= renew)
	if !cpuDue && !gpusDue(p.TEE, uuids, now, renew) {
		return nil
	}
	params, err := a.o.Chain.Params(ctx)
	if err != nil {
		return err
	}
	// A nonce at most half its validity old is used; otherwise a new one.
	if p.TEE == nil || p.TEE.Nonce == nil || body.Height > p.TEE.NonceHeight+params.AttestNonceBlocks/2 {
		if _, err := a.o.Chain.SendMsg(ctx, a.o.Key, 0, &ledger.MsgRequestAttestation{}); err != nil {
			return fmt.Errorf("request an attestation nonce: %w", err)
		}
		if body, err = a.o.Chain.Provider(ctx, a.o.Key.Address); err != nil {
			return err
		}
		p = body.Record
		if p.TEE == nil || p.TEE.Nonce == nil {
			return errors.New("the chain recorded no attestation nonce")
		}
	}
	msg, err := a.evidence(p.TEE.Nonce[:], p.EncryptionKey, uuids)
	if err != nil {
		return err
	}
	if _, err := a.o.Chain.SendMsg(ctx, a.o.Key, 0, msg); err != nil {
		return fmt.Errorf("send %s evidence: %w", msg.Kind, err)
	}
	body, err = a.o.Chain.Provider(ctx, a.o.Key.Address)
	if err == nil && body.Record != nil && body.Record.TEE != nil {
		rec := body.Record.TEE
		until := rec.Expiry
		for _, g := range rec.GPUs {
			a.log.Info("GPU attestation accepted", "uuid", g.UUID, "gpu", g.ID, "expiry", time.Unix(g.Expiry, 0).UTC())
			if rec.Kind == "" && (until == 0 || g.Expiry < until) {
				until = g.Expiry
			}
		}
		a.log.Info("TEE attestation accepted", "kind", msg.Kind, "measurement", rec.Measurement, "expiry", time.Unix(until, 0).UTC())
		a.update(func(s *Status) { s.AttestedUntil, s.AttestError = time.Unix(until, 0).UTC(), "" })
	}
	return nil
}

// gpuUUIDs asks each GPU producer for its GPU's UUID.
func (a *Agent) gpuUUIDs() ([]string, error) {
	var out []string
	for i, g := range a.o.TEE.GPUs {
		uuid, _, err := g.State()
		if err != nil {
			return nil, fmt.Errorf("GPU %d: %w", i, err)
		}
		out = append(out, uuid)
	}
	return out, nil
}

// gpusDue reports whether a GPU of uuids has no attestation on record
// that lasts beyond renew from now.
func gpusDue(rec *ledger.Attestation, uuids []string, now time.Time, renew time.Duration) bool {
	for _, u := range uuids {
		ok := rec != nil && slices.ContainsFunc(rec.GPUs, func(g ledger.AttestedGPU) bool {
			return g.UUID == u && time.Unix(g.Expiry, 0).Sub(now) > renew
		})
		if !ok {
			return true
		}
	}
	return false
}

// evidence has the TEE (and each GPU) make evidence over nonce and key,
// and builds the message with the collateral and roots.
func (a *Agent) evidence(nonce []byte, key string, uuids []string) (*ledger.MsgAttest, error) {
	t := a.o.TEE
	roots := t.Roots
	if roots == nil {
		roots = attest.DefaultRoots()
	}
	if t.Producer == nil {
		msg := &ledger.MsgAttest{Kind: ledger.TEEKindNVIDIAGPU, Roots: derRoots(roots)}
		return a.gpuEvidence(msg, nonce, key, uuids)
	}
	ev, err := attest.Produce(t.Producer, nonce, []byte(key))
	if err != nil {
		return nil, err
	}
	coll := ev.Collateral
	if coll == nil {
		coll = map[string][]byte{}
	}
	names := attest.CollateralNames(ev.Kind)
	if t.CollateralDir != "" {
		for _, n := range names {
			if _, ok := coll[n]; ok {
				continue // the TEE's own (an SNP VCEK) wins
			}
			b, err := os.ReadFile(filepath.Join(t.CollateralDir, n))
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("collateral: %w", err)
			}
			coll[n] = b
		}
	}
	sorted := slices.Sorted(func(yield func(string) bool) {
		for _, n := range names {
			if _, ok := coll[n]; ok && !yield(n) {
				return
			}
		}
	})
	msg := &ledger.MsgAttest{Kind: string(ev.Kind), Evidence: ev.Raw}
	for _, n := range sorted {
		msg.Collateral = append(msg.Collateral, ledger.AttestBlob{Name: n, Data: coll[n]})
	}
	msg.Roots = derRoots(roots)
	return a.gpuEvidence(msg, nonce, key, uuids)
}

// gpuEvidence adds each GPU's evidence over nonce and key to msg, under
// its UUID, and checks the message.
func (a *Agent) gpuEvidence(msg *ledger.MsgAttest, nonce []byte, key string, uuids []string) (*ledger.MsgAttest, error) {
	for i, g := range a.o.TEE.GPUs {
		ev, err := attest.Produce(g, nonce, []byte(key))
		if err != nil {
			return nil, fmt.Errorf("GPU %d (%s): %w", i, uuids[i], err)
		}
		// The CC mode is NVML's word, not the GPU's signature: sent and
		// recorded as reported.
		_, cc, err := g.State()
		if err != nil {
			return nil, fmt.Errorf("GPU %d (%s): %w", i, uuids[i], err)
		}
		msg.GPUs = append(msg.GPUs, ledger.AttestGPU{UUID: uuids[i], Evidence: ev.Raw, CertChain: ev.Collateral[attest.GPUCertChain], CC: cc.Mode()})
	}
	if err := msg.ValidateBasic(); err != nil {
		return nil, fmt.Errorf("%s evidence: %w", msg.Kind, err)
	}
	return msg, nil
}

// derRoots returns each certificate of roots (DER, or PEM bundles) as
// DER, each once, at most the 8 a message carries.
func derRoots(roots [][]byte) [][]byte {
	var out [][]byte
	seen := map[string]bool{}
	add := func(der []byte) {
		h := sha256.Sum256(der)
		if k := hex.EncodeToString(h[:]); !seen[k] && len(out) < 8 {
			seen[k] = true
			out = append(out, der)
		}
	}
	for _, r := range roots {
		if blk, _ := pem.Decode(r); blk == nil {
			add(r)
			continue
		}
		for rest := r; ; {
			var blk *pem.Block
			if blk, rest = pem.Decode(rest); blk == nil {
				break
			}
			add(blk.Bytes)
		}
	}
	return out
}
