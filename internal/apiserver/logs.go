package apiserver

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Live logs: while a job runs, its provider posts the log in chunks, each
// encrypted to the job's owner and signed by the provider; the node keeps
// the latest chunks of each running job in memory and the owner polls them.
// This relay is a convenience of one node, not consensus state: the full
// log is the encrypted blob the provider commits with its result, so the
// relay may drop chunks at any time. It holds at most maxJobLogBytes of
// chunk data per job and maxRelayBytes in all (past that, the oldest chunk
// of the job holding the most goes first, so one noisy or hostile provider
// cannot push out the others), forgets a job logGrace after it ends, and
// answers at most maxLogPageBytes of chunk data per page.

// Limits of the relay.
const (
	maxLogChunkBytes = 256 << 10
	maxChunksPerJob  = 512
	maxJobLogBytes   = 4 << 20  // chunk data kept per job
	maxRelayBytes    = 64 << 20 // chunk data kept for all jobs together
	maxRelayedJobs   = 4096
	maxLogPageBytes  = 1 << 20 // chunk data in one page (at least one chunk)
	defaultLogPage   = 64
	// logGrace is how long a job's chunks outlive its end, so that an owner
	// following the log reads its tail.
	logGrace = 30 * time.Second
	// logSweepEvery is how often the relay looks for ended jobs.
	logSweepEvery = 5 * time.Second
)

type jobLog struct {
	chunks []apiwire.LogChunk
	bytes  int                        // chunk data held
	next   uint64                     // the seq the next chunk gets
	first  uint64                     // the seq of chunks[0]
	posted map[address.Address]uint64 // each provider's next post number
	ended  time.Time                  // when the relay first saw the job ended
}

// logKind is what differs between the live logs of jobs and of services:
// where they are posted, what the provider signs, and who may post.
type logKind struct {
	what string // "job" or "service", for messages
	path string // the route, with %d for the id
	// signBytes is what the provider signs for chunk seq of id.
	signBytes func(id, seq uint64, data []byte) []byte
	// party reports whether the record exists and whether prov may post to
	// it now (assigned and not finished).
	party func(kv ledger.KV, id uint64, prov address.Address) (found, ok bool, err error)
	// ended reports whether the record exists and has finished.
	ended func(kv ledger.KV, id uint64) (found, done bool, err error)
	// gaps: a provider's post numbers may jump forward (a service's
	// replica numbers each run's posts from its start time); they must
	// still rise, so that no signed chunk is taken twice.
	gaps bool
}

// jobLogs and serviceLogs are the two kinds of live log.
var (
	jobLogs = &logKind{what: "job", path: "/v1/jobs/%d/logs", signBytes: apiwire.LogSignBytes,
		party: func(kv ledger.KV, id uint64, prov address.Address) (bool, bool, error) {
			j, found, err := ledger.GetJob(kv, id)
			if err != nil || !found {
				return found, false, err
			}
			return true, !j.Done() && slices.ContainsFunc(j.Assignments, func(a ledger.Assignment) bool { return a.Provider == prov }), nil
		},
		ended: func(kv ledger.KV, id uint64) (bool, bool, error) {
			j, found, err := ledger.GetJob(kv, id)
			return found, found && j.Done(), err
		}}
	serviceLogs = &logKind{what: "service", path: "/v1/services/%d/logs", signBytes: apiwire.ServiceLogSignBytes, gaps: true,
		party: func(kv ledger.KV, id uint64, prov address.Address) (bool, bool, error) {
			sv, found, err := ledger.GetService(kv, id)
			if err != nil || !found {
				return found, false, err
			}
			return true, !sv.Done() && slices.ContainsFunc(sv.Replicas, func(r ledger.Replica) bool { return r.Provider == prov }), nil
		},
		ended: func(kv ledger.KV, id uint64) (bool, bool, error) {
			sv, found, err := ledger.GetService(kv, id)
			return found, found && sv.Done(), err
		}}
)

