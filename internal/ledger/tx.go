package ledger

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
)

// TxVersion is the first byte of every encoded tx.
const TxVersion = 1

// signDomain separates gpunet tx signatures from any other use of a key.
const signDomain = "gpunet/tx/v1\x00"

// MsgType identifies the message a tx carries. Values are stable.
type MsgType uint64

// Message types.
const (
	MsgTypeSend               MsgType = 1
	MsgTypeRegisterProvider   MsgType = 2
	MsgTypeUpdateProvider     MsgType = 3
	MsgTypeSetProviderStatus  MsgType = 4
	MsgTypeStake              MsgType = 5
	MsgTypeUnstake            MsgType = 6
	MsgTypeLivenessProof      MsgType = 7
	MsgTypeSubmitJob          MsgType = 8
	MsgTypeGrantKey           MsgType = 9
	MsgTypeStartJob           MsgType = 10
	MsgTypeCommitResult       MsgType = 11
	MsgTypeCancelJob          MsgType = 12
	MsgTypeRevealResult       MsgType = 13
	MsgTypeChallengeCommit    MsgType = 14
	MsgTypeChallengeOpen      MsgType = 15
	MsgTypeRequestKeyHandover MsgType = 16
	MsgTypeHandOverKey        MsgType = 17
	MsgTypeDisputeKeyHandover MsgType = 18
	MsgTypeCreateValidator    MsgType = 19
	MsgTypeUnjail             MsgType = 20
	MsgTypeValidatorBond      MsgType = 21
	MsgTypeValidatorUnbond    MsgType = 22
	MsgTypeReleaseJob         MsgType = 25
	MsgTypeCommitCheckpoint   MsgType = 30
	MsgTypeSubmitProposal     MsgType = 35
	MsgTypeDeposit            MsgType = 36
	MsgTypeVote               MsgType = 37
	MsgTypeClaimRewards       MsgType = 45
	MsgTypeDelegate           MsgType = 60
	MsgTypeUndelegate         MsgType = 61
	MsgTypeRedelegate         MsgType = 62
	MsgTypeSetCommission      MsgType = 63
	MsgTypeGangMember         MsgType = 90
)

var msgNames = map[MsgType]string{
	MsgTypeSend:               "send",
	MsgTypeRegisterProvider:   "register_provider",
	MsgTypeUpdateProvider:     "update_provider",
	MsgTypeSetProviderStatus:  "set_provider_status",
	MsgTypeStake:              "stake",
	MsgTypeUnstake:            "unstake",
	MsgTypeLivenessProof:      "liveness_proof",
	MsgTypeSubmitJob:          "submit_job",
	MsgTypeGrantKey:           "grant_key",
	MsgTypeStartJob:           "start_job",
	MsgTypeCommitResult:       "commit_result",
	MsgTypeCancelJob:          "cancel_job",
	MsgTypeRevealResult:       "reveal_result",
	MsgTypeChallengeCommit:    "challenge_commit",
	MsgTypeChallengeOpen:      "challenge_open",
	MsgTypeRequestKeyHandover: "request_key_handover",
	MsgTypeHandOverKey:        "hand_over_key",
	MsgTypeDisputeKeyHandover: "dispute_key_handover",
	MsgTypeCreateValidator:    "create_validator",
	MsgTypeUnjail:             "unjail",
	MsgTypeValidatorBond:      "validator_bond",
	MsgTypeValidatorUnbond:    "validator_unbond",
	MsgTypeReleaseJob:         "release_job",
	MsgTypeCommitCheckpoint:   "commit_checkpoint",
	MsgTypeSubmitProposal:     "submit_proposal",
	MsgTypeDeposit:            "deposit",
	MsgTypeVote:               "vote",
	MsgTypeClaimRewards:       "claim_rewards",
	MsgTypeDelegate:           "delegate",
	MsgTypeUndelegate:         "undelegate",
	MsgTypeRedelegate:         "redelegate",
	MsgTypeSetCommission:      "set_commission",
	MsgTypeRequestAttestation: "request_attestation",
	MsgTypeAttest:             "attest",
	MsgTypeCommitJudgment:     "commit_judgment",
	MsgTypeRevealJudgment:     "reveal_judgment",
	MsgTypeDeployService:      "deploy_service",
	MsgTypeTopUpService:       "top_up_service",
	MsgTypeScaleService:       "scale_service",
	MsgTypeStopService:        "stop_service",
	MsgTypeSetServiceAccess:   "set_service_access",
	MsgTypeServiceHeartbeat:   "service_heartbeat",
	MsgTypeReleaseReplica:     "release_replica",
	MsgTypeEvictReplica:       "evict_replica",
	MsgTypeServiceDispute:     "service_dispute",
	MsgTypeAttestServed:       "attest_served",
	MsgTypeReportReplicaDown:  "report_replica_down",
	MsgTypeGangMember:         "gang_member",
}

