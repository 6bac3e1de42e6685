package ledger

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
)

// Key handover: how a replica placed on a job that already has committed
// results (an audit, escalation or replacement replica) gets the job key
// when the owner is offline, without the key ever being readable by anyone
// else and with objective evidence on chain when it is wrong.
//
//  1. At submit the owner's client puts KeyCommitment = JobKeyCommitment(key)
//     on chain (a hash of the job key; the key has 256 bits of entropy, so
//     the hash reveals nothing).
//  2. A replica placed on a committed job posts a fresh X25519 public key
//     for this job only (MsgRequestKeyHandover). The grant deadline
//     restarts: the committed replicas get a full window to answer.
//  3. A replica that has committed its result (it can no longer change it)
//     seals the job key to that public key (SealHandover) in
//     MsgHandOverKey: the primary, or any other committed replica, whether
//     the owner granted it the key or it was handed over to it (an audit
//     replica hands it on to an escalation replica). The ledger records it
//     as the new replica's grant.
//  4. The new replica opens it (OpenHandover) and checks its hash against
//     KeyCommitment. If it does not match, it sends MsgDisputeKeyHandover
//     with its per-job private key: the ledger checks that key against the
//     public key posted in step 2, opens the handover itself, and, when the
//     content is not the committed key, slashes the replica that sealed it
//     and fails the job (the owner is refunded in full). A correct handover
//     makes the dispute fail: the ledger cannot be talked into a penalty.
//  5. A committed replica that hands over nothing while a new replica
//     waits with its public key posted is treated like one that withholds
//     its reveal (penalizeUnrevealed), unless another committed replica
//     handed it over: a primary cannot dodge a drawn audit, nor a replica
//     an escalation, by staying silent.
//
// The sealing is stdlib only so that the ledger can open it
// deterministically: X25519 between the sender's ephemeral key and the
// recipient's, HKDF-SHA256 bound to both public keys and the job id, and
// AES-256-GCM (a fresh ephemeral key per handover, so a fixed nonce).

// JobKeyCommitment is the hash of a job key (its age identity string,
// "AGE-SECRET-KEY-1…") that MsgSubmitJob carries.
func JobKeyCommitment(key []byte) Hash {
	h := sha256.New()
	h.Write([]byte("gpunet/job-key/v1\x00"))
	h.Write(key)
	var out Hash
	h.Sum(out[:0])
	return out
}

// HandoverPublicKey returns the X25519 public key of a per-job handover
// secret, as MsgRequestKeyHandover carries it.
func HandoverPublicKey(secret Hash) (Hash, error) {
	k, err := ecdh.X25519().NewPrivateKey(secret[:])
	if err != nil {
		return Hash{}, err
	}
	var pub Hash
	copy(pub[:], k.PublicKey().Bytes())
	return pub, nil
}

