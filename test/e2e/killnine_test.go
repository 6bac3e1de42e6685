package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/devnet"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/validator"
)

// TestKillNineRestart SIGKILLs a devnet at random moments while transfers
// stream in, restarts it each time, and checks that nothing committed is
// lost or changed: heights never go back, app hashes per height never
// change, every transfer reported included survives, and the balances add
// up exactly.
func TestKillNineRestart(t *testing.T) {
	parallel(t, weightLight)
	const rounds = 4
	home := t.TempDir()
	book := newHashBook()

	dn, info := startDevnet(t, home, "--block-time", "100ms")
	if !info.Created {
		t.Fatalf("first devnet start: created=false on an empty home")
	}
	kr, err := keys.Open(filepath.Join(home, "keyring"))
	if err != nil {
		t.Fatal(err)
	}
	alice, err := kr.Get("alice")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := address.Parse(info.addr(t, "bob"))
	if err != nil {
		t.Fatal(err)
	}

	var api atomic.Pointer[string] // the devnet's API, new at each start
	setAPI := func(url string) { api.Store(&url) }
	setAPI(info.API)
	w := watch(t, book, "run0", info.API)
	waitUntil(t, 30*time.Second, "the devnet's first blocks", func() bool { return book.maxHeight() >= 2 })
	s := startSender(t, info.ChainID, alice, bob, &api)

	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed>>7))
	for round := 1; round <= rounds; round++ {
		time.Sleep(200*time.Millisecond + time.Duration(rng.Int64N(int64(1300*time.Millisecond))))
		dn.kill()
		w.stop()
		before := book.maxHeight()

		dn, info = startDevnet(t, home, "--block-time", "100ms")
		if info.Created {
			t.Fatalf("round %d: devnet re-created the chain instead of resuming it", round)
		}
		setAPI(info.API)
		w = watch(t, book, fmt.Sprintf("run%d", round), info.API)
		waitUntil(t, 30*time.Second, "the restarted devnet's status", func() bool { return w.firstHeight() >= 0 })
		first := w.firstHeight()
		if first < before {
			t.Fatalf("round %d: height %d after restart, but %d was reported before the kill", round, first, before)
		}
		st := status(t, "--home", home)
		if st.Height < before || st.ChainID != devnet.ChainID || st.API != info.API {
			t.Fatalf("round %d: status after restart %+v: want height ≥ %d, chain %s, api %s", round, st, before, devnet.ChainID, info.API)
		}
		waitUntil(t, 30*time.Second, "blocks after the restart", func() bool { return book.maxHeight() >= first+3 })
		book.check(t)
		t.Logf("round %d: killed at height ≥ %d, restarted at %d, %d transfers confirmed so far", round, before, first, s.confirmedCount())
	}
	s.stop()
	book.check(t)

	// Every app hash seen through status is the one the chain committed to:
	// block h+1's header carries the app hash of the state after block h.
	c, err := validator.LoadConfig(home)
	if err != nil {
		t.Fatal(err)
	}
	now := status(t, "--home", home).Height
	for h, hash := range book.heights() {
		if h >= 1 && h+1 <= now {
			if got := headerAppHash(t, c.RPC, h+1); got != hash {
				t.Errorf("height %d: status reported app hash %s, block %d's header has %s", h, hash, h+1, got)
			}
		}
	}

	// Balances: alice's sequence counts her included transfers; the one
	// at sequence n moves amountFor(n), whichever attempt carried it. The
	// transfer in flight when the sender stopped may still land: read once
	// alice's account and bob's balance are at one height.
	var acct accountJSON
	var bobBal uint64
	waitUntil(t, 30*time.Second, "alice's account and bob's balance at one height", func() bool {
		gpunetJSON(t, &acct, "query", "account", "alice", "--home", home)
		var b balanceJSON
		gpunetJSON(t, &b, "query", "balance", "bob", "--home", home)
		bobBal = b.Balance
		return b.Height == acct.Height
	})
	var moved uint64
	for n := uint64(0); n < acct.Sequence; n++ {
		moved += amountFor(n)
	}
	if acct.Balance+bobBal != 2*devnet.DevBalance {
		t.Errorf("supply: alice %d + bob %d = %d usync, want %d", acct.Balance, bobBal, acct.Balance+bobBal, 2*devnet.DevBalance)
	}
	if bobBal != devnet.DevBalance+moved {
		t.Errorf("bob has %d usync, want %d + %d moved by alice's %d included transfers", bobBal, devnet.DevBalance, moved, acct.Sequence)
	}
	confirmed, problems := s.result()
	for _, p := range problems {
		t.Error(p)
	}
	var confirmedSum uint64
	for _, n := range confirmed {
		confirmedSum += amountFor(n)
		if n >= acct.Sequence {
			t.Errorf("transfer with sequence %d was reported included but is lost: alice's sequence is %d", n, acct.Sequence)
		}
	}
	// A transfer whose answer a kill cut off may have landed unreported; the
	// sender has one transfer in flight at a time, so at most one per kill,
	// and one more when it stopped.
	unconfirmed := int(acct.Sequence) - len(confirmed)
	if unconfirmed < 0 || unconfirmed > rounds+1 {
		t.Errorf("%d transfers included, %d reported included: want at most %d (one per kill and the last) unreported; unconfirmed:\n%s",
			acct.Sequence, len(confirmed), rounds+1, strings.Join(s.failed, "\n"))
	}
	if bobBal < devnet.DevBalance+confirmedSum {
		t.Errorf("bob has %d usync, less than the %d reported sent to him", bobBal-devnet.DevBalance, confirmedSum)
	}
	if len(confirmed) < rounds {
		t.Errorf("only %d transfers confirmed over %d rounds: the sender made too little progress to test anything", len(confirmed), rounds)
	}
	t.Logf("%d transfers included (%d reported, %d in flight at a kill or the end), %d usync moved; %d heights' app hashes seen both before and after a restart",
		acct.Sequence, len(confirmed), unconfirmed, moved, book.compared)
}