// MsgTypes returns every message type the ledger knows, in numeric order
// (the numbers have gaps: ranges were set aside per area).
func MsgTypes() []MsgType { return slices.Sorted(maps.Keys(msgNames)) }

func (t MsgType) String() string {
	if n, ok := msgNames[t]; ok {
		return n
	}
	return "type " + strconv.FormatUint(uint64(t), 10)
}

// Msg is the body of a tx: one action by the tx's sender.
type Msg interface {
	Type() MsgType
	// ValidateBasic checks what can be checked without state.
	ValidateBasic() error
}

// newMsg returns an empty message of type t, or nil for an unknown type.
func newMsg(t MsgType) Msg {
	switch t {
	case MsgTypeSend:
		return &MsgSend{}
	case MsgTypeRegisterProvider:
		return &MsgRegisterProvider{}
	case MsgTypeUpdateProvider:
		return &MsgUpdateProvider{}
	case MsgTypeSetProviderStatus:
		return &MsgSetProviderStatus{}
	case MsgTypeStake:
		return &MsgStake{}
	case MsgTypeUnstake:
		return &MsgUnstake{}
	case MsgTypeLivenessProof:
		return &MsgLivenessProof{}
	case MsgTypeSubmitJob:
		return &MsgSubmitJob{}
	case MsgTypeGrantKey:
		return &MsgGrantKey{}
	case MsgTypeStartJob:
		return &MsgStartJob{}
	case MsgTypeCommitResult:
		return &MsgCommitResult{}
	case MsgTypeCancelJob:
		return &MsgCancelJob{}
	case MsgTypeRevealResult:
		return &MsgRevealResult{}
	case MsgTypeChallengeCommit:
		return &MsgChallengeCommit{}
	case MsgTypeChallengeOpen:
		return &MsgChallengeOpen{}
	case MsgTypeRequestKeyHandover:
		return &MsgRequestKeyHandover{}
	case MsgTypeHandOverKey:
		return &MsgHandOverKey{}
	case MsgTypeDisputeKeyHandover:
		return &MsgDisputeKeyHandover{}
	case MsgTypeCreateValidator:
		return &MsgCreateValidator{}
	case MsgTypeUnjail:
		return &MsgUnjail{}
	case MsgTypeValidatorBond:
		return &MsgValidatorBond{}
	case MsgTypeValidatorUnbond:
		return &MsgValidatorUnbond{}
	case MsgTypeReleaseJob:
		return &MsgReleaseJob{}
	case MsgTypeCommitCheckpoint:
		return &MsgCommitCheckpoint{}
	case MsgTypeGangMember:
		return &MsgGangMember{}
	case MsgTypeSubmitProposal:
		return &MsgSubmitProposal{}
	case MsgTypeDeposit:
		return &MsgDeposit{}
	case MsgTypeVote:
		return &MsgVote{}
	case MsgTypeClaimRewards:
		return &MsgClaimRewards{}
	case MsgTypeDelegate:
		return &MsgDelegate{}
	case MsgTypeUndelegate:
		return &MsgUndelegate{}
	case MsgTypeRedelegate:
		return &MsgRedelegate{}
	case MsgTypeSetCommission:
		return &MsgSetCommission{}
	case MsgTypeDeployService:
		return &MsgDeployService{}
	case MsgTypeTopUpService:
		return &MsgTopUpService{}
	case MsgTypeScaleService:
		return &MsgScaleService{}
	case MsgTypeStopService:
		return &MsgStopService{}
	case MsgTypeSetServiceAccess:
		return &MsgSetServiceAccess{}
	case MsgTypeServiceHeartbeat:
		return &MsgServiceHeartbeat{}
	case MsgTypeReleaseReplica:
		return &MsgReleaseReplica{}
	case MsgTypeEvictReplica:
		return &MsgEvictReplica{}
	case MsgTypeServiceDispute:
		return &MsgServiceDispute{}
	case MsgTypeRequestAttestation:
		return &MsgRequestAttestation{}
	case MsgTypeCommitJudgment:
		return &MsgCommitJudgment{}
	case MsgTypeRevealJudgment:
		return &MsgRevealJudgment{}
	case MsgTypeAttest:
		return &MsgAttest{}
	case MsgTypeAttestServed:
		return &MsgAttestServed{}
	case MsgTypeReportReplicaDown:
		return &MsgReportReplicaDown{}
	}
	return nil
}