// logRelay is the node's memory of live logs of one kind (jobs' or
// services'). Its zero value is ready for jobs, with the limits above;
// tests shrink them and set the clock.
type logRelay struct {
	kind *logKind // nil: jobLogs
	mu   sync.Mutex
	jobs map[uint64]*jobLog
	// order of first sight, to evict the oldest job when full
	order     []uint64
	bytes     int // chunk data held for all jobs
	lastSweep time.Time

	// out queues chunks for the other nodes (ForwardLogs); nil: none.
	out chan relayedChunk

	// Overrides for tests; zero means the constant.
	jobBytes, totalBytes int
	now                  func() time.Time
}

func (r *logRelay) logKind() *logKind {
	if r.kind == nil {
		return jobLogs
	}
	return r.kind
}

func (r *logRelay) clock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now()
}

func (r *logRelay) limits() (job, total int) {
	job, total = maxJobLogBytes, maxRelayBytes
	if r.jobBytes > 0 {
		job = r.jobBytes
	}
	if r.totalBytes > 0 {
		total = r.totalBytes
	}
	return job, total
}

func (r *logRelay) get(id uint64) *jobLog {
	if r.jobs == nil {
		r.jobs = map[uint64]*jobLog{}
	}
	l := r.jobs[id]
	if l == nil {
		if len(r.order) >= maxRelayedJobs {
			r.forget(r.order[0])
		}
		l = &jobLog{posted: map[address.Address]uint64{}}
		r.jobs[id] = l
		r.order = append(r.order, id)
	}
	return l
}

// forget drops job id and all its chunks.
func (r *logRelay) forget(id uint64) {
	l := r.jobs[id]
	if l == nil {
		return
	}
	r.bytes -= l.bytes
	delete(r.jobs, id)
	r.order = slices.DeleteFunc(r.order, func(o uint64) bool { return o == id })
}

// dropOldest drops l's oldest chunk.
func (r *logRelay) dropOldest(l *jobLog) {
	n := len(l.chunks[0].Data)
	l.chunks[0] = apiwire.LogChunk{} // let the data go
	l.chunks = l.chunks[1:]
	l.first++
	l.bytes -= n
	r.bytes -= n
}

// add appends a chunk to l and then drops chunks until the relay is
// within its limits.
func (r *logRelay) add(l *jobLog, c apiwire.LogChunk) {
	l.chunks = append(l.chunks, c)
	l.bytes += len(c.Data)
	r.bytes += len(c.Data)
	jobMax, totalMax := r.limits()
	for len(l.chunks) > 1 && (len(l.chunks) > maxChunksPerJob || l.bytes > jobMax) {
		r.dropOldest(l)
	}
	for r.bytes > totalMax {
		var big *jobLog
		for _, o := range r.jobs {
			if len(o.chunks) > 0 && (big == nil || o.bytes > big.bytes) {
				big = o
			}
		}
		if big == nil {
			break
		}
		r.dropOldest(big)
	}
}

// sweep forgets the jobs that ended at least logGrace ago (or that the
// ledger does not know), at most once per logSweepEvery. kv is a view of
// the ledger. The caller holds r.mu.
func (r *logRelay) sweep(kv ledger.KV) {
	now := r.clock()
	if now.Sub(r.lastSweep) < logSweepEvery {
		return
	}
	r.lastSweep = now
	for _, id := range slices.Clone(r.order) {
		l := r.jobs[id]
		found, done, err := r.logKind().ended(kv, id)
		switch {
		case err != nil:
			continue // keep it; the next sweep looks again
		case found && !done:
			l.ended = time.Time{}
		case l.ended.IsZero():
			l.ended = now
		case now.Sub(l.ended) >= logGrace:
			r.forget(id)
		}
	}
}

// sweepLogs runs a relay's sweep against the current ledger state.
func (s *Server) sweepLogs(rl *logRelay) {
	rl.mu.Lock()
	due := rl.clock().Sub(rl.lastSweep) >= logSweepEvery
	rl.mu.Unlock()
	if !due {
		return
	}
	kv, release := s.chain.View()
	defer release()
	rl.mu.Lock()
	defer rl.mu.Unlock()
	rl.sweep(kv)
}

// postLog serves POST /v1/jobs/{id}/logs from the job's provider:
// headers X-Gpunet-Provider (address), X-Gpunet-Seq (the provider's post
// number for this job: 0, 1, …) and X-Gpunet-Signature (hex ed25519 over
// LogSignBytes of that number).
func (s *Server) postLog(w http.ResponseWriter, r *http.Request) { s.postLogTo(w, r, &s.logs) }

