package blob

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/address"
)

func TestAllowanceFor(t *testing.T) {
	for _, tc := range []struct {
		held, perGiB uint64
		want         int64
	}{
		{0, 0, 0},
		{1, 0, 0},                                // dust: nothing
		{976, 0, 0},                              // 999,424 bytes: less than a MiB
		{977, 0, 1 << 20},                        // the price of a MiB
		{1_000, 0, 1 << 20},                      // 1.024 MiB, rounded down
		{1_000_000, 0, 1 << 30},                  // 1 SYNC: 1 GiB
		{16_000_000, 0, 16 << 30},                // 16 SYNC: 16 GiB
		{1_000_000, 1_000, 1000 << 30},           // a cheaper node
		{3, 1024, 3 << 20},                       // a usync a MiB
		{^uint64(0), 1, (1<<63 - 1) >> 20 << 20}, // saturates
	} {
		if got := AllowanceFor(tc.held, tc.perGiB); got != tc.want {
			t.Errorf("AllowanceFor(%d, %d) = %d, want %d", tc.held, tc.perGiB, got, tc.want)
		}
	}
	// Splitting tokens over accounts buys nothing more.
	for _, held := range []uint64{1, 999, 1_000, 123_456_789} {
		for _, n := range []uint64{2, 4, 1000} {
			if split, whole := int64(n)*AllowanceFor(held, 0), AllowanceFor(n*held, 0); split > whole {
				t.Errorf("%d accounts holding %d usync each get %d bytes, one holding %d gets %d", n, held, split, n*held, whole)
			}
		}
	}
}

// ledgerAllowance prices room as a node does, from what each account
// holds.
func ledgerAllowance(held map[address.Address]uint64) func(address.Address) (Allowance, error) {
	return func(a address.Address) (Allowance, error) {
		return Allowance{Bytes: AllowanceFor(held[a], 0), Basis: fmt.Sprintf("it holds %d usync", held[a])}, nil
	}
}

// Four dust accounts (1 usync each: before, enough for 16 GiB each) store
// nothing, streamed or declared, and their refusal says why; an account
// holding 1 SYNC stores what it is allowed.
func TestDustAccountsStoreNothing(t *testing.T) {
	held := map[address.Address]uint64{}
	var dust []testKey
	for i := range 4 {
		k := newTestKey(byte(10 + i))
		dust = append(dust, k)
		held[k.addr()] = 1
	}
	funded := newTestKey(1)
	held[funded.addr()] = 1_000_000
	s, srv := allowanceGateway(t, Quota{}, ledgerAllowance(held))
	path := t.TempDir() + "/input"
	writeFile(t, path, strings.Repeat("i", 512<<10))
	for _, k := range dust {
		c := NewClient(srv.URL)
		c.Signer = k
		_, _, err := c.Put(t.Context(), strings.NewReader("x"))
		var ge *GatewayError
		if !errors.Is(err, ErrQuota) || !errors.As(err, &ge) || ge.StatusCode != http.StatusForbidden || !strings.Contains(ge.Message, "may hold 0 bytes") || !strings.Contains(ge.Message, "it holds 1 usync") {
			t.Errorf("dust account %s, streamed: %v, want 403 quota_exceeded saying it may hold nothing and why", k.addr(), err)
		}
		if _, _, err := c.PutFile(t.Context(), path); !errors.Is(err, ErrQuota) {
			t.Errorf("dust account %s, 512 KiB declared: %v, want 403 quota_exceeded", k.addr(), err)
		}
	}
	if n, bytes, err := s.Usage(); err != nil || n != 0 || bytes != 0 {
		t.Fatalf("store after the dust accounts: %d blobs, %d bytes (%v), want nothing", n, bytes, err)
	}
	c := NewClient(srv.URL)
	c.Signer = funded
	if _, _, err := c.PutFile(t.Context(), path); err != nil {
		t.Fatalf("the funded account's upload: %v", err)
	}
	if u := s.UsageOf(funded.addr()); u.Bytes != 512<<10 {
		t.Errorf("funded account's usage %+v, want its 512 KiB", u)
	}
}