// Tx is a signed transaction.
//
// Wire format (all integers unsigned varints, minimal; byte strings
// length-prefixed):
//
//	version(1 byte = 1) chain_id sequence fee msg_type pubkey(32 bytes) msg_body signature(64 bytes)
//
// msg_body is the message as compact JSON, exactly as encoding/json writes it.
// The signature is ed25519 over signDomain followed by every byte before it.
type Tx struct {
	ChainID   string
	Sequence  uint64
	Fee       uint64 // usync, paid to the treasury
	PubKey    ed25519.PublicKey
	Msg       Msg
	Signature []byte

	// sender is Sender() when senderKnown: the ante step sets it on a tx
	// it decoded and verified, before the tx is shared (TxCache,
	// PreparedTx), so that its later uses (the check, the recheck,
	// DeliverTx, each its ante step and its message) do not hash the key
	// again.
	sender      address.Address
	senderKnown bool
}

// Sender returns the address of the tx's signer.
func (tx *Tx) Sender() address.Address {
	if tx.senderKnown {
		return tx.sender
	}
	return address.FromPubKey(tx.PubKey)
}

func (tx *Tx) encodeUnsigned() ([]byte, error) {
	body, err := json.Marshal(tx.Msg)
	if err != nil {
		return nil, err
	}
	if len(tx.PubKey) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("public key has %d bytes, want %d", len(tx.PubKey), ed25519.PublicKeySize)
	}
	e := encoder{buf: make([]byte, 0, 128+len(body))}
	e.raw([]byte{TxVersion})
	e.string(tx.ChainID)
	e.uvarint(tx.Sequence)
	e.uvarint(tx.Fee)
	e.uvarint(uint64(tx.Msg.Type()))
	e.raw(tx.PubKey)
	e.bytes(body)
	return e.buf, nil
}

// SignBytes returns the bytes the signature covers.
func (tx *Tx) SignBytes() ([]byte, error) {
	b, err := tx.encodeUnsigned()
	if err != nil {
		return nil, err
	}
	return append([]byte(signDomain), b...), nil
}

// Sign sets the public key and signature from priv.
func (tx *Tx) Sign(priv ed25519.PrivateKey) error {
	tx.PubKey = priv.Public().(ed25519.PublicKey)
	sb, err := tx.SignBytes()
	if err != nil {
		return err
	}
	tx.Signature = ed25519.Sign(priv, sb)
	return nil
}

// Encode returns the wire form of a signed tx.
func (tx *Tx) Encode() ([]byte, error) {
	b, err := tx.encodeUnsigned()
	if err != nil {
		return nil, err
	}
	if len(tx.Signature) != ed25519.SignatureSize {
		return nil, errors.New("tx is not signed")
	}
	return append(b, tx.Signature...), nil
}

// TxHash returns the hash by which a tx is known: SHA-256 of its wire form,
// as CometBFT computes it.
func TxHash(raw []byte) [32]byte { return sha256.Sum256(raw) }

// Limits on envelope fields, applied while decoding.
const (
	maxChainIDLen = 64
	maxBodyLen    = 1 << 20
)

// envelope is a wire-form tx with its fields located but its message body
// not decoded.
type envelope struct {
	chainID   []byte
	sequence  uint64
	fee       uint64
	msgType   MsgType
	pubKey    []byte
	body      []byte
	signature []byte
}

// readEnvelope locates the fields of a wire-form tx; its errors say which
// field is wrong and are wrapped in ErrDecode by the caller.
func readEnvelope(raw []byte) (envelope, error) {
	if len(raw) == 0 {
		return envelope{}, errors.New("empty tx")
	}
	if raw[0] != TxVersion {
		return envelope{}, fmt.Errorf("unsupported tx version %d (this node reads version %d; is this a gpunet tx?)", raw[0], TxVersion)
	}
	d := decoder{buf: raw, off: 1}
	var e envelope
	e.chainID = d.bytes("chain_id", maxChainIDLen)
	e.sequence = d.uvarint("sequence")
	e.fee = d.uvarint("fee")
	e.msgType = MsgType(d.uvarint("msg_type"))
	e.pubKey = d.raw("public key", ed25519.PublicKeySize)
	e.body = d.bytes("msg_body", maxBodyLen)
	e.signature = d.raw("signature", ed25519.SignatureSize)
	return e, d.done()
}