// amountFor is the amount of alice's transfer with sequence n, distinct per
// sequence so that the balances tell which transfers were applied.
func amountFor(n uint64) uint64 { return 1000 + n }

// sender streams alice→bob transfers, one at a time, each signed with the
// account's next sequence, through whichever API *api points at.
type sender struct {
	cancel    context.CancelFunc
	done      chan struct{}
	mu        sync.Mutex
	confirmed map[uint64]int64 // sequence → height the API reported it included at
	problems  []string
	failed    []string // transfers sent but not confirmed
}

func startSender(t testing.TB, chainID string, from *keys.Key, to address.Address, api *atomic.Pointer[string]) *sender {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sender{cancel: cancel, done: make(chan struct{}), confirmed: map[uint64]int64{}}
	go func() {
		defer close(s.done)
		for ctx.Err() == nil {
			if !s.sendOne(ctx, chainclient.New(*api.Load()), chainID, from, to) {
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
	}()
	t.Cleanup(s.stop)
	return s
}

// sendOne sends one transfer and reports whether it was confirmed.
func (s *sender) sendOne(ctx context.Context, cl *chainclient.Client, chainID string, from *keys.Key, to address.Address) bool {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	acct, err := cl.Account(ctx, from.Address)
	if err != nil {
		return false
	}
	n := acct.Sequence
	tx := &ledger.Tx{ChainID: chainID, Sequence: n, Msg: &ledger.MsgSend{To: to, Amount: ledger.Amount(amountFor(n))}}
	if err := tx.Sign(from.PrivateKey()); err != nil {
		panic(err)
	}
	raw, err := tx.Encode()
	if err != nil {
		panic(err)
	}
	res, err := cl.BroadcastTx(ctx, raw, true)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || res.Code != 0 || res.Height <= 0 {
		s.failed = append(s.failed, fmt.Sprintf("%s sequence %d: %+v %v", time.Now().Format("15:04:05.000"), n, res, err))
		return false
	}
	if h, dup := s.confirmed[n]; dup {
		s.problems = append(s.problems, fmt.Sprintf("sequence %d reported included twice, at heights %d and %d", n, h, res.Height))
	}
	s.confirmed[n] = res.Height
	return true
}

func (s *sender) stop() {
	s.cancel()
	<-s.done
}

func (s *sender) confirmedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.confirmed)
}

// result returns the confirmed sequences, ascending, and any problems seen.
func (s *sender) result() ([]uint64, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ns []uint64
	for n := range s.confirmed {
		ns = append(ns, n)
	}
	sort.Slice(ns, func(i, j int) bool { return ns[i] < ns[j] })
	return ns, s.problems
}

// headerAppHash returns the app hash in block h's header, from CometBFT's
// own RPC at rpc (host:port).
func headerAppHash(t testing.TB, rpc string, h int64) string {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://%s/header?height=%d", rpc, h))
	if err != nil {
		t.Fatalf("cometbft rpc: %v", err)
	}
	defer resp.Body.Close()
	var body struct {
		Result struct {
			Header struct {
				AppHash string `json:"app_hash"`
			} `json:"header"`
		} `json:"result"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Result.Header.AppHash == "" {
		t.Fatalf("cometbft rpc header %d: %v %s", h, err, body.Error)
	}
	return body.Result.Header.AppHash
}
