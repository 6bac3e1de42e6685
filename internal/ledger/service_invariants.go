package ledger

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/gpunet/gpunet/internal/address"
)

// The services' invariants (registered in invariants.go; slots, escrow,
// supply and market counts include services there).

// readServices decodes every service record, in id order.
func readServices(kv KV) ([]*Service, error) {
	var out []*Service
	var err error
	kv.Iterate(prefixService, prefixEnd(prefixService), func(k, _ []byte) bool {
		if len(k) != len(prefixService)+8 {
			err = fmt.Errorf("invariant: key %x under svc/ is not a service's: %w", k, ErrInternal)
			return false
		}
		id := binary.BigEndian.Uint64(k[len(prefixService):])
		s, ok, e := GetService(kv, id)
		if e != nil || !ok || s.ID != id {
			err = fmt.Errorf("invariant: service record %x unreadable or not service %d's (%v): %w", k, id, e, ErrInternal)
			return false
		}
		out = append(out, s)
		return true
	})
	return out, err
}

// serviceIndexesMatchRecords: the service indexes, which the app hash
// leaves out, are exactly what the records call for:
//   - svcown/: one entry per service, under its owner;
//   - svcprov/: one entry per replica of an active service;
//   - svcact/: the active services;
//   - svcmodel/: each model each active service declares;
//   - svcdue/: one entry per active service with a deadline, at it;
//   - svcq/: the active services with fewer replicas than they want.
func serviceIndexesMatchRecords(s *invariantState) error {
	want := map[string]bool{}
	var last uint64
	for _, sv := range s.services {
		last = max(last, sv.ID)
		want[string(serviceOwnerKey(sv.Owner, sv.ID))] = true
		if sv.Done() {
			continue
		}
		want[string(serviceActiveKey(sv.ID))] = true
		for _, r := range sv.Replicas {
			want[string(serviceProvKey(r.Provider, sv.ID))] = true
		}
		if sv.Spec.OpenAI != nil {
			for _, m := range sv.Spec.OpenAI.Models {
				want[string(serviceModelKey(m, sv.ID))] = true
			}
		}
		if sv.Deadline != 0 {
			want[string(serviceDueKey(sv.Deadline, sv.ID))] = true
		}
		if sv.wantsReplicas() {
			want[string(serviceQueueKey(sv.ID))] = true
		}
	}
	if n := getUint(s.kv, keyNextService); n < last {
		return fmt.Errorf("invariant: the last service id is %d, service %d exists: %w", n, last, ErrInternal)
	}
	var err error
	found := 0
	for _, pre := range [][]byte{prefixServiceOwner, prefixServiceProv, prefixServiceActive, prefixServiceModel, prefixServiceDue, prefixServiceQueue} {
		s.kv.Iterate(pre, prefixEnd(pre), func(k, _ []byte) bool {
			if !want[string(k)] {
				err = fmt.Errorf("invariant: service index entry %q matches no service record: %w", k, ErrInternal)
				return false
			}
			found++
			return true
		})
		if err != nil {
			return err
		}
	}
	if found != len(want) {
		return fmt.Errorf("invariant: %d service index entries, the records call for %d: %w", found, len(want), ErrInternal)
	}
	return nil
}

// serviceAccountsAddUp: each service's budget is what it paid, its fees,
// its refund and its escrow (Cost + Fee + Refund + Escrow = Budget); its
// replicas were paid no more than its cost; a service that ended holds no
// escrow and no replica; an active one has at most the replicas it wants,
// on distinct providers, none excluded; its lists stay within their
// bounds.
func serviceAccountsAddUp(s *invariantState) error {
	for _, sv := range s.services {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("invariant: service %d: "+format+": %w", append(append([]any{sv.ID}, args...), ErrInternal)...)
		}
		if sum := sv.Cost + sv.Fee + sv.Refund + sv.Escrow; sum != sv.Budget || sum < sv.Cost {
			return bad("cost %d + fee %d + refund %d + escrow %d != budget %d", sv.Cost, sv.Fee, sv.Refund, sv.Escrow, sv.Budget)
		}
		var paid uint64
		seen := map[address.Address]bool{}
		for _, r := range sv.Replicas {
			paid += r.Paid
			if seen[r.Provider] {
				return bad("two replicas on %s", r.Provider)
			}
			seen[r.Provider] = true
			if r.Paid > mulDiv(r.PricePerHour, r.ReadySeconds, 3600) {
				return bad("replica on %s paid %d, more than %d ready seconds at %d/h", r.Provider, r.Paid, r.ReadySeconds, r.PricePerHour)
			}
			for i, d := range r.Down {
				if slices.ContainsFunc(r.Down[:i], func(e DownReport) bool { return e.Validator == d.Validator }) {
					return bad("replica on %s: validator %s reported it down twice in one window", r.Provider, d.Validator)
				}
			}
			if len(r.Serve) > serveAttestWindow {
				return bad("replica on %s keeps %d serve tallies, at most %d", r.Provider, len(r.Serve), serveAttestWindow)
			}
			for _, t := range r.Serve {
				if len(t.Witnesses) > maxServeWitnesses {
					return bad("replica on %s: period %d has %d witnesses, at most %d", r.Provider, t.Period, len(t.Witnesses), maxServeWitnesses)
				}
				for i, w := range t.Witnesses {
					if slices.Contains(t.Witnesses[:i], w) {
						return bad("replica on %s: period %d counts witness %s twice", r.Provider, t.Period, w)
					}
				}
			}
		}
		for _, e := range sv.Ended {
			paid += e.Paid
		}
		if paid > sv.Cost {
			return bad("its replicas were paid %d, its cost is %d", paid, sv.Cost)
		}
		switch {
		case sv.Done() && (sv.Escrow != 0 || len(sv.Replicas) != 0):
			return bad("%s with escrow %d and %d replicas", sv.State, sv.Escrow, len(sv.Replicas))
		case !sv.Done() && uint64(len(sv.Replicas)) > sv.Spec.Replicas:
			return bad("%d replicas, wants %d", len(sv.Replicas), sv.Spec.Replicas)
		case len(sv.Ended) > MaxEndedReplicas || len(sv.Excluded) > MaxExcluded:
			return bad("%d ended replicas and %d excluded providers kept", len(sv.Ended), len(sv.Excluded))
		case sv.WaitCode != "" && !sv.wantsReplicas():
			return bad("waits for no replica but has wait code %q", sv.WaitCode)
		}
		if i := slices.IndexFunc(sv.Replicas, func(r Replica) bool { return slices.Contains(sv.Excluded, r.Provider) }); i >= 0 {
			return bad("replica on excluded provider %s", sv.Replicas[i].Provider)
		}
	}
	return nil
}
