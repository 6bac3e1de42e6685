package ledger

import (
	"bytes"
	"slices"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
)

func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct{ p, want []byte }{
		{[]byte("jobprov/"), []byte("jobprov0")},
		{[]byte{'a', 0xFF}, []byte{'b'}},
		{[]byte{'a', 0xFE, 0xFF, 0xFF}, []byte{'a', 0xFF}},
		{[]byte{0xFF, 0xFF}, nil},
	} {
		if got := PrefixEnd(c.p); !bytes.Equal(got, c.want) || (c.want == nil) != (got == nil) {
			t.Errorf("PrefixEnd(%x) = %x, want %x", c.p, got, c.want)
		}
	}
}

// TestIndexOfAddressEndingInFF: the per-address indexes (a provider's
// jobs, an owner's jobs, …) are read with a prefix scan ending at
// PrefixEnd. For the 1 in 256 addresses whose last byte is 0xFF that end
// wrapped to below the start, the scan read nothing, and such a provider
// never saw the jobs assigned to it.
func TestIndexOfAddressEndingInFF(t *testing.T) {
	kv := NewMemKV()
	var ff, next address.Address
	ff[0], ff[address.Len-1] = 0x17, 0xFF
	next[0], next[address.Len-1] = 0x18, 0x00
	o := NewOverlay(kv)
	for _, id := range []uint64{3, 1, 2} {
		o.Set(jobProvKey(ff, id), []byte{1})
	}
	o.Set(jobProvKey(next, 9), []byte{1})
	kv.Apply(o.Changes())
	for _, r := range []KV{kv, NewOverlay(kv)} {
		if got := ActiveJobsOf(r, ff); !slices.Equal(got, []uint64{1, 2, 3}) {
			t.Fatalf("ActiveJobsOf(%x) = %v, want [1 2 3]", ff[:], got)
		}
		if !hasActiveJobs(r, ff) {
			t.Fatalf("hasActiveJobs(%x) = false", ff[:])
		}
		if got := ActiveJobsOf(r, next); !slices.Equal(got, []uint64{9}) {
			t.Fatalf("ActiveJobsOf(%x) = %v, want [9]", next[:], got)
		}
	}
}
