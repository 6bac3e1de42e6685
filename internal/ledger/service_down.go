package ledger

import (
	"fmt"
	"slices"
	"strconv"
)

// Replicas reported down (issue 36, docs/ledger.md "Replicas reported
// down"). A replica whose provider dies is otherwise ended only when its
// heartbeats have been missing for params.service_heartbeat_timeout; a
// node that sees it gone can say so sooner. The node of a validator in the
// active set that fails to reach a ready replica through the relay (a
// dial of its gateway fails, and a readiness probe through the relay
// confirms it: internal/relay ProbeDown, internal/daemon replicadown.go)
// sends MsgReportReplicaDown, signed with its consensus key as
// MsgAttestServed is. When validators holding more than two thirds of the
// active set's voting power have reported the same replica within
// replicaDownWindow blocks, the ledger ends it at once as if its
// heartbeats had timed out: paid for its witnessed periods only (without
// witnesses, to its last heartbeat), its provider excluded from the
// service, not a failure, never slashed, and replaced in the same block
// (placement runs at the end of every block).
//
// Why more than two thirds, and not one third: ending a replica costs its
// provider the replica and a place in the service, so no minority of the
// power may do it to an honest one. Under CometBFT's own assumption (less
// than a third of the power faulty), more than two thirds reporting means
// honest validators holding more than a third could not reach it. The
// price is that validators holding a third can withhold their reports and
// keep the fast path shut; the heartbeat timeout still ends a dead
// replica then, so withholding only slows a failover to what it was
// before, and a chain that commits blocks has more than two thirds of its
// power online to report. A one-validator chain (the devnet) has all the
// power in one node, whose report alone ends a replica.
//
// Why no slash: unreachable is not proof of cheating. A replica that the
// validators cannot reach may be one whose provider's link or relay node
// failed, which looks the same from every node as a dead provider.
//
// Heartbeats do not outvote reports: a replica whose provider still sends
// them is ended all the same when the power reports it, since a provider
// that heartbeats but cannot be reached serves no one.

// MsgTypeReportReplicaDown is the reporting validators' message.
const MsgTypeReportReplicaDown MsgType = 84

// Bounds of reports.
const (
	// MaxDownReplicas bounds one MsgReportReplicaDown's list.
	MaxDownReplicas = 64
	// replicaDownWindow is how many blocks a report counts for: a
	// report made at height h is counted with those of later blocks up
	// to h+replicaDownWindow−1, then forgotten. One validator reports a
	// replica at most once in it.
	replicaDownWindow = 20
)

// MsgReportReplicaDown is a validator's word that its node could not
// reach each listed replica through the relay. The tx must be signed with
// the consensus key of a validator in the active set; the list (1 to
// MaxDownReplicas) is sorted by service, then provider, without repeats.
type MsgReportReplicaDown struct {
	Replicas []ServedReplica `json:"replicas"`
}

// Type implements Msg.
func (*MsgReportReplicaDown) Type() MsgType { return MsgTypeReportReplicaDown }

// ValidateBasic implements Msg.
func (m *MsgReportReplicaDown) ValidateBasic() error {
	return validateReplicaList(m.Replicas, MaxDownReplicas)
}

// DownReport is one validator's report that a replica is down, at a
// height.
type DownReport struct {
	Validator ConsAddress `json:"validator"`
	Height    uint64      `json:"height"`
}

// downReportsOpen drops r's reports that are too old to count at height h.
func (r *Replica) downReportsOpen(h uint64) {
	r.Down = slices.DeleteFunc(r.Down, func(d DownReport) bool { return d.Height+replicaDownWindow <= h })
	if len(r.Down) == 0 {
		r.Down = nil
	}
}

// downPower is the voting power of the active set's validators among
// reports, and the set's total.
func downPower(set []ValidatorPower, reports []DownReport) (reported, total uint64) {
	for _, v := range set {
		total += v.Power
		if slices.ContainsFunc(reports, func(d DownReport) bool { return d.Validator == v.Address }) {
			reported += v.Power
		}
	}
	return reported, total
}

// downQuorum reports whether reported is more than two thirds of total.
// CometBFT keeps the total power below 2^60, so neither product
// overflows.
func downQuorum(reported, total uint64) bool { return total > 0 && 3*reported > 2*total }

func execReportReplicaDown(o *Overlay, pub []byte, m *MsgReportReplicaDown, p Params, info BlockInfo) ([]Event, error) {
	if !IsServeWitness(o, pub) {
		return nil, fmt.Errorf("the signer (consensus address %s) is not a validator in the active set: only they report replicas down: %w",
			ConsAddressOf(pub), ErrNotServiceParty)
	}
	validator := ConsAddressOf(pub)
	h := uint64(info.Height)
	if h == 0 {
		h = Height(o) + 1 // CheckTx: the next block's
	}
	set := activeSet(o)
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
		if i < 0 || s.Replicas[i].ReadyAt == 0 {
			// Ended, moved, or never ready since the node looked:
			// nothing to end.
			continue
		}
		old := s.Deadline
		r := &s.Replicas[i]
		r.downReportsOpen(h)
		if slices.ContainsFunc(r.Down, func(d DownReport) bool { return d.Validator == validator }) {
			return nil, fmt.Errorf("%s already reported service %d's replica on %s down in the last %d blocks: %w",
				validator, s.ID, sr.Provider, replicaDownWindow, ErrServiceState)
		}
		r.Down = append(r.Down, DownReport{Validator: validator, Height: h})
		reported, total := downPower(set, r.Down)
		events = append(events, serviceEvent("service_replica_reported_down", s, Attr{"provider", sr.Provider.String()},
			Attr{"validator", validator.String()}, Attr{"power", strconv.FormatUint(reported, 10)}, Attr{"of", strconv.FormatUint(total, 10)}))
		if !downQuorum(reported, total) || info.Time.IsZero() {
			// Short of the power, or CheckTx (no block time): the
			// tally is kept.
			setService(o, s, old)
			continue
		}
		// As expireServices ends a silent replica: paid for what is
		// already paid (no settling), excluded, not a failure, not
		// slashed; setService queues its replacement, which the end of
		// this block places.
		ev, err := endReplica(o, s, i, now, ReplicaEnd{Code: EndUnreachable}, true, false)
		if err != nil {
			return nil, err
		}
		evs, err := afterFailure(o, s, p, now, old, false)
		if err != nil {
			return nil, err
		}
		events = append(append(events, ev), evs...)
	}
	return events, nil
}
