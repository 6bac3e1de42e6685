package ledger

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
)

// The TEE market (issue 31): trust is a priced dimension. Beside each
// class's plain index (market.go) the ledger keeps a second book, the TEE
// book, with an index per class computed the same way from its own live
// counts:
//
//   - offered: the units of online providers whose attestation counts
//     (teeCounts: accepted, not lapsed, over the key the provider declares
//     now), per class of their asks;
//   - reserved: the units that trust: tee jobs' slot-holding assignments
//     and trust: tee services' replicas reserve, self-dealing left out.
//
// The TEE book is a sub-market of the plain one: its offers and its work
// count in the plain book too. Scarce attested capacity thus raises the
// TEE index on its own while the plain index follows the whole class. A
// trust: tee job pays, per unit-hour,
//
//	max(ask, max(plain index, TEE index) × tier factor)
//
// so it never pays less than a plain job of its class would: attested
// capacity is plain capacity too, and an attested provider should not earn
// less for the stricter work when the TEE book is quieter than the plain
// one. A chain without attested providers has no TEE book at all: its
// app hashes are those of before.
//
// An attestation expires at a block time, not at a tx: so that the
// counts stay a function of the records, the first block at or after an
// attestation's expiry lapses it (Attestation.Lapsed, lapseAttestations):
// the provider's units leave the TEE book, and the replicas its trust: tee
// services run there end (EndTEELapsed) and are placed again on attested
// providers. A provider that renews in time never lapses; one that lapsed
// counts again once new evidence is accepted. The sweep reads teeexp/, an
// index of the unlapsed attestations by expiry, so it costs the
// attestations that lapse, whatever the number of providers.

// teeCounts reports whether p's offers count in the TEE book: an accepted
// attestation that has not lapsed, over the encryption key p declares
// now. (offeredUnits adds: online, per ask.)
func teeCounts(p *Provider) bool {
	a := p.TEE
	return a != nil && a.Kind != "" && !a.Lapsed && a.Key == p.EncryptionKey
}

// teeOfferedUnits is what p offers in the TEE book per class: its
// offeredUnits when its attestation counts, nothing otherwise.
func teeOfferedUnits(p *Provider) map[string]uint64 {
	if p == nil || !teeCounts(p) {
		return nil
	}
	return offeredUnits(p)
}

// teeUnitPrice is what a trust: tee job of tier pays per unit-hour in
// class before the ask: the larger of the plain and the TEE index price.
func teeUnitPrice(kv KV, class string, p Params, tier string) (uint64, error) {
	plain, err := plainBook.orFloor(kv, class, p)
	if err != nil {
		return 0, err
	}
	tee, err := teeBook.orFloor(kv, class, p)
	if err != nil {
		return 0, err
	}
	return max(plain.PricePerUnit(p, tier), tee.PricePerUnit(p, tier)), nil
}

// trustUnitPrice is marketUnitPrice for a job of trust (TrustTEE or "").
func trustUnitPrice(kv KV, class string, p Params, tier, trust string) (uint64, error) {
	if trust == TrustTEE {
		return teeUnitPrice(kv, class, p, tier)
	}
	return marketUnitPrice(kv, class, p, tier)
}

// serviceTEEReserve is serviceMarketReserve's share in the TEE book.
func serviceTEEReserve(o *Overlay, s *Service, r *Replica, d int64) {
	if s.Spec.Trust != TrustTEE || s.Owner == r.Provider {
		return
	}
	view := s.Spec.JobView()
	teeBook.reserve(o, r.Class, d*int64(view.Units()))
}

// teeExpiryKey is p's entry in the expiry index: teeexp/<expiry><address>.
func teeExpiryKey(expiry int64, a address.Address) []byte {
	return append(u64(slices.Clone(prefixTEEExpiry), uint64(max(expiry, 0))), a[:]...)
}

// teeExpiryEntry is p's key in the expiry index; nil when p has no
// accepted attestation that has not lapsed.
func teeExpiryEntry(p *Provider) []byte {
	if p == nil || p.TEE == nil || p.TEE.Kind == "" || p.TEE.Lapsed {
		return nil
	}
	return teeExpiryKey(p.TEE.Expiry, p.Address)
}

// reindexTEEExpiry keeps the expiry index in step with a provider write
// (setProviderFrom).
func reindexTEEExpiry(o *Overlay, old, p *Provider) {
	before, after := teeExpiryEntry(old), teeExpiryEntry(p)
	if bytes.Equal(before, after) {
		return
	}
	if before != nil {
		o.Delete(before)
	}
	if after != nil {
		o.Set(after, []byte{1})
	}
}

// lapseAttestations lapses, at the start of a block, every attestation
// whose expiry is at or before its time, and replaces the trust: tee
// service replicas of those providers.
func lapseAttestations(o *Overlay, p Params, info BlockInfo) ([]Event, error) {
	now := info.Time.Unix()
	if now < 0 {
		return nil, nil
	}
	var due []address.Address
	end := teeExpiryKey(now+1, address.Address{})
	o.Iterate(prefixTEEExpiry, end, func(k, _ []byte) bool {
		var a address.Address
		copy(a[:], k[len(prefixTEEExpiry)+8:])
		due = append(due, a)
		return true
	})
	var events []Event
	for _, addr := range due {
		pr, err := mustProvider(o, addr)
		if err != nil {
			return nil, err
		}
		before := *pr
		a := *pr.TEE
		a.Lapsed = true
		pr.TEE = &a
		setProviderFrom(o, &before, pr)
		events = append(events, Event{Type: "attestation_lapsed", Attrs: []Attr{
			{"provider", addr.String()}, {"expiry", strconv.FormatInt(a.Expiry, 10)},
		}})
		evs, err := dropTEEReplicasOf(o, addr, p, now)
		if err != nil {
			return nil, err
		}
		events = append(events, evs...)
	}
	return events, nil
}

// dropTEEReplicasOf ends the replicas of trust: tee services on provider,
// whose attestation lapsed or no longer covers its declared key: paid to its last heartbeat (as a provider that
// went offline), not excluded (it may attest again), not a failure; the
// service places the replica again on an attested provider.
func dropTEEReplicasOf(o *Overlay, provider address.Address, p Params, now int64) ([]Event, error) {
	tee := func(s *Service) bool { return s.Spec.Trust == TrustTEE }
	return endReplicasOf(o, provider, tee, ReplicaEnd{Code: EndTEELapsed}, false, p, now)
}

// teeExpiryIndexMatchesProviders: teeexp/ lists exactly the providers with
// an accepted attestation that has not lapsed, at its expiry.
func teeExpiryIndexMatchesProviders(s *invariantState) error {
	want := map[string]bool{}
	for _, p := range s.providers {
		if k := teeExpiryEntry(p); k != nil {
			want[string(k)] = true
		}
	}
	n := 0
	var err error
	s.kv.Iterate(prefixTEEExpiry, prefixEnd(prefixTEEExpiry), func(k, _ []byte) bool {
		if !want[string(k)] {
			err = fmt.Errorf("invariant: TEE expiry index entry %x matches no unlapsed attestation: %w", k, ErrInternal)
			return false
		}
		n++
		return true
	})
	if err == nil && n != len(want) {
		err = fmt.Errorf("invariant: TEE expiry index has %d entries, the provider records %d unlapsed attestations: %w", n, len(want), ErrInternal)
	}
	return err
}