// The uploads no job references, of all accounts together, stay within
// Quota.NodeBytes: past it an upload is refused with 507 (before its body
// when declared), a blob two accounts uploaded counts once, the node's
// token is not bounded, and room comes back when a job references a blob.
func TestGatewayBoundsUnreferencedUploads(t *testing.T) {
	alice, bob := newTestKey(1), newTestKey(2)
	s, srv := authGateway(t, Quota{Bytes: 4000, NodeBytes: 3000}, alice.addr(), bob.addr())
	put := func(k testKey, data string) (Hash, error) {
		c := NewClient(srv.URL)
		c.Signer = k
		h, _, err := c.Put(t.Context(), strings.NewReader(data))
		return h, err
	}
	a, err := put(alice, strings.Repeat("a", 1000))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := put(bob, strings.Repeat("a", 1000)); err != nil { // alice's blob: no more room taken
		t.Fatalf("bob uploading alice's blob again: %v", err)
	}
	if _, err := put(bob, strings.Repeat("b", 2000)); err != nil {
		t.Fatalf("bob's upload: %v", err)
	}
	if got, arriving := s.Unreferenced(); got != 3000 || arriving != 0 {
		t.Fatalf("unreferenced %d (+%d arriving), want 3000: a blob counts once", got, arriving)
	}
	_, err = put(alice, "one byte more")
	var ge *GatewayError
	if !errors.Is(err, ErrNoSpace) || !errors.As(err, &ge) || ge.StatusCode != http.StatusInsufficientStorage ||
		!strings.Contains(ge.Message, "at most 3000 bytes of uploads that no job references") {
		t.Errorf("streamed upload past the node's bound: %v, want 507 naming the bound", err)
	}
	path := t.TempDir() + "/f"
	writeFile(t, path, "declared")
	c := NewClient(srv.URL)
	c.Signer = alice
	if _, _, err := c.PutFile(t.Context(), path); !errors.Is(err, ErrNoSpace) {
		t.Errorf("declared upload past the node's bound: %v, want 507 before the body", err)
	}
	tok := NewClient(srv.URL)
	tok.Token = "sekrit"
	if _, _, err := tok.Put(t.Context(), strings.NewReader("the operator's")); err != nil {
		t.Errorf("token upload: %v", err)
	}
	// A job references alice's blob: it leaves the bound.
	if n := s.Release(func(h Hash) bool { return h == a }); n != 1 {
		t.Fatalf("released %d blobs, want 1", n)
	}
	if _, err := put(alice, "room again"); err != nil {
		t.Errorf("upload after a blob was released: %v", err)
	}
	if got, _ := s.Unreferenced(); got != 2000+int64(len("room again")) {
		t.Errorf("unreferenced %d after the release, want bob's 2000 and the new upload", got)
	}
}

// Evict takes back, oldest first, what an account keeps beyond what it
// may, and deletes a blob only when nobody else keeps it.
func TestEvictTakesBackWhatIsNotPaidFor(t *testing.T) {
	alice, bob := newTestKey(1), newTestKey(2)
	s, srv := authGateway(t, Quota{}, alice.addr(), bob.addr())
	put := func(k testKey, data string) Hash {
		t.Helper()
		c := NewClient(srv.URL)
		c.Signer = k
		h, _, err := c.Put(t.Context(), strings.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	oldest, inJob, shared, newest := put(alice, "oldest"), put(alice, "a job's input"), put(alice, "shared"), put(alice, "newest")
	put(bob, "shared")
	tok := NewClient(srv.URL)
	tok.Token = "sekrit"
	if _, _, err := tok.Put(t.Context(), strings.NewReader("newest")); err != nil { // the operator put it again
		t.Fatal(err)
	}
	referenced := func(h Hash) bool { return h == inJob }
	res := s.Evict(alice.addr(), int64(len("newest")), referenced)
	if res.Dropped != 3 || res.Deleted != 1 || res.FreedBytes != int64(len("oldest")) {
		t.Errorf("evict %+v, want 3 records dropped, only the oldest blob deleted", res)
	}
	if u := s.UsageOf(alice.addr()); u.Blobs != 1 || u.Bytes != int64(len("newest")) {
		t.Errorf("alice's usage %+v, want only her newest upload", u)
	}
	for h, want := range map[Hash]bool{oldest: false, inJob: true, shared: true, newest: true} {
		if _, err := s.Stat(h); (err == nil) != want {
			t.Errorf("blob %s stored: %v, want %v", h, err == nil, want)
		}
	}
	if u := s.UsageOf(bob.addr()); u.Blobs != 1 {
		t.Errorf("bob's usage %+v, want his upload of the shared blob kept", u)
	}
	res = s.Evict(alice.addr(), 0, referenced)
	if res.Dropped != 1 || res.Deleted != 0 {
		t.Errorf("evicting the blob the operator put again: %+v, want the record dropped and the blob kept", res)
	}
	if got, _ := s.Unreferenced(); got != int64(len("shared")) {
		t.Errorf("unreferenced %d, want bob's shared blob alone", got)
	}
}
