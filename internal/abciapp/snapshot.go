package abciapp

// State sync: the app's side of CometBFT's snapshot calls. Every
// Snapshots.Interval committed heights the app writes the committed state,
// read from a Pebble snapshot taken in Commit, to Snapshots.Dir/<height>/ in
// the background (blocks are not held up); ListSnapshots and
// LoadSnapshotChunk serve them to peers. A joining node's app is offered a
// snapshot (OfferSnapshot) with the app hash CometBFT trusts for its height
// (from a light client), is handed the chunks in order
// (ApplySnapshotChunk), and accepts the last one only if the restored state
// hashes to that app hash; anything else is refused and wiped.
//
// Format 1. A snapshot is its metadata and chunks. The metadata (encoded by
// snapshotMeta.encode) is a version byte, the number of keys, their raw
// bytes and the number of chunks, then for each chunk its SHA-256 (of the
// bytes sent) and its decompressed size. A chunk is zstd of a run of
// entries, uvarint(len key) key uvarint(len value) value, every key of the
// state (the derived indexes and the stored lattice hash included) in
// strictly increasing order across the whole snapshot. The snapshot's Hash
// is the SHA-256 of its metadata, so two nodes that wrote the same state
// advertise the same snapshot.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble"
	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/klauspost/compress/zstd"

	"github.com/gpunet/gpunet/internal/ledger"
)

// SnapshotFormat is the snapshot format this app writes and restores.
const SnapshotFormat = 1

// Bounds on what a snapshot may claim, so that a peer cannot make a
// restoring node allocate or wait without limit. A chunk response must fit
// CometBFT's 16 MB chunk message; the metadata its 4 MB snapshot message.
const (
	// DefaultSnapshotChunkBytes is the raw size at which a chunk is cut.
	DefaultSnapshotChunkBytes = 8 << 20
	// MaxSnapshotChunks bounds a snapshot's chunk count (512 GiB of state
	// at the default chunk size; 2.4 MB of metadata).
	MaxSnapshotChunks = 1 << 16
	// MaxSnapshotChunkBytes bounds a chunk as sent and decompressed.
	MaxSnapshotChunkBytes = 15_000_000
	// maxSnapshotMetaBytes bounds the metadata: the header and
	// MaxSnapshotChunks entries of 32 + up to 4 bytes.
	maxSnapshotMetaBytes = 64 + MaxSnapshotChunks*(sha256.Size+4)
	// DefaultSnapshotKeepRecent is how many snapshots a node keeps.
	DefaultSnapshotKeepRecent = 2
	// DefaultSnapshotMinAge is how long a snapshot is kept at least.
	DefaultSnapshotMinAge = 10 * time.Minute
)

// SnapshotOptions configure the snapshots an App takes and serves.
type SnapshotOptions struct {
	// Dir holds the snapshots, one directory per height; empty disables
	// taking and serving them (restoring needs no directory).
	Dir string
	// Interval takes a snapshot at every height that is a multiple of it;
	// 0 takes none (those in Dir are still served).
	Interval uint64
	// KeepRecent is how many of the latest snapshots are kept and
	// offered (0: DefaultSnapshotKeepRecent). Older ones are removed once
	// MinAge old (0: DefaultSnapshotMinAge; negative: at once), and served
	// to a node restoring one until then.
	KeepRecent int
	MinAge     time.Duration
	// ChunkBytes is the raw size at which a chunk is cut (0:
	// DefaultSnapshotChunkBytes; at most MaxSnapshotChunkBytes).
	ChunkBytes int
	// Taken, when set, is called after each snapshot is written (tests and
	// benchmarks wait on it), with its height and any error.
	Taken func(height uint64, err error)
}

// snapshotter is the App's snapshot state: the background writer and the
// restore in progress.
type snapshotter struct {
	opts SnapshotOptions
	log  *slog.Logger

	writing atomic.Bool    // a snapshot is being written
	wg      sync.WaitGroup // the writer, waited for by Close
	stop    chan struct{}  // closed by Close: the writer gives up

	mu        sync.Mutex
	restore   *restoreState // nil unless a restore is in progress
	restoring atomic.Bool   // restore != nil, for View without mu
}

