package ledger

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
)

// Witnessed service billing (issue 29, docs/ledger.md "Service billing").
// A replica is paid for what witnesses saw it serve, not for its
// provider's word: block time is cut into periods of
// params.service_serve_period seconds (period k is [k·P, (k+1)·P)); the
// node of each validator in the active set probes every ready replica
// through the relay, as a user's request reaches it, and sends the
// replicas it saw answer in a finished period in one MsgAttestServed,
// signed with its consensus key. When the attestations of
// serveWitnessesNeeded distinct validators for a replica and a period are
// in, the replica is paid for the seconds of that period it was ready,
// with service_billing.go's cumulative arithmetic (payServed): a replica
// that answers nothing is never paid, whatever its heartbeats say.
//
// Witnesses are the active validators because they are what this chain
// already makes sybil-resistant: each is bonded stake, so a node that
// anyone can start attests nothing, and neither one witness (when two are
// needed) can make a silent replica paid, nor one withheld attestation
// make an honest replica unpaid while the others attest it. The number
// needed is never more than the active set, so a one-validator chain
// still pays. A chain without an active set (no genesis validators) keeps
// the heartbeat billing it had (settleReplica).
//
// A ready replica that no quorum saw serve over
// params.service_unwitnessed_periods periods in which quorums did see
// other replicas serve is released at its provider's next heartbeat
// (EndUnwitnessed) and replaced; it is not slashed, because a partition
// between it and the validators looks the same as a replica that does not
// serve. Periods in which no replica anywhere reached a quorum (the
// validators' probing is down, or they are cut off from everyone) do not
// count against anyone.

// MsgTypeAttestServed is the witnesses' message.
const MsgTypeAttestServed MsgType = 83

// Bounds of witnessed billing.
const (
	// maxServeWitnesses bounds params.service_serve_witnesses, and so
	// each tally's list.
	maxServeWitnesses = 16
	// maxUnwitnessedPeriods bounds params.service_unwitnessed_periods:
	// it must fit the quorum record's window with room for the attest
	// window.
	maxUnwitnessedPeriods = serveQuorumBits - serveAttestWindow - 2
	// serveAttestWindow is how many finished periods stay open to
	// attestations: period k may be attested while the current period
	// is k+1 … k+serveAttestWindow.
	serveAttestWindow = 4
	// MaxServedReplicas bounds one MsgAttestServed's list.
	MaxServedReplicas = 256
	// serveQuorumBits is how many recent periods the chain remembers
	// having seen some replica reach a quorum (keyServeQuorum).
	serveQuorumBits = 64
)

// ServedReplica names a replica: a service and its provider.
type ServedReplica struct {
	ServiceID uint64          `json:"service_id"`
	Provider  address.Address `json:"provider"`
}

// MsgAttestServed is a witness's word that it saw each listed replica
// answer during Period (block time / params.service_serve_period). The tx
// must be signed with the consensus key of a validator in the active set;
// the list is sorted by service, then provider, without repeats.
type MsgAttestServed struct {
	Period   uint64          `json:"period"`
	Replicas []ServedReplica `json:"replicas"`
}

// Type implements Msg.
func (*MsgAttestServed) Type() MsgType { return MsgTypeAttestServed }

// ValidateBasic implements Msg.
func (m *MsgAttestServed) ValidateBasic() error {
	if m.Period == 0 {
		return invalid("period is 0: want the period (block time / service_serve_period) the replicas were seen serving in")
	}
	return validateReplicaList(m.Replicas, MaxServedReplicas)
}

// validateReplicaList checks a message's list of replicas: 1 to limit of
// them, each naming a service and a provider, sorted by service, then
// provider, without repeats (attest_served, report_replica_down).
func validateReplicaList(rs []ServedReplica, limit int) error {
	if len(rs) == 0 || len(rs) > limit {
		return invalid("replicas: want 1 to %d, got %d", limit, len(rs))
	}
	for i, r := range rs {
		if r.ServiceID == 0 {
			return invalid("replicas[%d]: service_id is 0", i)
		}
		if r.Provider.IsZero() {
			return invalid("replicas[%d]: provider is empty", i)
		}
		if i > 0 && cmpServed(rs[i-1], r) >= 0 {
			return invalid("replicas[%d]: service %d provider %s is out of order or repeated: sort by service_id, then provider", i, r.ServiceID, r.Provider)
		}
	}
	return nil
}