// signedMessage is what a tx's signature covers: signDomain followed by
// every byte of the wire form before the signature.
func signedMessage(raw []byte) []byte {
	signed := raw[:len(raw)-ed25519.SignatureSize]
	msg := make([]byte, 0, len(signDomain)+len(signed))
	return append(append(msg, signDomain...), signed...)
}

// SignedParts returns what checking a wire-form tx's signature takes: the
// signer's public key, the message signed and the signature, read from the
// envelope without decoding the message body. ok is false when the
// envelope does not parse (DecodeTx says why). The signature check is a
// pure function of the tx's bytes, and the costliest part of CheckTx: an
// adapter whose Verifier remembers answers may run it ahead, outside its
// own locks, and the ledger's check then finds the answer.
func SignedParts(raw []byte) (pub ed25519.PublicKey, msg, sig []byte, ok bool) {
	e, err := readEnvelope(raw)
	if err != nil {
		return nil, nil, nil, false
	}
	return ed25519.PublicKey(e.pubKey), signedMessage(raw), e.signature, true
}

// DecodeTx parses a wire-form tx. It checks the encoding only: not the
// signature, the chain id or anything that needs state. Every error wraps
// ErrDecode, ErrUnknownMsgType, ErrInvalidAmount or ErrInvalidAddress and
// says which field is wrong.
func DecodeTx(raw []byte) (*Tx, error) {
	e, err := readEnvelope(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, ErrDecode)
	}
	tx := &Tx{
		ChainID:   string(e.chainID),
		Sequence:  e.sequence,
		Fee:       e.fee,
		PubKey:    ed25519.PublicKey(e.pubKey),
		Signature: e.signature,
	}
	msg, err := decodeMsgBody(e.body, e.msgType)
	if errors.Is(err, ErrUnknownMsgType) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%s body: %w", e.msgType, err)
	}
	tx.Msg = msg
	return tx, nil
}

// decodeMsgBody reads a message of type t from strict JSON: no unknown
// fields, no trailing data, and exactly the bytes encoding/json would
// write, so a tx has one encoding.
//
// A body in that form needs neither of the strict decoder's checks (a
// field it does not know, or data after the value, would not be in what
// json.Marshal writes), so it is read first with json.Unmarshal, which
// costs less; a body that fails that is read again, into a new message, by
// the strict decoder, whose error says what is wrong.
func decodeMsgBody(body []byte, t MsgType) (Msg, error) {
	msg := newMsg(t)
	if msg == nil {
		return nil, fmt.Errorf("tx type %d is not known to this ledger: %w", uint64(t), ErrUnknownMsgType)
	}
	if json.Unmarshal(body, msg) == nil {
		if canon, err := json.Marshal(msg); err == nil && bytes.Equal(canon, body) {
			return msg, nil
		}
	}
	msg = newMsg(t)
	return msg, decodeStrict(body, msg)
}

func decodeStrict(body []byte, msg Msg) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(msg); err != nil {
		var ae *AmountError
		switch {
		case errors.As(err, &ae):
			return fmt.Errorf("%w: %w", err, ErrInvalidAmount)
		case errors.Is(err, address.ErrInvalid):
			return fmt.Errorf("%w: %w", err, ErrInvalidAddress)
		}
		return fmt.Errorf("%w: %w", err, ErrDecode)
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the JSON body: %w", ErrDecode)
	}
	canon, err := json.Marshal(msg)
	if err != nil || !bytes.Equal(canon, body) {
		return fmt.Errorf("body is not in canonical form (compact JSON, fields in order, as encoding/json writes it): %w", ErrDecode)
	}
	return nil
}

// Amount is a quantity of usync. In JSON it is a bare integer; anything else
// (negative, fractional, exponent, quoted, beyond 2^64-1) is an AmountError.
type Amount uint64

// AmountError reports an amount that is not a non-negative 64-bit integer.
type AmountError struct{ Text, Reason string }

func (e *AmountError) Error() string { return fmt.Sprintf("amount %s %s", e.Text, e.Reason) }

// UnmarshalJSON implements json.Unmarshaler.
func (a *Amount) UnmarshalJSON(b []byte) error {
	s := string(b)
	switch {
	case len(s) > 0 && s[0] == '-':
		return &AmountError{s, "is negative"}
	case len(s) > 0 && s[0] == '"':
		return &AmountError{s, "must be a bare integer in usync, not a string"}
	case bytes.ContainsAny(b, ".eE"):
		return &AmountError{s, "must be a whole number of usync"}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return &AmountError{s, fmt.Sprintf("overflows (at most %d usync)", uint64(math.MaxUint64))}
		}
		return &AmountError{s, "is not a number"}
	}
	*a = Amount(v)
	return nil
}
