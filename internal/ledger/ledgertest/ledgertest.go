// Package ledgertest builds ledger states, keys and signed txs for tests,
// and applies whole blocks in memory with the invariants checked after each.
package ledgertest

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

// ChainID is the chain id of test chains.
const ChainID = "gpunet-test"

// Key is a deterministic test key.
type Key struct {
	Priv ed25519.PrivateKey
	Addr address.Address
}

// NewKey derives a key from a name, so tests get the same addresses on
// every run.
func NewKey(name string) Key {
	seed := sha256.Sum256([]byte("ledgertest/" + name))
	priv := ed25519.NewKeyFromSeed(seed[:])
	return Key{Priv: priv, Addr: address.FromPubKey(priv.Public().(ed25519.PublicKey))}
}

// Send returns a signed transfer.
func (k Key) Send(seq uint64, to address.Address, amount uint64) []byte {
	return k.Tx(ChainID, seq, 0, &ledger.MsgSend{To: to, Amount: ledger.Amount(amount)})
}

// Tx returns a signed tx with any envelope fields.
func (k Key) Tx(chainID string, seq, fee uint64, msg ledger.Msg) []byte {
	tx := &ledger.Tx{ChainID: chainID, Sequence: seq, Fee: fee, Msg: msg}
	if err := tx.Sign(k.Priv); err != nil {
		panic(err)
	}
	raw, err := tx.Encode()
	if err != nil {
		panic(err)
	}
	return raw
}

// Chain is an in-memory chain: a committed state and the blocks applied to it.
type Chain struct {
	L      ledger.Ledger
	KV     *ledger.MemKV
	Height int64
	Hash   []byte
	// Offset is added to every later block's time (see Advance).
	Offset time.Duration
	// Updates are the validator set changes of the last block, Events its
	// own events (its txs' are in their results).
	Updates []ledger.ValidatorUpdate
	Events  []ledger.Event
}

// Advance moves the chain's clock forward: later blocks are d later.
func (c *Chain) Advance(d time.Duration) { c.Offset += d }

// Now is the time of the last applied block.
func (c *Chain) Now() time.Time { return BlockTime(c.Height).Add(c.Offset) }

// Genesis returns a genesis that funds each named key with balance usync.
func Genesis(balance uint64, names ...string) ledger.Genesis {
	g := ledger.Genesis{Params: ledger.DefaultParams()}
	g.Params.HWRatePPM = 0 // hardware challenges are tested on their own
	// Builders sign txs with fee 0, and the golden app hashes were taken
	// with no minimum; ledger tests of the fee set one themselves.
	g.Params.MinFee = 0
	for _, n := range names {
		g.Accounts = append(g.Accounts, ledger.GenesisAccount{Address: NewKey(n).Addr, Balance: balance})
	}
	return g
}

// NewChain initialises a chain from g.
func NewChain(tb testing.TB, g ledger.Genesis) *Chain {
	tb.Helper()
	c := &Chain{KV: ledger.NewMemKV()}
	c.L.Txs = NewTxMemo()
	changes, hash, err := c.L.InitGenesis(c.KV, ChainID, g)
	if err != nil {
		tb.Fatalf("genesis: %v", err)
	}
	c.KV.Apply(changes)
	c.Hash = hash
	c.checkInvariants(tb)
	return c
}

// TxMemo is an unbounded ledger.TxCache for tests. Test chains use one, so
// that a tx delivered again (a replay) comes from it, as on a node.
type TxMemo struct {
	mu   sync.Mutex
	txs  map[[32]byte]*ledger.Tx
	hits int
}

// NewTxMemo returns an empty TxMemo.
func NewTxMemo() *TxMemo { return &TxMemo{txs: map[[32]byte]*ledger.Tx{}} }

// Get implements ledger.TxCache.
func (m *TxMemo) Get(key [32]byte) *ledger.Tx {
	m.mu.Lock()
	defer m.mu.Unlock()
	tx := m.txs[key]
	if tx != nil {
		m.hits++
	}
	return tx
}