// postServiceLog serves POST /v1/services/{id}/logs from a provider of one
// of the service's replicas, as postLog does for jobs (ServiceLogSignBytes).
func (s *Server) postServiceLog(w http.ResponseWriter, r *http.Request) {
	s.postLogTo(w, r, &s.svcLogs)
}

func (s *Server) postLogTo(w http.ResponseWriter, r *http.Request, rl *logRelay) {
	kind := rl.logKind()
	id, ok := parseJobID(w, r.PathValue("id"))
	if !ok {
		return
	}
	prov, err := address.Parse(r.Header.Get("X-Gpunet-Provider"))
	if err != nil {
		writeError(w, http.StatusBadRequest, ledger.ErrInvalidAddress.Code, "X-Gpunet-Provider: "+err.Error())
		return
	}
	seq, err := strconv.ParseUint(r.Header.Get("X-Gpunet-Seq"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, 0, "X-Gpunet-Seq: want an integer")
		return
	}
	sig, err := hex.DecodeString(r.Header.Get("X-Gpunet-Signature"))
	if err != nil || len(sig) != ed25519.SignatureSize {
		writeError(w, http.StatusBadRequest, ledger.ErrBadSignature.Code, "X-Gpunet-Signature: want 128 hex characters")
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxLogChunkBytes))
	if err != nil || len(data) == 0 {
		writeError(w, http.StatusRequestEntityTooLarge, 0, fmt.Sprintf("log chunk: want 1 to %d bytes", maxLogChunkBytes))
		return
	}
	kv, release := s.chain.View()
	found, assigned, err := kind.party(kv, id, prov)
	var pub []byte
	if err == nil {
		var acct ledger.Account
		acct, err = ledger.GetAccount(kv, prov)
		pub = acct.PubKey
	}
	release()
	switch {
	case err != nil:
		writeLedgerError(w, err)
		return
	case !found && kind == serviceLogs:
		writeError(w, http.StatusNotFound, 0, fmt.Sprintf("no service %d", id))
		return
	case !found:
		writeError(w, http.StatusNotFound, ledger.ErrUnknownJob.Code, fmt.Sprintf("no job %d", id))
		return
	}
	if !assigned {
		writeError(w, http.StatusForbidden, ledger.ErrNotJobParty.Code, fmt.Sprintf("%s is not running %s %d", prov, kind.what, id))
		return
	}
	if len(pub) != ed25519.PublicKeySize || !ed25519.Verify(pub, kind.signBytes(id, seq, data), sig) {
		writeError(w, http.StatusForbidden, ledger.ErrBadSignature.Code, "log chunk signature does not verify for "+prov.String())
		return
	}
	s.sweepLogs(rl)
	rl.mu.Lock()
	defer rl.mu.Unlock()
	l := rl.get(id)
	// X-Gpunet-Seq numbers a provider's own posts, so a signed chunk
	// cannot be replayed. A relayed chunk may come after a gap (the
	// relay drops what it cannot pass on), so a later number is taken.
	if want := l.posted[prov]; seq < want || (seq != want && !kind.gaps && r.Header.Get(relayedHeader) == "") {
		writeError(w, http.StatusConflict, 0, fmt.Sprintf("log post %d from %s, want %d", seq, prov, want))
		return
	}
	l.posted[prov] = seq + 1
	rl.add(l, apiwire.LogChunk{Seq: l.next, Provider: prov, Data: data})
	l.next++
	if r.Header.Get(relayedHeader) == "" {
		rl.forward(id, seq, prov, r.Header.Get("X-Gpunet-Signature"), data)
	}
	writeJSON(w, http.StatusCreated, apiwire.LogPosted{Next: l.next})
}

// Live logs across nodes: a chunk a provider posts to one node is passed
// on, as it was signed, to the other nodes the node knows, so that an
// owner following the job on any of them sees it. Each node checks the
// provider's signature itself, so a relay cannot forge or alter a chunk;
// relayed chunks carry relayedHeader and are not passed on again (one hop:
// every node forwards to the nodes it knows). The queue is bounded: when
// it is full, chunks are not relayed (the live view is best effort; the
// full log goes with the result).

// relayedHeader marks a chunk one node passes on to another.
const relayedHeader = "X-Gpunet-Relayed"

