package ledger

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/gpunet/gpunet/internal/ledger/sched"
)

// A class summary (the value of pcls/<class>) counts the class's index
// entries and keeps, for the GPU constraints a job can set, a histogram of
// what the entries offer: their largest VRAM, their highest compute
// capability, and how many GPUs of the class they have, each in coarse
// buckets (sched.Caps, sched.VRAMBucket and its siblings). Placement reads
// each histogram's top bucket (sched.ClassSummary): a job whose need lies
// above it skips the class without scanning it.
// Like the index, summaries are derived from the provider records, are not
// in the app hash, and are rebuilt and compared by CheckInvariants.

type bucketCount struct{ bucket, n uint64 }

type classSummary struct {
	entries uint64
	// vram, computeCap and gpus are histograms of the entries' buckets
	// (sched.Caps), sorted by bucket, without zero counts.
	vram, computeCap, gpus []bucketCount
}

// top is what placement reads of the summary of class.
func (s *classSummary) top(class string) sched.ClassSummary {
	return sched.ClassSummary{Class: class, Offers: s.entries, Top: sched.Caps{VRAM: topBucket(s.vram), ComputeCap: topBucket(s.computeCap), GPUs: topBucket(s.gpus)}}
}

func topBucket(h []bucketCount) uint64 {
	if len(h) == 0 {
		return 0
	}
	return h[len(h)-1].bucket
}

func (s *classSummary) add(c sched.Caps, d int) {
	if d < 0 {
		s.entries--
	} else {
		s.entries++
	}
	s.vram = adjustBucket(s.vram, c.VRAM, d)
	s.computeCap = adjustBucket(s.computeCap, c.ComputeCap, d)
	s.gpus = adjustBucket(s.gpus, c.GPUs, d)
}

func adjustBucket(h []bucketCount, bucket uint64, d int) []bucketCount {
	i, found := slices.BinarySearchFunc(h, bucket, func(b bucketCount, t uint64) int {
		switch {
		case b.bucket < t:
			return -1
		case b.bucket > t:
			return 1
		}
		return 0
	})
	switch {
	case found && d < 0 && h[i].n == 1:
		return slices.Delete(h, i, i+1)
	case found && d < 0:
		h[i].n--
	case found:
		h[i].n++
	case d > 0:
		h = slices.Insert(h, i, bucketCount{bucket, 1})
	}
	// Removing from a bucket that is not there cannot happen while the
	// index and the summaries agree (an invariant); it is ignored.
	return h
}

const classSummaryVersion = 1

func (s *classSummary) encode() []byte {
	b := []byte{classSummaryVersion}
	b = binary.AppendUvarint(b, s.entries)
	for _, h := range [][]bucketCount{s.vram, s.computeCap, s.gpus} {
		b = binary.AppendUvarint(b, uint64(len(h)))
		for _, bc := range h {
			b = binary.AppendUvarint(b, bc.bucket)
			b = binary.AppendUvarint(b, bc.n)
		}
	}
	return b
}

// maxBuckets bounds a histogram a decoder accepts: the bucket functions
// give at most 2×64 distinct VRAM buckets.
const maxBuckets = 130

func decodeClassSummary(class string, v []byte) (classSummary, error) {
	var s classSummary
	bad := func(what string) (classSummary, error) {
		return classSummary{}, fmt.Errorf("class summary of %q: corrupt (%s): %w", class, what, ErrInternal)
	}
	if len(v) < 1 || v[0] != classSummaryVersion {
		return bad("version")
	}
	d := decoder{buf: v, off: 1}
	s.entries = d.uvarint("entries")
	for _, h := range []*[]bucketCount{&s.vram, &s.computeCap, &s.gpus} {
		n := d.uvarint("histogram length")
		if n > maxBuckets {
			return bad("histogram length")
		}
		for range n {
			bc := bucketCount{d.uvarint("bucket"), d.uvarint("count")}
			if d.err != nil {
				break
			}
			if bc.n == 0 || (len(*h) > 0 && (*h)[len(*h)-1].bucket >= bc.bucket) {
				return bad("histogram order")
			}
			*h = append(*h, bc)
		}
	}
	if err := d.done(); err != nil {
		return bad(err.Error())
	}
	return s, nil
}

func classSummaryKey(class []byte) []byte {
	return append(slices.Clone(prefixClassCount), class...)
}

// classOfIndexKey is the class part of pidx/<class>/<price>/<address>.
func classOfIndexKey(indexKey []byte) []byte {
	rest := indexKey[len(prefixProviderIndex):]
	return rest[:bytes.IndexByte(rest, '/')]
}

// getClassSummary reads a class's summary (zero if it has no entries).
func getClassSummary(kv KV, class []byte) (classSummary, error) {
	v := kv.Get(classSummaryKey(class))
	if v == nil {
		return classSummary{}, nil
	}
	return decodeClassSummary(string(class), v)
}

// adjustClassSummary adds (d > 0) or removes an index entry from its
// class's summary. A corrupt summary panics: the block fails and the node
// halts, as for a corrupt provider record.
func adjustClassSummary(o *Overlay, e indexEntry, d int) {
	class := classOfIndexKey(e.Key)
	s, err := getClassSummary(o, class)
	if err != nil {
		panic(err)
	}
	s.add(e.caps, d)
	if s.entries == 0 {
		o.Delete(classSummaryKey(class))
	} else {
		o.Set(classSummaryKey(class), s.encode())
	}
}
