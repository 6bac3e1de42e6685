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

// TEEOptions configure the attestation loop; a nil Producer turns it off.
type TEEOptions struct {
	// Producer makes the evidence: attest.TDXProducer or
	// attest.SNPProducer in a guest, a test PKI's in tests.
	Producer attest.Producer
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

// DefaultRenewBefore is how early the agent renews its attestation: a
// day ahead of a week's validity (params.attest_max_validity).
const DefaultRenewBefore = 24 * time.Hour

// attestLoop runs until ctx ends, every poll seeing whether the
// attestation needs renewing; failures are logged and retried.
func (a *Agent) attestLoop(ctx context.Context) {
	t := a.o.TEE
	if t.Producer == nil {
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
	if p.TEE != nil && p.TEE.Kind != "" && p.TEE.Key == p.EncryptionKey && time.Unix(p.TEE.Expiry, 0).Sub(now) > renew {
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
	msg, err := a.evidence(p.TEE.Nonce[:], p.EncryptionKey)
	if err != nil {
		return err
	}
	if _, err := a.o.Chain.SendMsg(ctx, a.o.Key, 0, msg); err != nil {
		return fmt.Errorf("send %s evidence: %w", msg.Kind, err)
	}
	body, err = a.o.Chain.Provider(ctx, a.o.Key.Address)
	if err == nil && body.Record != nil && body.Record.TEE != nil {
		rec := body.Record.TEE
		a.log.Info("TEE attestation accepted", "kind", rec.Kind, "measurement", rec.Measurement, "expiry", time.Unix(rec.Expiry, 0).UTC())
		a.update(func(s *Status) { s.AttestedUntil, s.AttestError = time.Unix(rec.Expiry, 0).UTC(), "" })
	}
	return nil
}

// evidence has the TEE make evidence over nonce and key, and builds the
// message with the collateral and roots.
func (a *Agent) evidence(nonce []byte, key string) (*ledger.MsgAttest, error) {
	t := a.o.TEE
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
	roots := t.Roots
	if roots == nil {
		roots = attest.DefaultRoots()
	}
	msg.Roots = derRoots(roots)
	if err := msg.ValidateBasic(); err != nil {
		return nil, fmt.Errorf("%s evidence: %w", ev.Kind, err)
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