// restoreState is a restore in progress.
type restoreState struct {
	snap    *abci.Snapshot
	meta    *snapshotMeta
	trusted []byte
	next    uint32 // the chunk expected next
	lastKey []byte
	keys    uint64
	lt      ledger.LtHash
}

func newSnapshotter(o SnapshotOptions, log *slog.Logger) *snapshotter {
	if o.KeepRecent <= 0 {
		o.KeepRecent = DefaultSnapshotKeepRecent
	}
	if o.MinAge == 0 {
		o.MinAge = DefaultSnapshotMinAge
	}
	if o.ChunkBytes <= 0 || o.ChunkBytes > MaxSnapshotChunkBytes {
		o.ChunkBytes = DefaultSnapshotChunkBytes
	}
	if o.Dir != "" {
		// Directories of snapshots that a crash interrupted.
		if ents, err := os.ReadDir(o.Dir); err == nil {
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), ".tmp-") {
					os.RemoveAll(filepath.Join(o.Dir, e.Name()))
				}
			}
		}
	}
	return &snapshotter{opts: o, log: log, stop: make(chan struct{})}
}

// snapshotMeta is a snapshot's metadata (format 1).
type snapshotMeta struct {
	Keys     uint64
	RawBytes uint64
	Chunks   []chunkMeta
}

type chunkMeta struct {
	Hash [sha256.Size]byte
	Raw  uint32 // decompressed size
}

const snapshotMetaVersion = 1

func (m *snapshotMeta) encode() []byte {
	b := []byte{snapshotMetaVersion}
	b = binary.AppendUvarint(b, m.Keys)
	b = binary.AppendUvarint(b, m.RawBytes)
	b = binary.AppendUvarint(b, uint64(len(m.Chunks)))
	for _, c := range m.Chunks {
		b = append(b, c.Hash[:]...)
		b = binary.AppendUvarint(b, uint64(c.Raw))
	}
	return b
}

// decodeSnapshotMeta parses metadata from a peer, within the bounds above.
func decodeSnapshotMeta(b []byte) (*snapshotMeta, error) {
	if len(b) > maxSnapshotMetaBytes {
		return nil, fmt.Errorf("snapshot metadata of %d bytes, at most %d", len(b), maxSnapshotMetaBytes)
	}
	if len(b) == 0 || b[0] != snapshotMetaVersion {
		return nil, errors.New("snapshot metadata: unknown version")
	}
	b = b[1:]
	next := func(what string) (uint64, error) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, fmt.Errorf("snapshot metadata: bad %s", what)
		}
		b = b[n:]
		return v, nil
	}
	var m snapshotMeta
	var err error
	if m.Keys, err = next("key count"); err != nil {
		return nil, err
	}
	if m.RawBytes, err = next("size"); err != nil {
		return nil, err
	}
	n, err := next("chunk count")
	if err != nil {
		return nil, err
	}
	if n == 0 || n > MaxSnapshotChunks {
		return nil, fmt.Errorf("snapshot metadata: %d chunks, want 1 to %d", n, MaxSnapshotChunks)
	}
	m.Chunks = make([]chunkMeta, n)
	var raw uint64
	for i := range m.Chunks {
		if len(b) < sha256.Size {
			return nil, fmt.Errorf("snapshot metadata: chunk %d's hash cut short", i)
		}
		copy(m.Chunks[i].Hash[:], b)
		b = b[sha256.Size:]
		r, err := next("chunk size")
		if err != nil {
			return nil, err
		}
		if r == 0 || r > MaxSnapshotChunkBytes {
			return nil, fmt.Errorf("snapshot metadata: chunk %d of %d bytes, want 1 to %d", i, r, MaxSnapshotChunkBytes)
		}
		m.Chunks[i].Raw = uint32(r)
		raw += r
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("snapshot metadata: %d bytes after the last chunk", len(b))
	}
	if raw != m.RawBytes {
		return nil, fmt.Errorf("snapshot metadata: chunks hold %d bytes, the header says %d", raw, m.RawBytes)
	}
	// Each entry takes at least two bytes (the two lengths) and a key.
	if m.Keys == 0 || m.Keys > m.RawBytes/3 {
		return nil, fmt.Errorf("snapshot metadata: %d keys in %d bytes", m.Keys, m.RawBytes)
	}
	return &m, nil
}