func handoverAEAD(shared []byte, ephemeral, recipient Hash, job uint64) (cipher.AEAD, error) {
	salt := append(append(ephemeral[:0:0], ephemeral[:]...), recipient[:]...)
	key, err := hkdf.Key(sha256.New, shared, salt, "gpunet/key-handover/v1 job "+strconv.FormatUint(job, 10), 32)
	if err != nil {
		return nil, err
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// SealHandover seals key to recipient for job with the caller's fresh
// ephemeral secret (32 random bytes; the ledger draws no randomness). The
// result is the ephemeral public key followed by the ciphertext.
func SealHandover(key []byte, recipient, ephemeral Hash, job uint64) ([]byte, error) {
	e, err := ecdh.X25519().NewPrivateKey(ephemeral[:])
	if err != nil {
		return nil, err
	}
	r, err := ecdh.X25519().NewPublicKey(recipient[:])
	if err != nil {
		return nil, err
	}
	shared, err := e.ECDH(r)
	if err != nil {
		return nil, err
	}
	var epub Hash
	copy(epub[:], e.PublicKey().Bytes())
	aead, err := handoverAEAD(shared, epub, recipient, job)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	return aead.Seal(epub[:], nonce, key, binary.BigEndian.AppendUint64(nil, job)), nil
}

// OpenHandover opens a handover sealed to the public key of secret.
func OpenHandover(sealed []byte, secret Hash, job uint64) ([]byte, error) {
	if len(sealed) < 32 {
		return nil, errors.New("handover shorter than its ephemeral key")
	}
	k, err := ecdh.X25519().NewPrivateKey(secret[:])
	if err != nil {
		return nil, err
	}
	var epub, rpub Hash
	copy(epub[:], sealed[:32])
	copy(rpub[:], k.PublicKey().Bytes())
	e, err := ecdh.X25519().NewPublicKey(epub[:])
	if err != nil {
		return nil, err
	}
	shared, err := k.ECDH(e)
	if err != nil {
		return nil, fmt.Errorf("ephemeral key: %w", err)
	}
	aead, err := handoverAEAD(shared, epub, rpub, job)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	return aead.Open(nil, nonce, sealed[32:], binary.BigEndian.AppendUint64(nil, job))
}

// MsgRequestKeyHandover is a replica placed on a committed job (audit,
// escalation or replacement) asking the committed replicas for the job
// key: PublicKey is an X25519 key it made for this job only.
type MsgRequestKeyHandover struct {
	JobID     uint64 `json:"job_id"`
	PublicKey Hash   `json:"public_key"`
}

// MsgHandOverKey is a committed replica sealing the job key
// (SealHandover) to a waiting replica's handover public key.
type MsgHandOverKey struct {
	JobID    uint64          `json:"job_id"`
	Provider address.Address `json:"provider"`
	Sealed   []byte          `json:"sealed"`
}

// MsgDisputeKeyHandover is a replica showing that the key handed over to
// it is not the one the owner committed to: Secret is its per-job handover
// private key.
type MsgDisputeKeyHandover struct {
	JobID  uint64 `json:"job_id"`
	Secret Hash   `json:"secret"`
}

// Type implements Msg.
func (*MsgRequestKeyHandover) Type() MsgType { return MsgTypeRequestKeyHandover }

// Type implements Msg.
func (*MsgHandOverKey) Type() MsgType { return MsgTypeHandOverKey }

// Type implements Msg.
func (*MsgDisputeKeyHandover) Type() MsgType { return MsgTypeDisputeKeyHandover }

// ValidateBasic implements Msg.
func (m *MsgRequestKeyHandover) ValidateBasic() error {
	if _, err := ecdh.X25519().NewPublicKey(m.PublicKey[:]); err != nil || m.PublicKey == (Hash{}) {
		return invalid("public_key is not an X25519 public key")
	}
	return nil
}

// ValidateBasic implements Msg.
func (m *MsgHandOverKey) ValidateBasic() error {
	if m.Provider.IsZero() {
		return fmt.Errorf("provider is the zero address: %w", ErrInvalidAddress)
	}
	if len(m.Sealed) < 32+16 || len(m.Sealed) > 1024 {
		return invalid("sealed: want 48 to 1024 bytes, got %d", len(m.Sealed))
	}
	return nil
}

// ValidateBasic implements Msg.
func (m *MsgDisputeKeyHandover) ValidateBasic() error { return nil }

// waitsForHandover reports whether a is a replica that asked for the key
// and has not got it.
func (a *Assignment) waitsForHandover() bool { return a.HandoverKey != nil && a.KeyGrant == nil }

func execRequestKeyHandover(o *Overlay, from address.Address, m *MsgRequestKeyHandover, p Params, info BlockInfo) ([]Event, error) {
	j, a, err := jobParty(o, m.JobID, from)
	if err != nil {
		return nil, err
	}
	switch {
	case j.KeyCommitment == nil:
		return nil, fmt.Errorf("job %d has no key commitment: only its owner can grant the key: %w", j.ID, ErrJobState)
	case a.Commitment != nil || a.Result != nil || j.committed() == 0:
		// A replica of the first placement waits for the owner's grant:
		// nobody else has the key before someone committed.
		return nil, fmt.Errorf("only a replica placed on a job with committed results (audit, escalation, replacement) asks for a handover: %w", ErrJobState)
	case a.KeyGrant != nil || a.HandoverKey != nil:
		return nil, fmt.Errorf("%s already has, or asked for, job %d's key: %w", from, j.ID, ErrJobState)
	}
	pk := m.PublicKey
	a.HandoverKey = &pk
	old := j.Deadline
	// The committed replicas get a whole window to answer.
	j.Deadline = info.Time.Unix() + int64(p.JobGrantTimeout)
	j.setWait(Wait{Code: WaitHandoverRequested})
	setJob(o, j, old)
	return []Event{jobEvent("job_key_handover_requested", j, Attr{"provider", from.String()})}, nil
}

func execHandOverKey(o *Overlay, from address.Address, m *MsgHandOverKey, p Params, info BlockInfo) ([]Event, error) {
	j, me, err := jobParty(o, m.JobID, from)
	if err != nil {
		return nil, err
	}
	if me.Commitment == nil {
		return nil, fmt.Errorf("%s has not committed its result for job %d: only a committed replica may hand over the key: %w", from, j.ID, ErrJobState)
	}
	to := j.assignment(m.Provider)
	if to == nil {
		return nil, fmt.Errorf("%s is not assigned to job %d: %w", m.Provider, j.ID, ErrNotJobParty)
	}
	if !to.waitsForHandover() {
		return nil, fmt.Errorf("%s does not wait for a handover of job %d's key: %w", m.Provider, j.ID, ErrJobState)
	}
	if err := checkTEEGrant(o, j, m.Provider, info); err != nil {
		return nil, err // a trust: tee job's key goes to attested providers only
	}
	// A handover grants as the owner's grant does: the slot is taken for
	// real (slots.go).
	bumped, err := grantSlot(o, j, to, p, info)
	if err != nil {
		return nil, err
	}
	to.KeyGrant = append([]byte(nil), m.Sealed...)
	by := from
	to.HandedBy = &by
	old := j.Deadline
	if allGranted(j) {
		j.setWait(Wait{Code: WaitKeyHandedOver})
		j.Deadline = info.Time.Unix() + int64(p.JobStartTimeout)
	}
	setJob(o, j, old)
	return append([]Event{jobEvent("job_key_handed_over", j, Attr{"provider", m.Provider.String()}, Attr{"by", from.String()})}, bumped...), nil
}

func execDisputeKeyHandover(o *Overlay, from address.Address, m *MsgDisputeKeyHandover, p Params, info BlockInfo) ([]Event, error) {
	j, a, err := jobParty(o, m.JobID, from)
	if err != nil {
		return nil, err
	}
	if a.HandedBy == nil || a.HandoverKey == nil || a.StartedAt != 0 || j.KeyCommitment == nil {
		return nil, fmt.Errorf("%s holds no disputable handover of job %d's key: %w", from, j.ID, ErrJobState)
	}
	if pub, err := HandoverPublicKey(m.Secret); err != nil || pub != *a.HandoverKey {
		return nil, fmt.Errorf("secret is not the private half of the handover key %x posted for job %d: %w", *a.HandoverKey, j.ID, ErrInvalidMsg)
	}
	key, err := OpenHandover(a.KeyGrant, m.Secret, j.ID)
	if err == nil && JobKeyCommitment(key) == *j.KeyCommitment {
		return nil, fmt.Errorf("the handover opens to the key job %d's owner committed to: nothing to dispute: %w", j.ID, ErrInvalidMsg)
	}
	// Objective: the sealer chose the ciphertext, and it does not open to
	// the committed key under the key the auditor posted before.
	cheat := *a.HandedBy
	g := j.assignment(cheat)
	var events []Event
	amt, err := slashFor(o, cheat, j.Owner, p, info, SlashEvent{Code: SlashBadHandover, Job: j.ID})
	if err != nil {
		return nil, err
	}
	if err := recordInvalid(o, cheat, g.Class); err != nil {
		return nil, err
	}
	g.Outcome, g.Slashed = OutcomeBadHandover, amt
	events = append(events, jobEvent("job_replica_slashed", j, Attr{"provider", cheat.String()}, Attr{"amount", strconv.FormatUint(amt, 10)}, Attr{"why", OutcomeBadHandover}))
	// The new replica held its slot for nothing: paid as an ungranted one
	// is.
	if err := chargeHold(o, j, a, p, info.Time.Unix()); err != nil {
		return nil, err
	}
	j.State = JobFailed
	j.setWait(Wait{Code: WaitBadHandover, Providers: []address.Address{cheat}, Amount: amt})
	evs, err := finishJob(o, j, info)
	return append(events, evs...), err
}

// failWithheldHandover settles a job whose new replica (audit, escalation
// or replacement) posted its handover key and got the job key from nobody
// by the deadline: the owner did not
// grant it, and no committed replica handed it over. Every committed
// replica could have (handover.go), so each is treated as one that
// withholds its reveal: slashed, unpaid, counted invalid. Otherwise a
// primary with a wrong result would stay silent whenever an audit is drawn
// and keep its unverified pay. The replicas without the key are paid for
// the slot they held; the job fails and the owner gets the rest back.
func failWithheldHandover(o *Overlay, j *Job, p Params, info BlockInfo) ([]Event, error) {
	var events []Event
	withheld := 0
	for i := range j.Assignments {
		a := &j.Assignments[i]
		switch {
		case a.KeyGrant == nil:
			if err := chargeHold(o, j, a, p, info.Time.Unix()); err != nil {
				return nil, err
			}
		case a.Commitment != nil:
			withheld++
			a.Outcome = OutcomeWithheldKey
			amt, err := slashFor(o, a.Provider, j.Owner, p, info, SlashEvent{Code: SlashWithheldKey, Job: j.ID})
			if err != nil {
				return nil, err
			}
			a.Slashed = amt
			if err := recordUnrevealed(o, a.Provider, a.Class); err != nil {
				return nil, err
			}
			events = append(events, jobEvent("job_replica_slashed", j, Attr{"provider", a.Provider.String()}, Attr{"amount", strconv.FormatUint(amt, 10)}, Attr{"why", OutcomeWithheldKey}))
		}
	}
	j.Dropped, j.AuditDropped = &Wait{Code: DropNoKey}, ""
	j.State = JobFailed
	j.setWait(Wait{Code: WaitHandoverWithheld, Slashed: uint64(withheld)})
	evs, err := finishJob(o, j, info)
	return append(events, evs...), err
}
