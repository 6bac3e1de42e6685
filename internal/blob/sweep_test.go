package blob

import (
	"os"
	"strings"
	"testing"
	"time"
)

// Blobs no job references are collected once their grace period has
// passed; referenced ones are kept and stop counting against the quota of
// the account that uploaded them; blobs still in their grace are kept.
func TestSweepCollectsUnreferenced(t *testing.T) {
	alice := newTestKey(1)
	s, srv := authGateway(t, Quota{}, alice.addr())
	c := NewClient(srv.URL)
	c.Signer = alice
	put := func(data string) Hash {
		h, _, err := c.Put(t.Context(), strings.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	orphan, input, fresh := put("uploaded, never used"), put("a job's input"), put("just uploaded")
	old := time.Now().Add(-7 * time.Hour)
	for _, h := range []Hash{orphan, input} {
		os.Chtimes(s.path(h), old, old)
		os.Chtimes(s.ownersDir()+"/"+alice.addr().String()+"/"+h.Hex(), old, old)
	}
	s2, err := OpenStore(s.Dir(), 1<<20) // reload the records with their old times
	if err != nil {
		t.Fatal(err)
	}
	res, err := s2.Sweep(func(h Hash) bool { return h == input }, time.Now().Add(-DefaultSweepGrace))
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != 1 || res.Kept != 2 || res.Released != 1 {
		t.Errorf("sweep %+v, want 1 deleted, 2 kept, 1 released", res)
	}
	if _, err := s2.Stat(orphan); err == nil {
		t.Errorf("the unreferenced blob past its grace is still stored")
	}
	for _, h := range []Hash{input, fresh} {
		if _, err := s2.Stat(h); err != nil {
			t.Errorf("blob %s: %v, want it kept", h, err)
		}
	}
	if u := s2.UsageOf(alice.addr()); u.Blobs != 1 || u.Bytes != int64(len("just uploaded")) {
		t.Errorf("alice's usage after the sweep %+v, want only the fresh blob", u)
	}
}
