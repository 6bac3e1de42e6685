package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The binary codec used for the tx envelope and for state records: unsigned
// varints and length-prefixed byte strings, with exactly one encoding for
// every value (minimal varints, no trailing bytes), so that bytes in and bytes
// out always agree.

type encoder struct {
	buf     []byte
	version byte // of the record being written: fields since a later one are left out
}

func (e *encoder) uvarint(v uint64) { e.buf = binary.AppendUvarint(e.buf, v) }
func (e *encoder) bytes(b []byte)   { e.uvarint(uint64(len(b))); e.buf = append(e.buf, b...) }
func (e *encoder) string(s string)  { e.uvarint(uint64(len(s))); e.buf = append(e.buf, s...) }
func (e *encoder) raw(b []byte)     { e.buf = append(e.buf, b...) }
func (e *encoder) int64(v int64)    { e.uvarint(uint64(v<<1) ^ uint64(v>>63)) } // zig-zag
func (e *encoder) bool(v bool) {
	if v {
		e.buf = append(e.buf, 1)
	} else {
		e.buf = append(e.buf, 0)
	}
}

// errTruncated and friends describe malformed encodings; callers wrap them in
// ErrDecode.
var (
	errTruncated = errors.New("truncated")
	errVarint    = errors.New("malformed or non-minimal varint")
	errBool      = errors.New("a bool must be the byte 0 or 1")
	errMapOrder  = errors.New("map keys out of order or repeated")
	errCount     = errors.New("count exceeds the bytes left")
)

type decoder struct {
	buf     []byte
	off     int
	err     error
	version byte // of the record being read: fields since a later one are absent
}

func (d *decoder) fail(err error, what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%s at byte %d: %w", what, d.off, err)
	}
}

func (d *decoder) uvarint(what string) uint64 { return d.uvarintOf(what, "") }

// uvarintOf is uvarint for the field named what+suffix: the name is built
// only when the field is malformed (a length or a count is read for every
// byte string and slice a record holds; building its name each time was
// an allocation each).
func (d *decoder) uvarintOf(what, suffix string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.buf[d.off:])
	if n == 0 {
		d.fail(errTruncated, what+suffix)
		return 0
	}
	if n < 0 || n != uvarintLen(v) {
		d.fail(errVarint, what+suffix)
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) bytes(what string, max int) []byte {
	n := d.uvarintOf(what, " length")
	if d.err != nil {
		return nil
	}
	if n > uint64(max) {
		d.fail(fmt.Errorf("length %d exceeds the limit of %d", n, max), what)
		return nil
	}
	return d.raw(what, int(n))
}

func (d *decoder) raw(what string, n int) []byte {
	if d.err != nil {
		return nil
	}
	if len(d.buf)-d.off < n {
		d.fail(errTruncated, what)
		return nil
	}
	b := d.buf[d.off : d.off+n]
	d.off += n
	return b
}

func (d *decoder) int64(what string) int64 {
	u := d.uvarint(what)
	return int64(u>>1) ^ -int64(u&1)
}

func (d *decoder) bool(what string) bool {
	b := d.raw(what, 1)
	if b == nil {
		return false
	}
	if b[0] > 1 {
		d.fail(errBool, what)
		return false
	}
	return b[0] == 1
}

func (d *decoder) string(what string) string { return string(d.bytes(what, len(d.buf))) }