// Put implements ledger.TxCache.
func (m *TxMemo) Put(key [32]byte, raw []byte, tx *ledger.Tx) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if key != sha256.Sum256(raw) {
		panic("ledgertest: TxMemo.Put: key is not the hash of raw")
	}
	m.txs[key] = tx
}

// Hits is how many times Get found a tx.
func (m *TxMemo) Hits() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hits
}

// BlockTime is the header time of block h in test chains.
func BlockTime(h int64) time.Time { return time.Unix(1_700_000_000+h, 0).UTC() }

// BlockSeed is the seed of block h in test chains.
func BlockSeed(h int64) ledger.Hash {
	return sha256.Sum256([]byte(fmt.Sprintf("ledgertest/seed/%d", h)))
}

// WasmEngine is the wasm engine ProviderInfo declares.
const WasmEngine = "wasmtime-39.0.1/linux-amd64/cranelift-speed/wasi-gpunet-1"

// ProviderInfo returns a valid declaration: count GPUs of class (a
// CPU-only provider when count is 0), priced at pricePerHour usync.
func ProviderInfo(class string, count int, pricePerHour uint64) ledger.ProviderInfo {
	pi := ledger.ProviderInfo{
		Inventory:  ledger.Inventory{CPUCores: 16, CPUModel: "Test CPU", RAM: 64 << 30, Disk: 500 << 30, OS: "linux", Arch: "amd64"},
		Measured:   ledger.Measured{Int8GOPS: 1000, BandwidthMBs: 20000, Device: "cpu"},
		Region:     "eu",
		Executors:  []string{"wasm"},
		WasmEngine: WasmEngine,
		MaxJobs:    4,
	}
	for i := 0; i < count; i++ {
		pi.Inventory.GPUs = append(pi.Inventory.GPUs, ledger.GPUSpec{Class: class, VRAM: 24 << 30, ComputeCap: "8.9"})
	}
	askClass := ledger.CPUClass
	if count > 0 {
		askClass = class
	}
	pi.Asks = []ledger.Ask{{Class: askClass, PricePerHour: ledger.Amount(pricePerHour)}}
	if count > 0 {
		pi.Asks = append(pi.Asks, ledger.Ask{Class: ledger.CPUClass, PricePerHour: ledger.Amount(max(1, pricePerHour/10))})
	}
	key := sha256.Sum256([]byte("enc/" + class))
	pi.EncryptionKey, _ = address.EncodeBech32("age", key[:])
	return pi
}

// ApplyBlock applies txs as the next block, commits it and checks the
// invariants. It returns each tx's result.
func (c *Chain) ApplyBlock(tb testing.TB, txs ...[]byte) []ledger.TxResult {
	tb.Helper()
	return c.ApplyBlockWith(tb, nil, nil, txs...)
}

// ApplyBlockWith is ApplyBlock with the last commit's votes and the
// block's evidence; the block's validator set changes are then in
// c.Updates.
func (c *Chain) ApplyBlockWith(tb testing.TB, votes []ledger.VoteInfo, evidence []ledger.Misbehavior, txs ...[]byte) []ledger.TxResult {
	tb.Helper()
	c.Height++
	b := c.L.BeginBlock(c.KV, ledger.BlockInfo{Height: c.Height, Time: BlockTime(c.Height).Add(c.Offset), Seed: BlockSeed(c.Height), Votes: votes, Misbehavior: evidence})
	res := make([]ledger.TxResult, len(txs))
	for i, tx := range txs {
		res[i] = b.DeliverTx(tx)
	}
	changes, hash, err := b.End()
	if err != nil {
		tb.Fatalf("block %d: %v", c.Height, err)
	}
	c.Updates, c.Events = b.ValidatorUpdates(), b.Events()
	c.KV.Apply(changes)
	c.Hash = hash
	c.checkInvariants(tb)
	return res
}