func cmpServed(a, b ServedReplica) int {
	if a.ServiceID != b.ServiceID {
		return cmpUint(a.ServiceID, b.ServiceID)
	}
	return bytes.Compare(a.Provider[:], b.Provider[:])
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// SortServed sorts a list of replicas as MsgAttestServed wants it.
func SortServed(rs []ServedReplica) { slices.SortFunc(rs, cmpServed) }

// witnessedBilling reports whether services are paid on witnesses' word:
// whenever the chain has an active validator set.
func witnessedBilling(kv KV) bool {
	found := false
	kv.Iterate(prefixValSet, prefixEnd(prefixValSet), func(_, _ []byte) bool {
		found = true
		return false
	})
	return found
}

// IsServeWitness reports whether the holder of the ed25519 key pub may
// attest replicas: a validator in the active set.
func IsServeWitness(kv KV, pub []byte) bool {
	return len(pub) == 32 && kv.Get(valSetKey(ConsAddressOf(pub))) != nil
}

// ServeWitnessesNeeded is how many distinct witnesses must attest a
// replica's period for it to be paid: params.service_serve_witnesses, but
// never more than the active set.
func ServeWitnessesNeeded(kv KV, p Params) uint64 {
	return min(p.ServiceServeWitnesses, uint64(len(activeSet(kv))))
}

// ServePeriod is the period block time t falls in.
func ServePeriod(t int64, p Params) uint64 {
	if t <= 0 || p.ServiceServePeriod == 0 {
		return 0
	}
	return uint64(t) / p.ServiceServePeriod
}

// servedSeconds is how many seconds of period k r was ready for.
func (r *Replica) servedSeconds(k uint64, p Params) uint64 {
	if r.ReadyAt <= 0 {
		return 0
	}
	start, end := k*p.ServiceServePeriod, (k+1)*p.ServiceServePeriod
	start = max(start, uint64(r.ReadyAt))
	if end <= start {
		return 0
	}
	return end - start
}

// keyServeQuorum records which recent periods saw some replica reach a
// quorum: 8 bytes of the newest such period, then a 64-bit mask whose bit
// i is set when period newest−i did.
var keyServeQuorum = []byte("svcs/quorum")

func getServeQuorum(kv KV) (newest, mask uint64) {
	b := kv.Get(keyServeQuorum)
	if len(b) != 16 {
		return 0, 0
	}
	return binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])
}

// noteServeQuorum records that some replica reached a quorum for period k.
func noteServeQuorum(o *Overlay, k uint64) {
	newest, mask := getServeQuorum(o)
	switch {
	case mask == 0 || k >= newest+serveQuorumBits:
		newest, mask = k, 1
	case k > newest:
		mask = mask<<(k-newest) | 1
		newest = k
	case newest-k < serveQuorumBits:
		mask |= 1 << (newest - k)
	default:
		return // older than the record reaches
	}
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, newest)
	binary.BigEndian.PutUint64(b[8:], mask)
	o.Set(keyServeQuorum, b)
}

// quorumPeriodsAfter counts the periods after `after` and before `before`
// in which some replica reached a quorum (as far back as the record
// reaches).
func quorumPeriodsAfter(kv KV, after, before uint64) uint64 {
	newest, mask := getServeQuorum(kv)
	var n uint64
	for i := range uint64(serveQuorumBits) {
		if mask&(1<<i) == 0 || i > newest {
			continue
		}
		if k := newest - i; k > after && k < before {
			n++
		}
	}
	return n
}

// unwitnessed reports whether r, ready, has gone unseen by a quorum over
// params.service_unwitnessed_periods periods in which quorums saw other
// replicas serve, at block time now. Periods still open to attestations
// do not count yet.
func (r *Replica) unwitnessed(kv KV, now int64, p Params) bool {
	if r.ReadyAt <= 0 {
		return false
	}
	last := max(r.ServedPeriod, ServePeriod(r.ReadyAt, p))
	cur := ServePeriod(now, p)
	if cur <= serveAttestWindow {
		return false
	}
	return quorumPeriodsAfter(kv, last, cur-serveAttestWindow) >= p.ServiceUnwitnessedPeriods
}

// unwitnessedSeconds is how long the rule's periods last, for the record.
func unwitnessedSeconds(p Params) uint64 { return p.ServiceUnwitnessedPeriods * p.ServiceServePeriod }

