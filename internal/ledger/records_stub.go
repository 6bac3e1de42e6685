//go:build recgen

package ledger

// Under the recgen build tag the generated codec (records_gen.go) is left
// out, so that internal/recgen can build the ledger to read its record
// types even when the generated code no longer matches them.

func (x *Job) encodeRec(*encoder)      {}
func (x *Job) decodeRec(*decoder)      {}
func (x *Provider) encodeRec(*encoder) {}
func (x *Provider) decodeRec(*decoder) {}
func (x *Job) recVersion() byte        { return 0 }
func (x *Provider) recVersion() byte   { return 0 }

// Proposals (gov.go) encode their Wait with its generated codec.
func (x *Wait) encodeRec(*encoder) {}
func (x *Wait) decodeRec(*decoder) {}

// Delegation records (delegation.go).
func (x *DelegationPool) encodeRec(*encoder)      {}
func (x *DelegationPool) decodeRec(*decoder)      {}
func (x *DelegationPool) recVersion() byte        { return 0 }
func (x *Delegation) encodeRec(*encoder)          {}
func (x *Delegation) decodeRec(*decoder)          {}
func (x *Delegation) recVersion() byte            { return 0 }
func (x *UnbondingDelegation) encodeRec(*encoder) {}
func (x *UnbondingDelegation) decodeRec(*decoder) {}
func (x *UnbondingDelegation) recVersion() byte   { return 0 }
func (x *Redelegation) encodeRec(*encoder)        {}
func (x *Redelegation) decodeRec(*decoder)        {}
func (x *Redelegation) recVersion() byte          { return 0 }