func (c *Chain) checkInvariants(tb testing.TB) {
	tb.Helper()
	if err := ledger.CheckInvariants(c.KV); err != nil {
		tb.Fatalf("after block %d: %v", c.Height, err)
	}
	h, err := ledger.AppHash(c.KV)
	if err != nil {
		tb.Fatal(err)
	}
	if string(h) != string(c.Hash) {
		tb.Fatalf("after block %d: stored app hash %x != returned %x", c.Height, h, c.Hash)
	}
}

// Balance returns the balance of addr.
func (c *Chain) Balance(tb testing.TB, addr address.Address) uint64 {
	tb.Helper()
	a, err := ledger.GetAccount(c.KV, addr)
	if err != nil {
		tb.Fatal(err)
	}
	return a.Balance
}

// WasmJob returns a valid spec of a CPU wasm job. Its verification is none,
// so one provider's result settles it; tests of verification set spot or
// full.
func WasmJob(name string, maxPricePerHour, timeoutSeconds uint64) ledger.JobSpec {
	return ledger.JobSpec{
		Name: name, Executor: "wasm", Module: "sha256:" + fmt.Sprintf("%064x", 1),
		Outputs: []string{"/out"}, CPUMilli: 1000, Memory: 256 << 20, Disk: 1 << 30,
		MaxPricePerHour: maxPricePerHour, TimeoutSeconds: timeoutSeconds, Verification: "none", Deterministic: true,
	}
}

// AgeKey is a syntactically valid age recipient for tests.
func AgeKey(name string) string {
	k := sha256.Sum256([]byte("age/" + name))
	s, _ := address.EncodeBech32("age", k[:])
	return s
}

// ConsKey is a deterministic validator consensus key (ed25519).
func ConsKey(name string) ed25519.PublicKey {
	return ConsPriv(name).Public().(ed25519.PublicKey)
}

// ConsPriv is the private half of ConsKey(name).
func ConsPriv(name string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("ledgertest/cons/" + name))
	return ed25519.NewKeyFromSeed(seed[:])
}

// PoP is the proof of possession of ConsKey(cons) for operator on ChainID.
func PoP(cons string, operator address.Address) []byte {
	return ledger.SignValidatorPoP(ConsPriv(cons), ChainID, operator)
}

// CreateValidator returns a create_validator by op for the consensus key
// ConsKey(cons), with its proof of possession on ChainID.
func CreateValidator(op Key, cons string, stake uint64) *ledger.MsgCreateValidator {
	return &ledger.MsgCreateValidator{PubKey: ConsKey(cons), Stake: ledger.Amount(stake), PoP: PoP(cons, op.Addr)}
}

// GenesisValidator returns a genesis validator operated by the key name,
// with the consensus key ConsKey(name) and its proof of possession on
// ChainID.
func GenesisValidator(name string, stake uint64) ledger.GenesisValidator {
	op := NewKey(name).Addr
	return ledger.GenesisValidator{Operator: op, PubKey: ConsKey(name), Stake: stake, Moniker: name, PoP: PoP(name, op)}
}

// ServiceSpec returns a valid spec of a CPU service: one replica of a
// container serving HTTP on port 8000, ready when GET /health answers,
// declaring the OpenAI model "tinylm".
func ServiceSpec(name string, maxPricePerHour uint64) ledger.ServiceSpec {
	return ledger.ServiceSpec{
		Name: name, Image: "127.0.0.1:5000/gpunet/tinylm@sha256:" + fmt.Sprintf("%064x", 2),
		Args: []string{"-addr", ":8000"}, CPUMilli: 500, Memory: 128 << 20, Disk: 256 << 20,
		MaxPricePerHour: maxPricePerHour,
		Ports:           []ledger.ServicePort{{Port: 8000, Name: "api", Protocol: ledger.PortHTTP}},
		Readiness:       ledger.ServiceReadiness{Port: 8000, Path: "/health", IntervalSeconds: 2, TimeoutSeconds: 1, FailureThreshold: 3, StartSeconds: 120},
		Replicas:        1,
		OpenAI:          &ledger.ServiceOpenAI{Port: 8000, Models: []string{"tinylm"}},
	}
}