var (
	zstdEnc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	zstdDec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(MaxSnapshotChunkBytes))
)

// decodeChunk decompresses a chunk (whose hash matched its metadata) and
// calls fn with each entry in order. It fails if the chunk's size is not
// the metadata's, or an entry is cut short or out of order after prev.
func decodeChunk(chunk []byte, raw uint32, prev []byte, fn func(k, v []byte) error) ([]byte, error) {
	buf, err := zstdDec.DecodeAll(chunk, make([]byte, 0, raw))
	if err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	if len(buf) != int(raw) {
		return nil, fmt.Errorf("%d bytes decompressed, the metadata says %d", len(buf), raw)
	}
	field := func() ([]byte, error) {
		n, w := binary.Uvarint(buf)
		if w <= 0 || n > uint64(len(buf)-w) {
			return nil, errors.New("entry cut short")
		}
		f := buf[w : w+int(n)]
		buf = buf[w+int(n):]
		return f, nil
	}
	for len(buf) > 0 {
		k, err := field()
		if err != nil {
			return nil, err
		}
		v, err := field()
		if err != nil {
			return nil, err
		}
		if len(k) == 0 || (prev != nil && bytes.Compare(k, prev) <= 0) {
			return nil, fmt.Errorf("key %q out of order (after %q)", k, prev)
		}
		if err := fn(k, v); err != nil {
			return nil, err
		}
		prev = k
	}
	return prev, nil
}

// takeSnapshot starts writing a snapshot of the state just committed at
// height, unless one is being written (the next interval takes it).
func (a *App) takeSnapshot(height uint64) {
	s := a.snaps
	if s.opts.Dir == "" || s.opts.Interval == 0 || height%s.opts.Interval != 0 {
		return
	}
	if !s.writing.CompareAndSwap(false, true) {
		s.log.Warn("state snapshot skipped: the previous one is still being written", "height", height)
		return
	}
	snap := a.store.db.NewSnapshot() // before the next Commit: exactly this height
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		err := writeSnapshot(s.opts.Dir, height, snap, s.opts.ChunkBytes, s.stop)
		snap.Close()
		if err == nil {
			s.prune()
			s.log.Info("state snapshot written", "height", height)
		} else {
			s.log.Error("state snapshot failed", "height", height, "err", err)
		}
		// Done before Taken says so: a caller that goes on at once must
		// find the next interval's snapshot taken, not skipped as still
		// being written (TestSnapshotChunkOnDiskCorrupt failed so in CI).
		s.writing.Store(false)
		if s.opts.Taken != nil {
			s.opts.Taken(height, err)
		}
	}()
}

var errSnapshotStopped = errors.New("snapshot: the app is closing")

