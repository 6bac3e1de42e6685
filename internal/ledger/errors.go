package ledger

import (
	"errors"
	"fmt"
)

// Error is a class of ledger failure with a stable numeric code. The codes are
// part of the public contract (they are the ABCI codes clients see, listed in
// docs/ledger.md) and must never be renumbered. Functions return errors that
// wrap one of the values below with details a person can act on; test with
// errors.Is and read the code with CodeOf.
type Error struct {
	Code uint32
	Name string
}

func (e *Error) Error() string { return e.Name }

// The ledger's error classes. Code 0 means success and is never used here.
var (
	ErrDecode            = &Error{1, "malformed tx"}
	ErrTxTooLarge        = &Error{2, "tx too large"}
	ErrWrongChainID      = &Error{3, "wrong chain id"}
	ErrBadSignature      = &Error{4, "bad signature"}
	ErrBadSequence       = &Error{5, "bad sequence"}
	ErrInsufficientFunds = &Error{6, "insufficient funds"}
	ErrInvalidAmount     = &Error{7, "invalid amount"}
	ErrUnknownMsgType    = &Error{8, "unknown tx type"}
	ErrInvalidAddress    = &Error{9, "invalid address"}
	ErrInsufficientFee   = &Error{10, "insufficient fee"}
	ErrInvalidMsg        = &Error{11, "invalid tx"}
	ErrInvalidGenesis    = &Error{12, "invalid genesis"}
	ErrInternal          = &Error{13, "internal error"}
	ErrUnknownProvider   = &Error{14, "unknown provider"}
	ErrAlreadyRegistered = &Error{15, "provider already registered"}
	ErrInsufficientStake = &Error{16, "insufficient stake"}
	ErrNoChallenge       = &Error{17, "no open challenge"}
	ErrUnknownJob        = &Error{18, "unknown job"}
	ErrNotJobParty       = &Error{19, "not a party to the job"}
	ErrJobState          = &Error{20, "job is not in the right state"}
	ErrGPUTaken          = &Error{21, "GPU held by another provider"}
	ErrUnknownService    = &Error{22, "unknown service"}
	ErrNotServiceParty   = &Error{23, "not a party to the service"}
	ErrServiceState      = &Error{24, "service is not in the right state"}
	// ErrAttestation: TEE evidence refused, or a trust: tee key granted
	// to a provider without valid attestation (tee.go).
	ErrAttestation = &Error{30, "attestation refused"}
)

// AllErrors lists every error class in code order.
var AllErrors = []*Error{
	ErrDecode, ErrTxTooLarge, ErrWrongChainID, ErrBadSignature, ErrBadSequence,
	ErrInsufficientFunds, ErrInvalidAmount, ErrUnknownMsgType, ErrInvalidAddress,
	ErrInsufficientFee, ErrInvalidMsg, ErrInvalidGenesis, ErrInternal,
	ErrUnknownProvider, ErrAlreadyRegistered, ErrInsufficientStake, ErrNoChallenge,
	ErrUnknownJob, ErrNotJobParty, ErrJobState, ErrGPUTaken,
	ErrUnknownService, ErrNotServiceParty, ErrServiceState,
	ErrAttestation,
}

// CodeOf returns the stable code of err's class, 0 for nil, and
// ErrInternal's code for errors that belong to no class.
func CodeOf(err error) uint32 {
	if err == nil {
		return 0
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ErrInternal.Code
}

func invalid(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, ErrInvalidMsg)...)
}