// byteSlice is a length-prefixed byte string, copied; empty is nil.
func (d *decoder) byteSlice(what string) []byte {
	b := d.bytes(what, len(d.buf))
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// count reads the element count of a slice or map: every element takes at
// least a byte, so a count above the bytes left is corrupt (and is refused
// before anything is allocated for it).
func (d *decoder) count(what string) int {
	n := d.uvarintOf(what, " count")
	if d.err == nil && n > uint64(len(d.buf)-d.off) {
		d.fail(errCount, what)
	}
	if d.err != nil {
		return 0
	}
	return int(n)
}

func (d *decoder) done() error {
	if d.err == nil && d.off != len(d.buf) {
		d.err = fmt.Errorf("%d unexpected trailing bytes", len(d.buf)-d.off)
	}
	return d.err
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// Job and provider records are stored in the binary codec that
// internal/recgen generates (records_gen.go) from their types: a version
// byte, then the fields in order. Decoding and encoding again gives the
// same bytes (FuzzRecords). A record of a version this node does not read
// (JSON, before the binary codec, began with '{') is refused with an error
// that says so.
//
// A field added later is tagged rec:"since=N" and stored only in records of
// version N or later; each record is written at the lowest version that
// holds what is set in it (its recVersion). So a record that sets none of
// the newer fields keeps the bytes, and the app hash, it had before they
// existed, and a node reads both versions. A record written at a higher
// version than it needs is not canonical and is refused.
//
//go:generate go run -tags recgen ./internal/recgen -o records_gen.go

// StateVersion is the version of the state's layout as a whole: the keys
// and invariants the ledger expects besides its records. A state of another
// version (or of none: written before the validator set, governance, the
// market and rewards, which an older state lacks the keys of) is refused
// when a node opens it, not halted on at its first block.
//
// Version 3: a provider's jobs count only the slots taken for real
// (granted placements and service replicas), its ungranted placements are
// counted apart (Provider.Tentative) and indexed (jobtent/), and the
// offer index carries them.
const StateVersion = 3

// CheckStateVersion refuses a state written by a gpunet whose state layout
// differs from this one's.
func CheckStateVersion(kv KV) error {
	if ChainID(kv) == "" {
		return nil // empty: genesis will write it
	}
	v := getUint(kv, keyStateVersion)
	if v != StateVersion {
		return fmt.Errorf("state version %d, this node runs version %d: this state was written by another gpunet; start from a new home (a devnet: gpunet devnet --reset), or join the network anew (gpunet init --join)", v, StateVersion)
	}
	return nil
}

// Record versions:
//   - 2 (recordVersionBase): GPUs carry their own measured throughput and
//     serial, hardware challenges name a device, and rulings are kept per
//     device.
//   - 3: the wasm engine a provider declares (ProviderInfo.WasmEngine) and
//     each assignment ran (Assignment.WasmEngine), and why a job waits
//     (Job.WaitCode).
//   - 4: where a job's data was put (Job.DataAt, JobResult.DataAt), its
//     URL-pinned inputs (JobSpec.URLInputs), and the last provider that
//     handed it back (Job.Released); its price tier (JobSpec.Tier) and
//     preemption (Job.Preempted, Job.PreemptWait, Assignment.PreemptAt);
//     its checkpoints (JobSpec.Checkpoint, Job.Checkpoints, Job.ResumeSeq,
//     Job.Progress, Job.CheckpointNote).
//   - 5: the rulings of slow and silent hardware challenges (issue 26):
//     HardwareChallenge.LateBy; ChallengeRecord.Late, Missed,
//     MissesInARow, CPUStrikes, CPURecheck; DeviceProof.Strikes, Recheck.
//   - 6: words out of consensus (issue 28): why a job is where it is as a
//     code and its numbers (Job.Wait, Dropped, CheckpointWait; wait.go),
//     the provider that handed a job back (Job.ReleasedBy), and a slash's
//     code (SlashEvent.Code, Job, Seq, Count, Of). Records of versions 2
//     to 5 keep their sentences (Job.Reason, AuditDropped,
//     CheckpointNote, SlashEvent.Reason), which still decode and render.
//   - 7: ungranted placements hold their slot only tentatively (issue 27):
//     Provider.Tentative counts them, and Provider.Jobs only the slots
//     taken for real.
//     Also in 7: GPU challenges ruled busy, missed while the provider ran
//     GPU work (issue 26): ChallengeRecord.Busy, DeviceProof.Busy.
//   - 8: the label a provider gives itself (ProviderInfo.Label, issue 33).
//     Also in 8: delegation (issue 32): Provider.Delegated, the stake delegators
//     bonded to it.
const (
	recordVersionBase = 2
	recordVersion     = 8 // the newest this node reads and writes
)

// record is a stored record type: a struct the generator gave a codec.
type record interface {
	encodeRec(*encoder)
	decodeRec(*decoder)
	// recVersion is the lowest version that holds every field set.
	recVersion() byte
}

func encodeRecord(r record) []byte {
	v := r.recVersion()
	e := encoder{buf: make([]byte, 0, 512), version: v}
	e.buf = append(e.buf, v)
	r.encodeRec(&e)
	return e.buf
}

func decodeRecord(b []byte, r record) error {
	d, err := recordDecoder(b)
	if err != nil {
		return err
	}
	r.decodeRec(d)
	if err := d.done(); err != nil {
		return err
	}
	if need := r.recVersion(); need != d.version {
		return fmt.Errorf("record encoding version %d, but what it holds is written at version %d: not canonical", d.version, need)
	}
	return nil
}

func recordDecoder(b []byte) (*decoder, error) {
	switch {
	case len(b) == 0:
		return nil, errTruncated
	case b[0] == '{':
		return nil, errors.New("a JSON record from before the binary encoding: this state was written by an older gpunet; start from a new home (a devnet: gpunet devnet --reset)")
	case b[0] < recordVersionBase || b[0] > recordVersion:
		return nil, fmt.Errorf("record encoding version %d, this node reads %d to %d: this state was written by another gpunet; start from a new home (a devnet: gpunet devnet --reset)", b[0], recordVersionBase, recordVersion)
	}
	return &decoder{buf: b, off: 1, version: b[0]}, nil
}

// CheckRecordEncoding reads the first provider and the first job record of
// a stored state, so that a node opening a state written by an
// incompatible gpunet says so at start, not at the first block that reads
// a record.
func CheckRecordEncoding(kv KV) error {
	if err := CheckStateVersion(kv); err != nil {
		return err
	}
	var err error
	for _, c := range []struct {
		prefix []byte
		what   string
		rec    record
	}{{prefixProvider, "provider", &Provider{}}, {prefixJob, "job", &Job{}}} {
		kv.Iterate(c.prefix, prefixEnd(c.prefix), func(k, v []byte) bool {
			if e := decodeRecord(v, c.rec); e != nil {
				err = fmt.Errorf("%s record %x: %w", c.what, k, e)
			}
			return false
		})
		if err != nil {
			return err
		}
	}
	return nil
}