// writeSnapshot writes every key of r into dir/<height>/, by way of a
// temporary directory renamed when complete.
func writeSnapshot(dir string, height uint64, r pebble.Reader, chunkBytes int, stop <-chan struct{}) error {
	tmp := filepath.Join(dir, fmt.Sprintf(".tmp-%d", height))
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	it, err := r.NewIter(nil)
	if err != nil {
		return err
	}
	defer it.Close()
	var (
		meta snapshotMeta
		raw  []byte
		out  []byte
	)
	flush := func() error {
		if len(raw) == 0 {
			return nil
		}
		if len(raw) > MaxSnapshotChunkBytes {
			return fmt.Errorf("a chunk of %d bytes (an entry too large?), at most %d", len(raw), MaxSnapshotChunkBytes)
		}
		out = zstdEnc.EncodeAll(raw, out[:0])
		if len(out) > MaxSnapshotChunkBytes {
			return fmt.Errorf("a compressed chunk of %d bytes, at most %d", len(out), MaxSnapshotChunkBytes)
		}
		name := filepath.Join(tmp, chunkFile(len(meta.Chunks)))
		if err := os.WriteFile(name, out, 0o600); err != nil {
			return err
		}
		meta.Chunks = append(meta.Chunks, chunkMeta{Hash: sha256.Sum256(out), Raw: uint32(len(raw))})
		meta.RawBytes += uint64(len(raw))
		raw = raw[:0]
		return nil
	}
	for ok := it.First(); ok; ok = it.Next() {
		k, v := it.Key(), it.Value()
		raw = binary.AppendUvarint(raw, uint64(len(k)))
		raw = append(raw, k...)
		raw = binary.AppendUvarint(raw, uint64(len(v)))
		raw = append(raw, v...)
		meta.Keys++
		if len(raw) >= chunkBytes {
			select {
			case <-stop:
				return errSnapshotStopped
			default:
			}
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	if len(meta.Chunks) == 0 {
		return errors.New("the state is empty")
	}
	if len(meta.Chunks) > MaxSnapshotChunks {
		return fmt.Errorf("%d chunks, at most %d: raise the chunk size", len(meta.Chunks), MaxSnapshotChunks)
	}
	if err := os.WriteFile(filepath.Join(tmp, "metadata"), meta.encode(), 0o600); err != nil {
		return err
	}
	final := filepath.Join(dir, strconv.FormatUint(height, 10))
	os.RemoveAll(final)
	return os.Rename(tmp, final)
}

func chunkFile(i int) string { return fmt.Sprintf("chunk-%06d", i) }

// heights returns the heights of the complete snapshots in dir, newest
// first.
func (s *snapshotter) heights() []uint64 {
	ents, err := os.ReadDir(s.opts.Dir)
	if err != nil {
		return nil
	}
	var hs []uint64
	for _, e := range ents {
		if h, err := strconv.ParseUint(e.Name(), 10, 64); err == nil && e.IsDir() {
			hs = append(hs, h)
		}
	}
	slices.Sort(hs)
	slices.Reverse(hs)
	return hs
}

// prune removes the snapshots older than the KeepRecent latest, once they
// are MinAge old: a joining node may have chosen one a few blocks ago
// (CometBFT discovers snapshots for 5 s, then fetches their chunks), and a
// chunk that is gone stalls it for minutes.
func (s *snapshotter) prune() {
	hs := s.heights()
	for _, h := range hs[min(len(hs), s.opts.KeepRecent):] {
		dir := filepath.Join(s.opts.Dir, strconv.FormatUint(h, 10))
		if fi, err := os.Stat(dir); err == nil && time.Since(fi.ModTime()) < s.opts.MinAge {
			continue
		}
		os.RemoveAll(dir)
	}
}

// readSnapshot loads the snapshot at height from dir.
func (s *snapshotter) readSnapshot(height uint64) (*abci.Snapshot, *snapshotMeta, error) {
	b, err := os.ReadFile(filepath.Join(s.opts.Dir, strconv.FormatUint(height, 10), "metadata"))
	if err != nil {
		return nil, nil, err
	}
	m, err := decodeSnapshotMeta(b)
	if err != nil {
		return nil, nil, err
	}
	h := sha256.Sum256(b)
	return &abci.Snapshot{Height: height, Format: SnapshotFormat, Chunks: uint32(len(m.Chunks)), Hash: h[:], Metadata: b}, m, nil
}

// ListSnapshots implements abci.Application: the snapshots kept, newest
// first.
func (a *App) ListSnapshots(context.Context, *abci.ListSnapshotsRequest) (*abci.ListSnapshotsResponse, error) {
	s := a.snaps
	resp := &abci.ListSnapshotsResponse{}
	if s.opts.Dir == "" {
		return resp, nil
	}
	for _, h := range s.heights() {
		if len(resp.Snapshots) == s.opts.KeepRecent {
			break
		}
		snap, _, err := s.readSnapshot(h)
		if err != nil {
			s.log.Warn("state snapshot unreadable; not offered", "height", h, "err", err)
			continue
		}
		resp.Snapshots = append(resp.Snapshots, snap)
	}
	return resp, nil
}

// LoadSnapshotChunk implements abci.Application. A chunk that is missing,
// or whose bytes on disk no longer match the metadata, is answered with no
// chunk (CometBFT then tells the peer it is missing, and the peer asks
// another node).
func (a *App) LoadSnapshotChunk(_ context.Context, req *abci.LoadSnapshotChunkRequest) (*abci.LoadSnapshotChunkResponse, error) {
	s := a.snaps
	resp := &abci.LoadSnapshotChunkResponse{}
	if s.opts.Dir == "" || req.Format != SnapshotFormat {
		return resp, nil
	}
	_, m, err := s.readSnapshot(req.Height)
	if err != nil || req.Chunk >= uint32(len(m.Chunks)) {
		return resp, nil
	}
	b, err := os.ReadFile(filepath.Join(s.opts.Dir, strconv.FormatUint(req.Height, 10), chunkFile(int(req.Chunk))))
	if err != nil {
		return resp, nil
	}
	if sha256.Sum256(b) != m.Chunks[req.Chunk].Hash {
		s.log.Error("state snapshot chunk on disk does not match its metadata; not served", "height", req.Height, "chunk", req.Chunk)
		return resp, nil
	}
	resp.Chunk = b
	return resp, nil
}

// OfferSnapshot implements abci.Application. It accepts a snapshot of
// SnapshotFormat whose metadata is well formed, within bounds and matches
// its hash, and remembers the app hash CometBFT trusts for its height.
func (a *App) OfferSnapshot(_ context.Context, req *abci.OfferSnapshotRequest) (*abci.OfferSnapshotResponse, error) {
	s := a.snaps
	s.mu.Lock()
	defer s.mu.Unlock()
	reject := func(why string, args ...any) (*abci.OfferSnapshotResponse, error) {
		s.log.Warn("state snapshot refused: "+why, args...)
		return &abci.OfferSnapshotResponse{Result: abci.OFFER_SNAPSHOT_RESULT_REJECT}, nil
	}
	snap := req.Snapshot
	if snap == nil {
		return reject("no snapshot")
	}
	if snap.Format != SnapshotFormat {
		s.log.Warn("state snapshot refused: unknown format", "format", snap.Format, "want", SnapshotFormat)
		return &abci.OfferSnapshotResponse{Result: abci.OFFER_SNAPSHOT_RESULT_REJECT_FORMAT}, nil
	}
	if snap.Height == 0 || snap.Chunks == 0 || snap.Chunks > MaxSnapshotChunks {
		return reject("bad height or chunk count", "height", snap.Height, "chunks", snap.Chunks)
	}
	if len(req.AppHash) != sha256.Size {
		return reject("trusted app hash is not 32 bytes", "height", snap.Height, "bytes", len(req.AppHash))
	}
	if h := sha256.Sum256(snap.Metadata); !bytes.Equal(h[:], snap.Hash) {
		return reject("metadata does not match the snapshot's hash", "height", snap.Height)
	}
	m, err := decodeSnapshotMeta(snap.Metadata)
	if err != nil {
		return reject("bad metadata", "height", snap.Height, "err", err)
	}
	if len(m.Chunks) != int(snap.Chunks) {
		return reject("chunk count differs from the metadata's", "height", snap.Height, "chunks", snap.Chunks, "metadata", len(m.Chunks))
	}
	// CometBFT offers snapshots only to a node whose own state is empty;
	// what the app holds is then an earlier restore that did not finish
	// (or one CometBFT never recorded): start afresh.
	if err := a.wipeForRestore(); err != nil {
		return nil, err
	}
	s.restore = &restoreState{snap: snap, meta: m, trusted: bytes.Clone(req.AppHash)}
	s.restoring.Store(true)
	s.log.Info("restoring state snapshot", "height", snap.Height, "chunks", snap.Chunks, "keys", m.Keys, "bytes", m.RawBytes)
	return &abci.OfferSnapshotResponse{Result: abci.OFFER_SNAPSHOT_RESULT_ACCEPT}, nil
}

// ApplySnapshotChunk implements abci.Application. A chunk whose hash is not
// the metadata's is answered RETRY, to be fetched again and not from its
// sender. After the last chunk, the restored state must hash to the trusted
// app hash and pass the ledger's checks; if not, the snapshot is refused
// and everything written is removed.
func (a *App) ApplySnapshotChunk(_ context.Context, req *abci.ApplySnapshotChunkRequest) (*abci.ApplySnapshotChunkResponse, error) {
	s := a.snaps
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.restore
	if r == nil {
		s.log.Error("state snapshot chunk without an accepted snapshot", "chunk", req.Index)
		return &abci.ApplySnapshotChunkResponse{Result: abci.APPLY_SNAPSHOT_CHUNK_RESULT_ABORT}, nil
	}
	rejectSnapshot := func(why string, args ...any) (*abci.ApplySnapshotChunkResponse, error) {
		s.log.Error("state snapshot refused: "+why, append([]any{"height", r.snap.Height, "chunk", req.Index}, args...)...)
		s.restore = nil
		if err := a.wipeForRestore(); err != nil {
			return nil, err
		}
		s.restoring.Store(false)
		return &abci.ApplySnapshotChunkResponse{Result: abci.APPLY_SNAPSHOT_CHUNK_RESULT_REJECT_SNAPSHOT}, nil
	}
	if req.Index != r.next {
		return rejectSnapshot("chunk out of order", "want", r.next)
	}
	cm := r.meta.Chunks[req.Index]
	if len(req.Chunk) > MaxSnapshotChunkBytes || sha256.Sum256(req.Chunk) != cm.Hash {
		s.log.Warn("state snapshot chunk does not match its hash; fetching it again from another peer",
			"height", r.snap.Height, "chunk", req.Index, "sender", req.Sender)
		resp := &abci.ApplySnapshotChunkResponse{Result: abci.APPLY_SNAPSHOT_CHUNK_RESULT_RETRY, RefetchChunks: []uint32{req.Index}}
		if req.Sender != "" {
			resp.RejectSenders = []string{req.Sender}
		}
		return resp, nil
	}
	batch := a.store.db.NewBatch()
	defer batch.Close()
	last, err := decodeChunk(req.Chunk, cm.Raw, r.lastKey, func(k, v []byte) error {
		r.keys++
		if r.keys > r.meta.Keys {
			return fmt.Errorf("more keys than the metadata's %d", r.meta.Keys)
		}
		if ledger.Hashed(k) {
			r.lt.Add(k, v)
		}
		return batch.Set(k, v, nil)
	})
	if err != nil {
		// The chunk is the one the metadata names: the snapshot is bad.
		return rejectSnapshot("chunk does not decode", "err", err)
	}
	// The last chunk's write syncs the log, and with it every chunk's.
	sync := pebble.NoSync
	if int(r.next)+1 == len(r.meta.Chunks) {
		sync = pebble.Sync
	}
	if err := a.store.db.Apply(batch, sync); err != nil {
		return nil, fmt.Errorf("restore chunk %d: %w", req.Index, err)
	}
	r.lastKey = bytes.Clone(last)
	r.next++
	if int(r.next) < len(r.meta.Chunks) {
		return &abci.ApplySnapshotChunkResponse{Result: abci.APPLY_SNAPSHOT_CHUNK_RESULT_ACCEPT}, nil
	}
	if r.keys != r.meta.Keys {
		return rejectSnapshot("key count differs from the metadata's", "keys", r.keys, "want", r.meta.Keys)
	}
	if err := a.finishRestore(r); err != nil {
		return rejectSnapshot(err.Error())
	}
	s.restore = nil
	s.restoring.Store(false)
	s.log.Info("state snapshot restored", "height", r.snap.Height, "keys", r.keys)
	return &abci.ApplySnapshotChunkResponse{Result: abci.APPLY_SNAPSHOT_CHUNK_RESULT_ACCEPT}, nil
}

// finishRestore checks the restored state against the trusted app hash and
// the ledger's own checks, and makes it the app's committed state.
func (a *App) finishRestore(r *restoreState) error {
	if got := r.lt.Sum(); !bytes.Equal(got, r.trusted) {
		return fmt.Errorf("restored state hashes to %X, the trusted app hash is %X", got, r.trusted)
	}
	if err := a.store.reload(); err != nil {
		return err
	}
	kv := a.committed()
	// The stored lattice hash (what the next block builds on) must be the
	// one just computed from the entries.
	if stored, err := ledger.AppHash(kv); err != nil || !bytes.Equal(stored, r.trusted) {
		return fmt.Errorf("the snapshot's stored lattice hash is not its entries' (%X, err %v)", stored, err)
	}
	if h := ledger.Height(kv); h != r.snap.Height {
		return fmt.Errorf("restored state is at height %d, the snapshot's is %d", h, r.snap.Height)
	}
	if ledger.ChainID(kv) == "" {
		return errors.New("restored state has no chain id")
	}
	if err := ledger.CheckRecordEncoding(kv); err != nil {
		return err
	}
	// The derived indexes are not hashed: check them against the records.
	if err := ledger.CheckInvariants(kv); err != nil {
		return err
	}
	if err := os.Remove(a.restoreMarker()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	a.resetCheckState()
	return nil
}

// restoreMarker names the file that exists while a restore is in progress:
// Open wipes a state that has it (a restore a crash interrupted).
func (a *App) restoreMarker() string { return a.dir + ".restoring" }

// wipeForRestore deletes every key of the state and marks the state as
// being restored.
func (a *App) wipeForRestore() error {
	if err := os.WriteFile(a.restoreMarker(), nil, 0o600); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := a.store.wipe(); err != nil {
		return fmt.Errorf("restore: wipe the app state: %w", err)
	}
	a.resetCheckState()
	return nil
}

// wipe deletes every key and empties the in-memory index.
func (s *Store) wipe() error {
	it, err := s.db.NewIter(nil)
	if err != nil {
		return err
	}
	var first, last []byte
	if it.First() {
		first = bytes.Clone(it.Key())
		it.Last()
		last = append(bytes.Clone(it.Key()), 0)
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return err
	}
	if first != nil {
		if err := s.db.DeleteRange(first, last, pebble.Sync); err != nil {
			return err
		}
	}
	return s.reload()
}

// reload makes readers see what was written to the DB directly (a restore):
// it reloads the in-memory index, empties the value cache and drops the
// iterators kept for reuse.
func (s *Store) reload() error {
	fresh, err := OpenStore(s.db)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.kv.mem.Store(fresh.kv.mem.Load())
	s.kv.cache.clear()
	s.mu.Unlock()
	return s.kv.Reset()
}

// emptyKV is the state readers see while a restore is in progress.
type emptyKV struct{}

func (emptyKV) Get([]byte) []byte                              { return nil }
func (emptyKV) Iterate([]byte, []byte, func(k, v []byte) bool) {}

// close stops the snapshot writer and waits for it.
func (s *snapshotter) close() {
	close(s.stop)
	s.wg.Wait()
}

// discardUnfinishedRestore removes the state in dir if a restore into it
// did not finish (its marker is there): it is neither the snapshot's state
// nor any other.
func discardUnfinishedRestore(dir string, log *slog.Logger) error {
	marker := dir + ".restoring"
	if _, err := os.Stat(marker); err != nil {
		return nil
	}
	log.Warn("the app state holds a state snapshot restore that did not finish; removing it", "dir", dir)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove the unfinished restore in %s: %w", dir, err)
	}
	return os.Remove(marker)
}

// SnapshotKeys returns the number of keys a snapshot's metadata declares.
func SnapshotKeys(s *abci.Snapshot) (uint64, error) {
	m, err := decodeSnapshotMeta(s.Metadata)
	if err != nil {
		return 0, err
	}
	return m.Keys, nil
}
