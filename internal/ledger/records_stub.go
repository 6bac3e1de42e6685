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
