package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/blob"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
	"github.com/gpunet/gpunet/internal/validator"
)

// startNodeWith runs a real single-validator chain in-process from g,
// with its config changed by edit (if not nil).
func startNodeWith(t *testing.T, g ledger.Genesis, edit func(*validator.Config)) *Daemon {
	t.Helper()
	home := t.TempDir()
	if _, err := validator.Init(home, validator.InitOptions{ChainID: lt.ChainID, Validators: 1, Genesis: g, BlockTime: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		cfg, err := validator.LoadConfig(home)
		if err != nil {
			t.Fatal(err)
		}
		edit(cfg)
		if err := validator.SaveConfig(home, cfg); err != nil {
			t.Fatal(err)
		}
	}
	d, err := Start(t.Context(), home, Options{APIAddr: "127.0.0.1:0", CheckInvariants: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return d
}

// sparseFile makes a file of size bytes, distinct by its first byte,
// without writing them.
func sparseFile(t *testing.T, first byte, size int64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "blob")
	if err := os.WriteFile(path, []byte{first}, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
	return path
}

// The attack of issue 27: four accounts holding 1 usync each stored 1 GiB
// in a node (the quota was 16 GiB an account, whatever it held). Now each
// is refused before its body, and an account holding 1 SYNC may keep
// 1 GiB, at the node's default price.
func TestNodeDustAccountsCannotStore(t *testing.T) {
	g := lt.Genesis(1, "dust0", "dust1", "dust2", "dust3")
	g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: alice.Addr, Balance: 1_000_000})
	d := startNodeWith(t, g, nil)
	for i := range 4 {
		c := blob.NewClient(d.APIURL)
		c.Signer = signer{lt.NewKey(fmt.Sprint("dust", i))}
		_, _, err := c.PutFile(t.Context(), sparseFile(t, byte(i), 256<<20))
		var ge *blob.GatewayError
		if !errors.Is(err, blob.ErrQuota) || !errors.As(err, &ge) || ge.StatusCode != http.StatusForbidden || !strings.Contains(ge.Message, "holds 0.000001 SYNC") {
			t.Errorf("dust account %d storing 256 MiB: %v, want 403 quota_exceeded saying what it holds", i, err)
		}
	}
	st, err := chainclient.New(d.APIURL).Storage(t.Context(), &alice.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if st.Blobs != 0 || st.Bytes != 0 {
		t.Errorf("the node stores %d blobs, %d bytes after the dust accounts' uploads, want none", st.Blobs, st.Bytes)
	}
	if st.Account == nil || st.Account.QuotaBytes != 1<<30 {
		t.Errorf("alice's quota: %+v, want 1 GiB for her 1 SYNC", st.Account)
	}
	c := blob.NewClient(d.APIURL)
	c.Signer = signer{alice}
	if _, _, err := c.PutFile(t.Context(), sparseFile(t, 'a', 1<<20)); err != nil {
		t.Errorf("alice's 1 MiB upload: %v", err)
	}
	if _, _, err := c.PutFile(t.Context(), sparseFile(t, 'b', 1<<30)); !errors.Is(err, blob.ErrQuota) {
		t.Errorf("alice's 1 GiB upload on top of her 1 MiB: %v, want 403 quota_exceeded before the body", err)
	}
}

// A node keeps at most its blob_unreferenced_max_bytes of uploads that no
// job references, whoever uploads them; its blob_usync_per_gib sets what
// an account must hold for its room.
func TestNodeBoundsUnreferencedUploads(t *testing.T) {
	g := lt.Genesis(1_000, "alice", "bob") // 1,000 usync: 1 MiB at the default price
	d := startNodeWith(t, g, func(c *validator.Config) {
		c.BlobUnreferencedMaxBytes = 3 << 20
		c.BlobUSyncPerGiB = 1 << 10 // 1 usync a MiB: 1,000 MiB each
	})
	put := func(k lt.Key, first byte) error {
		c := blob.NewClient(d.APIURL)
		c.Signer = signer{k}
		_, _, err := c.PutFile(t.Context(), sparseFile(t, first, 1<<20))
		return err
	}
	for i, k := range []lt.Key{alice, alice, bob} {
		if err := put(k, byte(i)); err != nil {
			t.Fatalf("upload %d: %v", i, err)
		}
	}
	err := put(bob, 'x')
	var ge *blob.GatewayError
	if !errors.Is(err, blob.ErrNoSpace) || !errors.As(err, &ge) || ge.StatusCode != http.StatusInsufficientStorage || !strings.Contains(ge.Message, "3145728 bytes of uploads that no job references") {
		t.Errorf("an upload past the node's bound: %v, want 507 naming it", err)
	}
	st, err := chainclient.New(d.APIURL).Storage(t.Context(), &bob.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if st.UnreferencedBytes != 3<<20 || st.UnreferencedMaxBytes != 3<<20 || st.USyncPerGiB != 1<<10 || st.Account == nil || st.Account.QuotaBytes != 1000<<20 || st.Account.Held != 1_000 {
		t.Errorf("storage: %+v %+v", st, st.Account)
	}
}

// Tokens moved from account to account buy room once: an account that no
// longer holds what pays for its uploads loses the oldest ones at the
// next check, except those a job references now (its escrow still counts
// for the rest).
func TestMovedTokensBuyRoomOnce(t *testing.T) {
	c := lt.NewChain(t, lt.Genesis(40, "alice", "bob"))
	view := func() (ledger.KV, func()) { return c.KV, func() {} }
	s, err := blob.OpenStore(t.TempDir(), 2<<20)
	if err != nil {
		t.Fatal(err)
	}
	const perGiB = 10 << 10 // 10 usync a MiB: alice's 40 buy 4 MiB
	k := &blobKeeper{store: s, view: view, retention: time.Hour, quota: blob.Quota{Bytes: blob.DefaultQuotaBytes, Blobs: blob.DefaultQuotaBlobs, NodeBytes: -1},
		allowance: blobAllowance(view, perGiB), perGiB: perGiB, log: slog.New(slog.DiscardHandler)}
	gw := blob.NewGateway(s, blob.GatewayOptions{Auth: &blob.Auth{Quota: k.quota, Allowance: k.allowance}})
	mux := http.NewServeMux()
	mux.Handle("/v1/blobs", gw)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	up := blob.NewClient(srv.URL)
	up.Signer = signer{alice}
	var hs []blob.Hash
	for i := range 3 {
		h, _, err := up.PutFile(t.Context(), sparseFile(t, byte(i), 1<<20))
		if err != nil {
			t.Fatalf("upload %d: %v", i, err)
		}
		hs = append(hs, h)
	}
	// A job names the second upload, escrowing part of alice's tokens;
	// she sends the rest to bob.
	spec := lt.WasmJob("j", 1000, 60)
	if r := c.ApplyBlock(t, alice.Tx(lt.ChainID, 0, 0, &ledger.MsgSubmitJob{Spec: spec, InputBlob: hs[1].String(), ConsumerKey: lt.AgeKey("alice")})); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	left := c.Balance(t, alice.Addr)
	if r := c.ApplyBlock(t, alice.Send(1, bob.Addr, left)); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	escrow := ledger.JobEscrow(&spec, ledger.DefaultParams())
	if want := blob.AllowanceFor(escrow, perGiB); want != 1<<20 {
		t.Fatalf("alice's escrow of %d usync buys %d bytes; the test wants 1 MiB", escrow, want)
	}
	k.enforceAllowances(time.Now())
	if u := s.UsageOf(alice.Addr); u.Blobs != 1 || u.Bytes != 1<<20 {
		t.Errorf("alice's usage %+v, want her newest upload alone (what her escrow pays for)", u)
	}
	for i, want := range []bool{false, true, true} {
		if _, err := s.Stat(hs[i]); (err == nil) != want {
			t.Errorf("upload %d stored: %v, want %v", i, err == nil, want)
		}
	}
	// Bob's new tokens buy him room; alice's are gone from her.
	if al, err := k.allowance(bob.Addr); err != nil || al.Bytes != blob.AllowanceFor(40+left, perGiB) {
		t.Errorf("bob's allowance %+v %v", al, err)
	}
	var none address.Address
	if al, err := k.allowance(none); err != nil || al.Bytes != 0 || !strings.Contains(al.Basis, "holds 0 SYNC") {
		t.Errorf("an unknown account's allowance %+v %v, want nothing, saying why", al, err)
	}
}