// payServed pays r for secs more seconds served, cumulatively: after it,
// r has been paid price × ReadySeconds / 3600 and the fee of that total
// (less when the escrow runs out: exhausted).
func payServed(o *Overlay, s *Service, r *Replica, secs uint64, p Params) (exhausted bool, err error) {
	if secs == 0 {
		return false, nil
	}
	total := mulDiv(r.PricePerHour, r.ReadySeconds+secs, 3600)
	cost := total - min(total, r.Paid)
	fee := protocolFee(total, p) - min(protocolFee(total, p), protocolFee(r.Paid, p))
	r.ReadySeconds += secs
	if cost+fee > s.Escrow {
		cost = min(cost, mulDiv(s.Escrow, 10_000, 10_000+p.ProtocolFeeBps))
		fee = min(fee, s.Escrow-cost)
		exhausted = true
	}
	return exhausted, payReplica(o, s, r, cost, fee)
}

func execAttestServed(o *Overlay, pub []byte, m *MsgAttestServed, p Params, info BlockInfo) ([]Event, error) {
	if !IsServeWitness(o, pub) {
		return nil, fmt.Errorf("the signer (consensus address %s) is not a validator in the active set: only they witness service replicas: %w",
			ConsAddressOf(pub), ErrNotServiceParty)
	}
	witness := ConsAddressOf(pub)
	if !info.Time.IsZero() {
		// CheckTx has no block time: the block checks the period.
		cur := ServePeriod(info.Time.Unix(), p)
		switch {
		case m.Period >= cur:
			return nil, fmt.Errorf("period %d is not over (the current period is %d): %w", m.Period, cur, ErrServiceState)
		case m.Period+serveAttestWindow < cur:
			return nil, fmt.Errorf("period %d is stale: the current period is %d, attestations are taken for %d periods after one ends: %w",
				m.Period, cur, serveAttestWindow, ErrServiceState)
		}
	}
	need := ServeWitnessesNeeded(o, p)
	now := info.Time.Unix()
	var events []Event
	for _, sr := range m.Replicas {
		s, ok, err := GetService(o, sr.ServiceID)
		if err != nil {
			return nil, err
		}
		i := -1
		if ok && !s.Done() {
			i = s.replica(sr.Provider)
		}
		if i < 0 {
			// Stopped, scaled down or moved since the witness looked:
			// nothing to pay.
			continue
		}
		old := s.Deadline
		r := &s.Replicas[i]
		secs := r.servedSeconds(m.Period, p)
		if secs == 0 {
			continue // not ready in that period: nothing to pay
		}
		t := r.tally(m.Period, ServePeriod(now, p))
		if slices.Contains(t.Witnesses, witness) {
			return nil, fmt.Errorf("%s already attested service %d's replica on %s for period %d: %w", witness, s.ID, sr.Provider, m.Period, ErrServiceState)
		}
		if t.Paid {
			continue // a quorum is in; a later witness adds nothing
		}
		t.Witnesses = append(t.Witnesses, witness)
		if uint64(len(t.Witnesses)) < need {
			setService(o, s, old)
			continue
		}
		t.Paid = true
		r.ServedPeriod = max(r.ServedPeriod, m.Period)
		noteServeQuorum(o, m.Period)
		exhausted, err := payServed(o, s, r, secs, p)
		if err != nil {
			return nil, err
		}
		events = append(events, serviceEvent("service_replica_served", s, Attr{"provider", sr.Provider.String()},
			Attr{"period", strconv.FormatUint(m.Period, 10)}, Attr{"seconds", strconv.FormatUint(secs, 10)}, Attr{"paid", strconv.FormatUint(r.Paid, 10)}))
		if exhausted {
			evs, err := finishService(o, s, p, now, old, ServiceStopped, budgetEnd(s, now))
			if err != nil {
				return nil, err
			}
			events = append(events, evs...)
			continue
		}
		if info.Time.IsZero() {
			setService(o, s, old)
			continue
		}
		events = append(events, refreshService(o, s, p, now, old)...)
	}
	return events, nil
}

// tally returns r's tally of period k, made if it has none, after
// dropping the tallies no longer open to attestations in period cur (0:
// unknown, in CheckTx).
func (r *Replica) tally(k, cur uint64) *ServeTally {
	cur = max(cur, k+1)
	r.Serve = slices.DeleteFunc(r.Serve, func(t ServeTally) bool { return t.Period+serveAttestWindow < cur })
	for i := range r.Serve {
		if r.Serve[i].Period == k {
			return &r.Serve[i]
		}
	}
	i, _ := slices.BinarySearchFunc(r.Serve, k, func(t ServeTally, k uint64) int { return cmpUint(t.Period, k) })
	r.Serve = slices.Insert(r.Serve, i, ServeTally{Period: k, Witnesses: []ConsAddress{}})
	// A block takes periods cur−serveAttestWindow … cur−1 only, so at
	// most serveAttestWindow tallies remain (the invariant checks it).
	return &r.Serve[i]
}