// Bounds of the forwarding.
const (
	forwardQueue   = 256
	forwardTimeout = 5 * time.Second
)

type relayedChunk struct {
	kind     *logKind
	job, seq uint64
	prov     address.Address
	sig      string
	data     []byte
}

// ForwardLogs makes the node pass each live log chunk its providers post
// on to the API URLs peers returns, until ctx ends.
func (s *Server) ForwardLogs(ctx context.Context, peers func() []string) {
	q := make(chan relayedChunk, forwardQueue)
	for _, rl := range []*logRelay{&s.logs, &s.svcLogs} {
		rl.mu.Lock()
		rl.out = q
		rl.mu.Unlock()
	}
	hc := &http.Client{Timeout: forwardTimeout}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case c := <-q:
				for _, p := range peers() {
					s.postRelayed(ctx, hc, p, c)
				}
			}
		}
	}()
}

func (s *Server) postRelayed(ctx context.Context, hc *http.Client, peer string, c relayedChunk) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, peer+fmt.Sprintf(c.kind.path, c.job), bytes.NewReader(c.data))
	if err != nil {
		return
	}
	req.Header.Set("X-Gpunet-Provider", c.prov.String())
	req.Header.Set("X-Gpunet-Seq", strconv.FormatUint(c.seq, 10))
	req.Header.Set("X-Gpunet-Signature", c.sig)
	req.Header.Set(relayedHeader, "1")
	resp, err := hc.Do(req)
	if err != nil {
		s.log.Debug("relaying a log chunk", "peer", peer, "job", c.job, "err", err)
		return
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
}

// forward queues a chunk for the other nodes, dropping it when the queue
// is full or forwarding is off. The caller holds r.mu.
func (r *logRelay) forward(job, seq uint64, prov address.Address, sig string, data []byte) {
	if r.out == nil {
		return
	}
	select {
	case r.out <- relayedChunk{kind: r.logKind(), job: job, seq: seq, prov: prov, sig: sig, data: data}:
	default:
	}
}

// getLog serves GET /v1/jobs/{id}/logs?from=SEQ. Chunks are ciphertext
// only the owner can read, so reads need no authentication. A page holds
// at most limit chunks and maxLogPageBytes of chunk data (but always one
// chunk when there is one).
func (s *Server) getLog(w http.ResponseWriter, r *http.Request) { s.getLogFrom(w, r, &s.logs) }

// getServiceLog serves GET /v1/services/{id}/logs?from=SEQ, as getLog does
// for jobs: every replica's chunks, each sealed to the owner.
func (s *Server) getServiceLog(w http.ResponseWriter, r *http.Request) {
	s.getLogFrom(w, r, &s.svcLogs)
}

func (s *Server) getLogFrom(w http.ResponseWriter, r *http.Request, rl *logRelay) {
	id, ok := parseJobID(w, r.PathValue("id"))
	if !ok {
		return
	}
	var from uint64
	if f := r.URL.Query().Get("from"); f != "" {
		var err error
		if from, err = strconv.ParseUint(f, 10, 64); err != nil {
			writeError(w, http.StatusBadRequest, 0, "from: want an integer")
			return
		}
	}
	limit := defaultLogPage
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxChunksPerJob {
			writeError(w, http.StatusBadRequest, 0, fmt.Sprintf("limit %q: want an integer from 1 to %d", l, maxChunksPerJob))
			return
		}
		limit = n
	}
	s.sweepLogs(rl)
	rl.mu.Lock()
	defer rl.mu.Unlock()
	page := apiwire.LogPage{Chunks: []apiwire.LogChunk{}, Next: from}
	l := rl.jobs[id]
	if l == nil {
		writeJSON(w, http.StatusOK, page)
		return
	}
	if from < l.first {
		page.Dropped = l.first - from
		from = l.first
	}
	page.Next = max(from, l.next)
	size := 0
	for _, c := range l.chunks {
		if c.Seq >= from {
			if len(page.Chunks) == limit || (len(page.Chunks) > 0 && size+len(c.Data) > maxLogPageBytes) {
				page.Next = c.Seq
				break
			}
			page.Chunks = append(page.Chunks, c)
			size += len(c.Data)
		}
	}
	writeJSON(w, http.StatusOK, page)
}
