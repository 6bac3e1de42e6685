package abciapp

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"
	abci "github.com/cometbft/cometbft/abci/types"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

var carol = lt.NewKey("carol")

// snapshotChain runs blocks on an app that takes a snapshot every 4
// heights in small chunks, and returns it with the snapshot of height 8
// (the state after block 8).
func snapshotChain(t *testing.T) (*App, *abci.Snapshot) {
	t.Helper()
	taken := make(chan uint64, 8)
	a, err := Open(filepath.Join(t.TempDir(), "app"), Options{CheckInvariants: true, Snapshots: SnapshotOptions{
		Dir: filepath.Join(t.TempDir(), "snapshots"), Interval: 4, ChunkBytes: 512,
		Taken: func(h uint64, err error) {
			if err != nil {
				t.Errorf("snapshot at %d: %v", h, err)
			}
			taken <- h
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	st, _ := json.Marshal(lt.Genesis(1_000_000_000, "alice", "bob", "carol"))
	if _, err := a.InitChain(t.Context(), &abci.InitChainRequest{ChainId: lt.ChainID, AppStateBytes: st}); err != nil {
		t.Fatal(err)
	}
	// A snapshot still being written when the next interval comes makes
	// that one skipped (by design), so each is awaited before the chain
	// goes on: on a loaded machine block 8 can otherwise come first.
	for h := int64(1); h <= 9; h++ {
		for i, r := range finalize(t, a, h, chainBlock(h)...).TxResults {
			if r.Code != 0 {
				t.Fatalf("block %d tx %d: %s", h, i, r.Log)
			}
		}
		commit(t, a)
		if h%4 != 0 {
			continue
		}
		select {
		case got := <-taken:
			if got != uint64(h) {
				t.Fatalf("snapshot taken at %d, want %d", got, h)
			}
		case <-time.After(time.Minute):
			t.Fatalf("no snapshot at %d", h)
		}
	}
	list, err := a.ListSnapshots(t.Context(), &abci.ListSnapshotsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Snapshots) != 2 || list.Snapshots[0].Height != 8 || list.Snapshots[1].Height != 4 {
		t.Fatalf("ListSnapshots = %v, want heights 8 and 4", list.Snapshots)
	}
	s := list.Snapshots[0]
	if s.Chunks < 3 {
		t.Fatalf("snapshot has %d chunks; the test wants several", s.Chunks)
	}
	return a, s
}

func loadChunks(t *testing.T, a *App, s *abci.Snapshot) [][]byte {
	t.Helper()
	var chunks [][]byte
	for i := range s.Chunks {
		r, err := a.LoadSnapshotChunk(t.Context(), &abci.LoadSnapshotChunkRequest{Height: s.Height, Format: s.Format, Chunk: i})
		if err != nil || r.Chunk == nil {
			t.Fatalf("chunk %d: %v (nil chunk: %v)", i, err, r.Chunk == nil)
		}
		chunks = append(chunks, r.Chunk)
	}
	return chunks
}

// appHashAt is the app hash the chain had after block h: what CometBFT's
// light client would trust.
func appHashAt(t *testing.T, a *App) []byte { return info(t, a).LastBlockAppHash }

func offer(t *testing.T, a *App, s *abci.Snapshot, appHash []byte) abci.OfferSnapshotResult {
	t.Helper()
	r, err := a.OfferSnapshot(t.Context(), &abci.OfferSnapshotRequest{Snapshot: s, AppHash: appHash})
	if err != nil {
		t.Fatal(err)
	}
	return r.Result
}

func apply(t *testing.T, a *App, i uint32, chunk []byte, sender string) *abci.ApplySnapshotChunkResponse {
	t.Helper()
	r, err := a.ApplySnapshotChunk(t.Context(), &abci.ApplySnapshotChunkRequest{Index: i, Chunk: chunk, Sender: sender})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// allKeys reads every key of a's store.
func allKeys(t *testing.T, a *App) map[string]string {
	t.Helper()
	it, err := a.store.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	m := map[string]string{}
	for ok := it.First(); ok; ok = it.Next() {
		m[string(it.Key())] = string(it.Value())
	}
	return m
}

// TestSnapshotRoundTrip: a snapshot restored chunk by chunk into an empty
// app gives the same height, app hash and every key, and the restored app
// goes on to execute the next block as the original did.
func TestSnapshotRoundTrip(t *testing.T) {
	src, s := snapshotChain(t)
	// ref replays the same 8 blocks: the state a node that replayed the
	// chain has, and the app hash CometBFT's light client would trust.
	ref := replayChain(t, 8)
	trusted := appHashAt(t, ref)

	dst := openApp(t, filepath.Join(t.TempDir(), "app"))
	if got := offer(t, dst, s, trusted); got != abci.OFFER_SNAPSHOT_RESULT_ACCEPT {
		t.Fatalf("offer = %v, want ACCEPT", got)
	}
	for i, c := range loadChunks(t, src, s) {
		if r := apply(t, dst, uint32(i), c, "peer1"); r.Result != abci.APPLY_SNAPSHOT_CHUNK_RESULT_ACCEPT {
			t.Fatalf("chunk %d: %v", i, r.Result)
		}
	}
	got, want := info(t, dst), info(t, ref)
	if got.LastBlockHeight != 8 || !bytes.Equal(got.LastBlockAppHash, want.LastBlockAppHash) {
		t.Fatalf("restored Info = height %d hash %X, want 8 %X", got.LastBlockHeight, got.LastBlockAppHash, want.LastBlockAppHash)
	}
	if g, w := allKeys(t, dst), allKeys(t, ref); len(g) != len(w) {
		t.Fatalf("restored %d keys, replay has %d", len(g), len(w))
	} else {
		for k, v := range w {
			if g[k] != v {
				t.Fatalf("key %q: restored %x, replay %x", k, g[k], v)
			}
		}
	}
	kv, release := dst.View()
	if ledger.ChainID(kv) != lt.ChainID {
		t.Fatalf("chain id %q", ledger.ChainID(kv))
	}
	if err := ledger.CheckRecordEncoding(kv); err != nil {
		t.Fatal(err)
	}
	release()
	// Block 9 on the restored app is block 9 on the source.
	r := finalize(t, dst, 9, bob.Send(5, alice.Addr, 9))
	commit(t, dst)
	if want := info(t, src).LastBlockAppHash; !bytes.Equal(r.AppHash, want) {
		t.Fatalf("block 9 after restore: app hash %X, the source's %X", r.AppHash, want)
	}
	// And a restart keeps it.
	dir := dst.dir
	dst.Close()
	again := openApp(t, dir)
	if h := info(t, again).LastBlockHeight; h != 9 {
		t.Fatalf("after restart: height %d, want 9", h)
	}
}

// chainBlock is block h of the test chain: a provider (the scheduler's
// in-memory index) and a queued job (the job indexes), keys that are not
// hashed but must be restored too, then transfers.
func chainBlock(h int64) [][]byte {
	txs := [][][]byte{
		{carol.Tx(lt.ChainID, 0, 0, &ledger.MsgRegisterProvider{ProviderInfo: lt.ProviderInfo("", 0, 36_000)})},
		{carol.Tx(lt.ChainID, 1, 0, &ledger.MsgStake{Amount: 100_000_000})},
		{alice.Tx(lt.ChainID, 0, 0, &ledger.MsgSubmitJob{Spec: lt.WasmJob("snap", 1, 600), ConsumerKey: lt.AgeKey("alice")})},
	}
	if int(h) <= len(txs) {
		return txs[h-1]
	}
	return [][]byte{bob.Send(uint64(h-4), alice.Addr, uint64(h))}
}

// replayChain replays the test chain up to height, with no snapshots: the
// state a node that replayed the chain would have.
func replayChain(t *testing.T, height int64) *App {
	t.Helper()
	a := openApp(t, filepath.Join(t.TempDir(), "app"))
	st, _ := json.Marshal(lt.Genesis(1_000_000_000, "alice", "bob", "carol"))
	if _, err := a.InitChain(t.Context(), &abci.InitChainRequest{ChainId: lt.ChainID, AppStateBytes: st}); err != nil {
		t.Fatal(err)
	}
	for h := int64(1); h <= height; h++ {
		finalize(t, a, h, chainBlock(h)...)
		commit(t, a)
	}
	return a
}

// TestSnapshotCorruptChunk: a chunk whose bytes are not the metadata's is
// answered RETRY, refetching it and rejecting its sender; the right bytes
// from another peer are then accepted and the restore completes.
func TestSnapshotCorruptChunk(t *testing.T) {
	src, s := snapshotChain(t)
	ref := replayChain(t, 8)
	chunks := loadChunks(t, src, s)
	dst := openApp(t, filepath.Join(t.TempDir(), "app"))
	if got := offer(t, dst, s, appHashAt(t, ref)); got != abci.OFFER_SNAPSHOT_RESULT_ACCEPT {
		t.Fatalf("offer = %v", got)
	}
	apply(t, dst, 0, chunks[0], "good")
	bad := bytes.Clone(chunks[1])
	bad[len(bad)/2] ^= 1
	r := apply(t, dst, 1, bad, "liar")
	if r.Result != abci.APPLY_SNAPSHOT_CHUNK_RESULT_RETRY || len(r.RefetchChunks) != 1 || r.RefetchChunks[0] != 1 ||
		len(r.RejectSenders) != 1 || r.RejectSenders[0] != "liar" {
		t.Fatalf("corrupt chunk answered %v refetch %v reject %v; want RETRY [1] [liar]", r.Result, r.RefetchChunks, r.RejectSenders)
	}
	// A chunk cut short, or one from another chunk, the same.
	for _, c := range [][]byte{chunks[1][:len(chunks[1])-1], chunks[2], nil} {
		if r := apply(t, dst, 1, c, "liar2"); r.Result != abci.APPLY_SNAPSHOT_CHUNK_RESULT_RETRY {
			t.Fatalf("wrong chunk answered %v, want RETRY", r.Result)
		}
	}
	for i := 1; i < len(chunks); i++ {
		if r := apply(t, dst, uint32(i), chunks[i], "good"); r.Result != abci.APPLY_SNAPSHOT_CHUNK_RESULT_ACCEPT {
			t.Fatalf("chunk %d: %v", i, r.Result)
		}
	}
	if got, want := info(t, dst).LastBlockAppHash, appHashAt(t, ref); !bytes.Equal(got, want) {
		t.Fatalf("app hash %X, want %X", got, want)
	}
}

// TestSnapshotWrongAppHash: a snapshot whose restored state does not hash
// to the trusted app hash is refused at its last chunk, and nothing of it
// is left: the app is empty, also after a restart.
func TestSnapshotWrongAppHash(t *testing.T) {
	src, s := snapshotChain(t)
	chunks := loadChunks(t, src, s)
	for _, tc := range []struct {
		name    string
		trusted []byte
	}{
		{"another height's hash", appHashAt(t, src)}, // height 9's
		{"garbage", bytes.Repeat([]byte{7}, 32)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := openApp(t, filepath.Join(t.TempDir(), "app"))
			if got := offer(t, dst, s, tc.trusted); got != abci.OFFER_SNAPSHOT_RESULT_ACCEPT {
				t.Fatalf("offer = %v", got)
			}
			var last *abci.ApplySnapshotChunkResponse
			for i, c := range chunks {
				last = apply(t, dst, uint32(i), c, "peer")
				if i < len(chunks)-1 && last.Result != abci.APPLY_SNAPSHOT_CHUNK_RESULT_ACCEPT {
					t.Fatalf("chunk %d: %v", i, last.Result)
				}
			}
			if last.Result != abci.APPLY_SNAPSHOT_CHUNK_RESULT_REJECT_SNAPSHOT {
				t.Fatalf("last chunk: %v, want REJECT_SNAPSHOT", last.Result)
			}
			if n := len(allKeys(t, dst)); n != 0 {
				t.Fatalf("%d keys left after the refused snapshot", n)
			}
			if r := info(t, dst); r.LastBlockHeight != 0 || r.LastBlockAppHash != nil {
				t.Fatalf("Info after refusal: height %d hash %X", r.LastBlockHeight, r.LastBlockAppHash)
			}
			kv, release := dst.View()
			defer release()
			if ledger.ChainID(kv) != "" {
				t.Fatal("the view shows a chain")
			}
		})
	}
}

// TestSnapshotInterruptedRestoreIsWiped: a restore a crash interrupted is
// removed when the app opens again.
func TestSnapshotInterruptedRestoreIsWiped(t *testing.T) {
	src, s := snapshotChain(t)
	ref := replayChain(t, 8)
	chunks := loadChunks(t, src, s)
	dir := filepath.Join(t.TempDir(), "app")
	dst := openApp(t, dir)
	offer(t, dst, s, appHashAt(t, ref))
	apply(t, dst, 0, chunks[0], "p")
	apply(t, dst, 1, chunks[1], "p")
	dst.Close()
	again := openApp(t, dir)
	if n := len(allKeys(t, again)); n != 0 {
		t.Fatalf("%d keys of the interrupted restore left", n)
	}
	if _, err := os.Stat(dir + ".restoring"); err == nil {
		t.Fatal("restore marker left")
	}
}

// TestOfferSnapshotBounds: offers the app cannot restore are refused
// before any chunk is fetched.
func TestOfferSnapshotBounds(t *testing.T) {
	_, good := snapshotChain(t)
	hash := bytes.Repeat([]byte{1}, 32)
	with := func(f func(s *abci.Snapshot)) *abci.Snapshot {
		s := *good
		s.Metadata = bytes.Clone(good.Metadata)
		f(&s)
		return &s
	}
	rehash := func(s *abci.Snapshot) { h := sha256.Sum256(s.Metadata); s.Hash = h[:] }
	huge := (&snapshotMeta{Keys: 1 << 40, RawBytes: uint64(MaxSnapshotChunks+1) * 1000}).encode()
	hugeMeta := func() []byte {
		m := &snapshotMeta{}
		for range MaxSnapshotChunks + 1 {
			m.Chunks = append(m.Chunks, chunkMeta{Raw: 1000})
			m.RawBytes += 1000
		}
		m.Keys = 10
		return m.encode()
	}()
	for _, tc := range []struct {
		name    string
		s       *abci.Snapshot
		appHash []byte
		want    abci.OfferSnapshotResult
	}{
		{"good", good, hash, abci.OFFER_SNAPSHOT_RESULT_ACCEPT},
		{"other format", with(func(s *abci.Snapshot) { s.Format = 2 }), hash, abci.OFFER_SNAPSHOT_RESULT_REJECT_FORMAT},
		{"no chunks", with(func(s *abci.Snapshot) { s.Chunks = 0 }), hash, abci.OFFER_SNAPSHOT_RESULT_REJECT},
		{"too many chunks", with(func(s *abci.Snapshot) { s.Chunks = MaxSnapshotChunks + 1 }), hash, abci.OFFER_SNAPSHOT_RESULT_REJECT},
		{"chunk count not the metadata's", with(func(s *abci.Snapshot) { s.Chunks++ }), hash, abci.OFFER_SNAPSHOT_RESULT_REJECT},
		{"height 0", with(func(s *abci.Snapshot) { s.Height = 0 }), hash, abci.OFFER_SNAPSHOT_RESULT_REJECT},
		{"hash not the metadata's", with(func(s *abci.Snapshot) { s.Hash = hash }), hash, abci.OFFER_SNAPSHOT_RESULT_REJECT},
		{"metadata cut short", with(func(s *abci.Snapshot) { s.Metadata = s.Metadata[:len(s.Metadata)-3]; rehash(s) }), hash, abci.OFFER_SNAPSHOT_RESULT_REJECT},
		{"no chunk list", with(func(s *abci.Snapshot) { s.Metadata = huge; rehash(s) }), hash, abci.OFFER_SNAPSHOT_RESULT_REJECT},
		{"metadata with too many chunks", with(func(s *abci.Snapshot) { s.Metadata = hugeMeta; s.Chunks = MaxSnapshotChunks; rehash(s) }), hash, abci.OFFER_SNAPSHOT_RESULT_REJECT},
		{"trusted hash not 32 bytes", good, hash[:20], abci.OFFER_SNAPSHOT_RESULT_REJECT},
		{"no snapshot", nil, hash, abci.OFFER_SNAPSHOT_RESULT_REJECT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := openApp(t, filepath.Join(t.TempDir(), "app"))
			if got := offer(t, dst, tc.s, tc.appHash); got != tc.want {
				t.Fatalf("offer = %v, want %v", got, tc.want)
			}
		})
	}
	// A chunk without an accepted snapshot is refused.
	dst := openApp(t, filepath.Join(t.TempDir(), "app"))
	if r := apply(t, dst, 0, []byte("x"), "p"); r.Result != abci.APPLY_SNAPSHOT_CHUNK_RESULT_ABORT {
		t.Fatalf("chunk without a snapshot: %v, want ABORT", r.Result)
	}
}

// TestSnapshotChunkOnDiskCorrupt: a node whose stored chunk went bad does
// not serve it.
func TestSnapshotChunkOnDiskCorrupt(t *testing.T) {
	src, s := snapshotChain(t)
	p := filepath.Join(src.snaps.opts.Dir, "8", chunkFile(1))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[0] ^= 1
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := src.LoadSnapshotChunk(t.Context(), &abci.LoadSnapshotChunkRequest{Height: s.Height, Format: s.Format, Chunk: 1})
	if err != nil || r.Chunk != nil {
		t.Fatalf("corrupt chunk served: %v, %d bytes", err, len(r.Chunk))
	}
}

// FuzzSnapshotDecode feeds the decoders of what peers send (the metadata
// and the chunks) arbitrary bytes: they must not panic, and what the
// metadata decoder accepts must encode back to an equal value.
func FuzzSnapshotDecode(f *testing.F) {
	dir := f.TempDir()
	db, err := pebble.Open(filepath.Join(dir, "db"), &pebble.Options{Logger: QuietPebbleLogger{}})
	if err != nil {
		f.Fatal(err)
	}
	for i := range 50 {
		db.Set([]byte{byte('a' + i%26), byte(i)}, bytes.Repeat([]byte{byte(i)}, i), nil)
	}
	if err := writeSnapshot(dir, 1, db, 64, make(chan struct{})); err != nil {
		f.Fatal(err)
	}
	db.Close()
	meta, _ := os.ReadFile(filepath.Join(dir, "1", "metadata"))
	chunk, _ := os.ReadFile(filepath.Join(dir, "1", chunkFile(0)))
	m, err := decodeSnapshotMeta(meta)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(meta, chunk, m.Chunks[0].Raw)
	f.Add([]byte{1, 0, 0, 0}, []byte{}, uint32(0))
	f.Add([]byte{1, 1, 3, 1}, zstdEnc.EncodeAll([]byte{1, 'k', 0}, nil), uint32(3))
	f.Add([]byte{1, 1, 3, 1}, zstdEnc.EncodeAll([]byte{9, 'k', 0}, nil), uint32(3))
	f.Fuzz(func(t *testing.T, meta, chunk []byte, raw uint32) {
		if m, err := decodeSnapshotMeta(meta); err == nil {
			again, err := decodeSnapshotMeta(m.encode())
			if err != nil || again.Keys != m.Keys || again.RawBytes != m.RawBytes || len(again.Chunks) != len(m.Chunks) {
				t.Fatalf("metadata does not round-trip: %v", err)
			}
		}
		raw %= 1 << 20
		var prev []byte
		decodeChunk(chunk, raw, nil, func(k, v []byte) error {
			if prev != nil && bytes.Compare(k, prev) <= 0 {
				t.Fatalf("keys out of order: %q after %q", k, prev)
			}
			prev = bytes.Clone(k)
			return nil
		})
	})
}

// TestSnapshotPrune: the KeepRecent latest snapshots are offered; older
// ones stay (and are served) until MinAge old, then go.
func TestSnapshotPrune(t *testing.T) {
	for _, tc := range []struct {
		name   string
		minAge time.Duration
		onDisk int
	}{{"kept while young", 0, 6}, {"removed when old", -1, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "snapshots")
			taken := make(chan uint64, 8)
			a, err := Open(filepath.Join(t.TempDir(), "app"), Options{Snapshots: SnapshotOptions{Dir: dir, Interval: 1, MinAge: tc.minAge,
				Taken: func(h uint64, _ error) { taken <- h }}})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			st, _ := json.Marshal(lt.Genesis(1_000_000_000, "alice", "bob", "carol"))
			a.InitChain(t.Context(), &abci.InitChainRequest{ChainId: lt.ChainID, AppStateBytes: st})
			for h := int64(1); h <= 6; h++ {
				finalize(t, a, h, chainBlock(h)...)
				commit(t, a)
				<-taken // one at a time: none skipped
			}
			ents, _ := os.ReadDir(dir)
			if len(ents) != tc.onDisk {
				t.Fatalf("%d snapshots on disk, want %d", len(ents), tc.onDisk)
			}
			list, _ := a.ListSnapshots(t.Context(), &abci.ListSnapshotsRequest{})
			if len(list.Snapshots) != 2 || list.Snapshots[0].Height != 6 {
				t.Fatalf("offered %v, want heights 6 and 5", list.Snapshots)
			}
			r, _ := a.LoadSnapshotChunk(t.Context(), &abci.LoadSnapshotChunkRequest{Height: 1, Format: SnapshotFormat, Chunk: 0})
			if served := r.Chunk != nil; served != (tc.onDisk == 6) {
				t.Fatalf("height 1's chunk served: %v", served)
			}
		})
	}
}
