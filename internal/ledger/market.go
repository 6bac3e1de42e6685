package ledger

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
)

// The market: per hardware class, a price index that follows utilisation
// (DESIGN.md section 6, issue 14), and the tiers a job pays it in.
//
// Utilisation is measured from the ledger's own state. For each class the
// ledger keeps two live counts (mktl/<class>, derived like the scheduler's
// index and left out of the app hash): the units online providers offer
// in it (a GPU class's GPUs, or cores for "cpu", of every online provider
// with an ask in it) and the units assignments reserve (placed or running,
// holding a slot; Spec.Units each). setProviderFrom and the places an
// assignment takes or frees a slot keep them in step, so nothing is
// scanned at an epoch's end. At the end of every block, a class whose
// counts changed integrates the old counts over the time since its last
// change (unit-seconds, hashed in its record); at the end of an epoch
// (params.epoch_blocks) every class's utilisation u = reserved / offered
// unit-seconds moves its index:
//
//	ema'   = ema + smoothing × (u − ema)
//	index' = index × (1 + step × clamp((ema' − target) / target, −1, 1))
//
// clamped to [params.market_floor, params.market_ceiling]. The index thus
// moves by at most one step an epoch: an idle epoch (u = 0) takes it down
// one step at most, toward the floor, and never to zero. Work where the
// job's owner is its provider's address does not count (that is the
// self-dealing the ledger can see; rewards.go caps what undetected
// self-dealing can earn).
//
// A job pays, per unit-hour, max(the provider's ask, index × its tier's
// factor), never more than its max_price_per_hour (per unit): a job whose
// classes' market price is above its ceiling waits with QuoteOverMarket.

// Tiers a job may name (JobSpec.Tier); "" is on-demand.
const (
	TierSpot     = "spot"      // cheapest; preempted by a higher tier when nothing else fits
	TierOnDemand = "on-demand" // the default
	TierPriority = "priority"  // placed first, at a higher factor
)

// Tiers lists the tiers, cheapest first.
var Tiers = []string{TierSpot, TierOnDemand, TierPriority}

// MarketHistoryEpochs is how many closed epochs each class keeps for
// queries.
const MarketHistoryEpochs = 256

// TierName is the spec's tier, "" read as on-demand.
func (s *JobSpec) TierName() string {
	if s.Tier == "" {
		return TierOnDemand
	}
	return s.Tier
}

// tierRank orders the tiers: a job may preempt assignments of lower rank.
// An unknown tier is −1.
func tierRank(tier string) int {
	switch tier {
	case TierSpot:
		return 0
	case TierOnDemand, "":
		return 1
	case TierPriority:
		return 2
	}
	return -1
}

// TierFactorPPM is what a tier multiplies the index by, in parts per
// million.
func (p Params) TierFactorPPM(tier string) uint64 {
	switch tier {
	case TierSpot:
		return p.TierSpotPPM
	case TierPriority:
		return p.TierPriorityPPM
	}
	return p.TierOnDemandPPM
}

// validateMarketParams checks the rules that tie the market's and the
// rewards' parameters together (each one's own bounds are in the
// registry, paramreg.go).
func (p Params) validateMarketParams() error {
	switch {
	case p.MarketCeiling < p.MarketFloor:
		return fmt.Errorf("params.market_floor %d above market_ceiling %d", p.MarketFloor, p.MarketCeiling)
	case p.MarketTargetPPM == 0 || p.MarketTargetPPM >= ppm:
		return fmt.Errorf("params.market_target_ppm %d out of range [1, 999999]: a target of 100%% can never be exceeded", p.MarketTargetPPM)
	case p.TierSpotPPM > p.TierOnDemandPPM || p.TierOnDemandPPM > p.TierPriorityPPM:
		return fmt.Errorf("params.tier_*_ppm %d, %d, %d: want spot <= on-demand <= priority", p.TierSpotPPM, p.TierOnDemandPPM, p.TierPriorityPPM)
	case p.FeeBurnPPM+p.ValidatorFeeSharePPM > ppm:
		return fmt.Errorf("params.fee_burn_ppm %d + validator_fee_share_ppm %d above 1000000: the fee split cannot give away more than the fees", p.FeeBurnPPM, p.ValidatorFeeSharePPM)
	}
	return nil
}

// marketCounts are a class's live units: offered by online providers and
// reserved by assignments that hold a slot.
type marketCounts struct{ offered, reserved uint64 }

func marketLiveKey(class string) []byte {
	return append(slices.Clone(prefixMarketLive), class...)
}

func getMarketCounts(kv KV, class string) marketCounts {
	b := kv.Get(marketLiveKey(class))
	if len(b) != 16 {
		return marketCounts{}
	}
	return marketCounts{binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])}
}

func setMarketCounts(o *Overlay, class string, c marketCounts) {
	if c == (marketCounts{}) {
		if o.Get(marketLiveKey(class)) != nil {
			o.Delete(marketLiveKey(class))
		}
		return
	}
	o.Set(marketLiveKey(class), binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, c.offered), c.reserved))
}

// addUnits adds d (which may be negative) to a count, stopping at zero: the
// counts and the records agree (an invariant), so it never has to.
func addUnits(v uint64, d int64) uint64 {
	if d < 0 {
		return v - min(v, uint64(-d))
	}
	return v + uint64(d)
}

// offeredUnits is what an online provider offers per class of its asks.
func offeredUnits(p *Provider) map[string]uint64 {
	if p == nil || !p.Online {
		return nil
	}
	out := make(map[string]uint64, len(p.Asks))
	for _, a := range p.Asks {
		if a.Class == CPUClass {
			out[a.Class] = p.Inventory.CPUCores
			continue
		}
		for _, g := range p.Inventory.GPUs {
			if g.Class == a.Class {
				out[a.Class]++
			}
		}
	}
	return out
}

// adjustOffered moves the offered counts from old's to p's (either may be
// nil). Called by setProviderFrom for every provider write.
func adjustOffered(o *Overlay, old, p *Provider) {
	if (old == nil || !old.Online) && (p == nil || !p.Online) {
		return
	}
	before, after := offeredUnits(old), offeredUnits(p)
	classes := make([]string, 0, len(before)+len(after))
	for c := range before {
		classes = append(classes, c)
	}
	for c := range after {
		if _, ok := before[c]; !ok {
			classes = append(classes, c)
		}
	}
	slices.Sort(classes) // the writes do not depend on map order
	for _, c := range classes {
		if before[c] == after[c] {
			continue
		}
		n := getMarketCounts(o, c)
		n.offered = addUnits(n.offered, int64(after[c])-int64(before[c]))
		setMarketCounts(o, c, n)
	}
}

// countsInMarket reports whether a's work in j counts toward the market
// and the rewards: not when the job's owner is the provider.
func countsInMarket(j *Job, a *Assignment) bool { return j.Owner != a.Provider }

// marketReserve adds (d = +1) or removes (d = −1) what assignment a of j
// reserves in its class. Called where a slot is taken (holdTentative) and
// freed (releaseAssignment, execCommitResult).
func marketReserve(o *Overlay, j *Job, a *Assignment, d int64) {
	if a == nil || !countsInMarket(j, a) {
		return
	}
	n := getMarketCounts(o, a.Class)
	n.reserved = addUnits(n.reserved, d*int64(j.Spec.Units()))
	setMarketCounts(o, a.Class, n)
}

// MarketClass is a hardware class's market record: its index, its
// smoothed utilisation, and the open epoch's unit-seconds.
type MarketClass struct {
	Class string `json:"class"`
	// IndexMicro is the index in millionths of a usync per unit-hour.
	IndexMicro uint64 `json:"index_micro"`
	// EMAPPM is the smoothed utilisation, LastPPM the last closed
	// epoch's, in parts per million.
	EMAPPM  uint64 `json:"ema_ppm"`
	LastPPM uint64 `json:"last_ppm"`
	// Offered and Reserved are the units counted since Since (block time);
	// AccOffered and AccReserved the unit-seconds of the open epoch up to
	// Since.
	Offered     uint64 `json:"offered_units"`
	Reserved    uint64 `json:"reserved_units"`
	Since       int64  `json:"since"`
	AccOffered  uint64 `json:"acc_offered"`
	AccReserved uint64 `json:"acc_reserved"`
}

// Index is the index in usync per unit-hour, rounded down.
func (c *MarketClass) Index() uint64 { return c.IndexMicro / ppm }

// PricePerUnit is what tier pays per unit-hour of this class at the
// index (before the ask: a job pays the larger), rounded down.
func (c *MarketClass) PricePerUnit(p Params, tier string) uint64 {
	return mulDiv(c.IndexMicro, p.TierFactorPPM(tier), ppm*ppm)
}

const marketClassVersion = 1

func (c *MarketClass) encode() []byte {
	e := &encoder{buf: []byte{marketClassVersion}}
	for _, v := range []uint64{c.IndexMicro, c.EMAPPM, c.LastPPM, c.Offered, c.Reserved} {
		e.uvarint(v)
	}
	e.int64(c.Since)
	e.uvarint(c.AccOffered)
	e.uvarint(c.AccReserved)
	return e.buf
}

func decodeMarketClass(class string, b []byte) (*MarketClass, error) {
	if len(b) < 1 || b[0] != marketClassVersion {
		return nil, fmt.Errorf("market record of %q: bad version: %w", class, ErrInternal)
	}
	d := decoder{buf: b, off: 1}
	c := &MarketClass{Class: class}
	for _, v := range []*uint64{&c.IndexMicro, &c.EMAPPM, &c.LastPPM, &c.Offered, &c.Reserved} {
		*v = d.uvarint("market")
	}
	c.Since = d.int64("since")
	c.AccOffered = d.uvarint("acc_offered")
	c.AccReserved = d.uvarint("acc_reserved")
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("market record of %q: %w: %w", class, err, ErrInternal)
	}
	return c, nil
}

func marketClassKey(class string) []byte { return append(slices.Clone(prefixMarketClass), class...) }

// GetMarketClass reads a class's market record; ok is false for a class
// that never had offers or reservations.
func GetMarketClass(kv KV, class string) (*MarketClass, bool, error) {
	b := kv.Get(marketClassKey(class))
	if b == nil {
		return nil, false, nil
	}
	c, err := decodeMarketClass(class, b)
	return c, err == nil, err
}

// newMarketClass is a class's record when it first has offers: the index
// at the floor, the smoothed utilisation at the target (neutral).
func newMarketClass(class string, p Params, now int64) *MarketClass {
	return &MarketClass{Class: class, IndexMicro: p.MarketFloor * ppm, EMAPPM: p.MarketTargetPPM, Since: now}
}

// accrue integrates the counts since c.Since up to now.
func (c *MarketClass) accrue(now int64) {
	dt := uint64(max(now-c.Since, 0))
	c.AccOffered += c.Offered * dt
	c.AccReserved += c.Reserved * dt
	c.Since = max(now, c.Since)
}

// close ends the epoch for c: its utilisation, the EMA and the index's
// step. It returns the epoch's summary.
func (c *MarketClass) close(p Params) MarketEpoch {
	var u uint64
	switch {
	case c.AccOffered > 0:
		u = min(mulDiv(c.AccReserved, ppm, c.AccOffered), ppm)
	case c.AccReserved > 0:
		u = ppm // reserved with nothing offered (its providers left mid-job)
	}
	s := p.MarketSmoothingPPM
	c.LastPPM = u
	c.EMAPPM = (c.EMAPPM*(ppm-s) + u*s) / ppm
	t := p.MarketTargetPPM
	if c.EMAPPM >= t {
		dev := min(mulDiv(c.EMAPPM-t, ppm, t), ppm)
		c.IndexMicro = mulDiv(c.IndexMicro, ppm+mulDiv(p.MarketStepPPM, dev, ppm), ppm)
	} else {
		dev := mulDiv(t-c.EMAPPM, ppm, t)
		c.IndexMicro = mulDiv(c.IndexMicro, ppm-mulDiv(p.MarketStepPPM, dev, ppm), ppm)
	}
	c.IndexMicro = min(max(c.IndexMicro, p.MarketFloor*ppm), p.MarketCeiling*ppm)
	e := MarketEpoch{UtilisationPPM: u, EMAPPM: c.EMAPPM, IndexMicro: c.IndexMicro, OfferedUnitSeconds: c.AccOffered, ReservedUnitSeconds: c.AccReserved}
	c.AccOffered, c.AccReserved = 0, 0
	return e
}

// MarketEpoch is one closed epoch of a class: its utilisation and the
// index it left.
type MarketEpoch struct {
	Epoch               uint64 `json:"epoch"`
	Height              uint64 `json:"height"` // the block that closed it
	Time                int64  `json:"time"`
	UtilisationPPM      uint64 `json:"utilisation_ppm"`
	EMAPPM              uint64 `json:"ema_ppm"`
	IndexMicro          uint64 `json:"index_micro"`
	OfferedUnitSeconds  uint64 `json:"offered_unit_seconds"`
	ReservedUnitSeconds uint64 `json:"reserved_unit_seconds"`
}

func (e *MarketEpoch) encode() []byte {
	enc := &encoder{buf: []byte{1}}
	for _, v := range []uint64{e.Height, e.UtilisationPPM, e.EMAPPM, e.IndexMicro, e.OfferedUnitSeconds, e.ReservedUnitSeconds} {
		enc.uvarint(v)
	}
	enc.int64(e.Time)
	return enc.buf
}

func decodeMarketEpoch(epoch uint64, b []byte) (MarketEpoch, error) {
	e := MarketEpoch{Epoch: epoch}
	if len(b) < 1 || b[0] != 1 {
		return e, fmt.Errorf("market epoch %d: bad version: %w", epoch, ErrInternal)
	}
	d := decoder{buf: b, off: 1}
	for _, v := range []*uint64{&e.Height, &e.UtilisationPPM, &e.EMAPPM, &e.IndexMicro, &e.OfferedUnitSeconds, &e.ReservedUnitSeconds} {
		*v = d.uvarint("market epoch")
	}
	e.Time = d.int64("time")
	if err := d.done(); err != nil {
		return e, fmt.Errorf("market epoch %d: %w: %w", epoch, err, ErrInternal)
	}
	return e, nil
}

func marketHistPrefix(class string) []byte {
	return append(append(slices.Clone(prefixMarketHist), class...), '/')
}

func marketHistKey(class string, epoch uint64) []byte { return u64(marketHistPrefix(class), epoch) }

// Epoch is where the chain is in its epochs: the open one's number and
// the block and time it began at.
type Epoch struct {
	Number      uint64 `json:"number"`
	StartHeight uint64 `json:"start_height"`
	StartTime   int64  `json:"start_time"`
}

// GetEpoch reads the open epoch (number 0 from genesis).
func GetEpoch(kv KV) Epoch {
	b := kv.Get(keyMarketEpoch)
	var e Epoch
	if len(b) == 24 {
		e = Epoch{binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:]), int64(binary.BigEndian.Uint64(b[16:]))}
	}
	return e
}

func setEpoch(o *Overlay, e Epoch) {
	b := binary.BigEndian.AppendUint64(nil, e.Number)
	b = binary.BigEndian.AppendUint64(b, e.StartHeight)
	o.Set(keyMarketEpoch, binary.BigEndian.AppendUint64(b, uint64(e.StartTime)))
}

// endMarket runs at the end of every block, after the scheduler: classes
// whose live counts changed accrue and take the new counts, and at the
// end of an epoch every class closes it and the rewards are settled
// (rewards.go). Its cost is the number of classes, whatever the number of
// providers.
func endMarket(o *Overlay, p Params, info BlockInfo) ([]Event, error) {
	now, h := info.Time.Unix(), uint64(info.Height)
	ep := GetEpoch(o)
	closing := p.EpochBlocks > 0 && h >= ep.StartHeight+p.EpochBlocks
	// The classes with a record or live counts, in order.
	type row struct {
		rec  *MarketClass
		live marketCounts
	}
	var rows []row
	var err error
	o.Iterate(prefixMarketClass, prefixEnd(prefixMarketClass), func(k, v []byte) bool {
		var c *MarketClass
		if c, err = decodeMarketClass(string(k[len(prefixMarketClass):]), v); err != nil {
			return false
		}
		rows = append(rows, row{rec: c})
		return true
	})
	if err != nil {
		return nil, err
	}
	o.Iterate(prefixMarketLive, prefixEnd(prefixMarketLive), func(k, v []byte) bool {
		class := string(k[len(prefixMarketLive):])
		var live marketCounts
		if len(v) == 16 {
			live = marketCounts{binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])}
		}
		i, found := slices.BinarySearchFunc(rows, class, func(r row, c string) int {
			switch {
			case r.rec.Class < c:
				return -1
			case r.rec.Class > c:
				return 1
			}
			return 0
		})
		if found {
			rows[i].live = live
		} else {
			rows = slices.Insert(rows, i, row{rec: newMarketClass(class, p, now), live: live})
		}
		return true
	})
	var events []Event
	for _, r := range rows {
		c := r.rec
		changed := c.Offered != r.live.offered || c.Reserved != r.live.reserved
		if !changed && !closing {
			continue
		}
		c.accrue(now)
		c.Offered, c.Reserved = r.live.offered, r.live.reserved
		if closing {
			e := c.close(p)
			e.Epoch, e.Height, e.Time = ep.Number, h, now
			o.Set(marketHistKey(c.Class, ep.Number), e.encode())
			if ep.Number >= MarketHistoryEpochs {
				if old := marketHistKey(c.Class, ep.Number-MarketHistoryEpochs); o.Get(old) != nil {
					o.Delete(old)
				}
			}
			events = append(events, Event{Type: "market_epoch", Attrs: []Attr{
				{"class", c.Class}, {"epoch", strconv.FormatUint(ep.Number, 10)},
				{"utilisation_ppm", strconv.FormatUint(e.UtilisationPPM, 10)}, {"index", strconv.FormatUint(c.Index(), 10)},
			}})
		}
		o.Set(marketClassKey(c.Class), c.encode())
	}
	if !closing {
		return events, nil
	}
	evs, err := endRewardsEpoch(o, p, info, ep)
	if err != nil {
		return nil, err
	}
	setEpoch(o, Epoch{Number: ep.Number + 1, StartHeight: h, StartTime: now})
	return append(events, evs...), nil
}

// marketClassOrFloor is a class's market record; a class without one is
// at the floor.
func marketClassOrFloor(kv KV, class string, p Params) (*MarketClass, error) {
	c, ok, err := GetMarketClass(kv, class)
	if err != nil {
		return nil, err
	}
	if !ok {
		c = newMarketClass(class, p, 0)
	}
	return c, nil
}

// marketUnitPrice is what a job of tier pays per unit-hour in class
// before the ask.
func marketUnitPrice(kv KV, class string, p Params, tier string) (uint64, error) {
	c, err := marketClassOrFloor(kv, class, p)
	if err != nil {
		return 0, err
	}
	return c.PricePerUnit(p, tier), nil
}

// MarketInfo is a class's market now: for queries.
type MarketInfo struct {
	Class          string `json:"class"`
	Index          uint64 `json:"index"` // usync per unit-hour
	IndexMicro     uint64 `json:"index_micro"`
	UtilisationPPM uint64 `json:"utilisation_ppm"` // of the last closed epoch
	EMAPPM         uint64 `json:"ema_ppm"`
	OfferedUnits   uint64 `json:"offered_units"`  // now
	ReservedUnits  uint64 `json:"reserved_units"` // now
	// Prices are each tier's index price per unit-hour (a job pays at
	// least its provider's ask).
	Prices  []TierPrice   `json:"prices"`
	History []MarketEpoch `json:"history,omitempty"` // oldest first
}

// TierPrice is one tier's index price per unit-hour.
type TierPrice struct {
	Tier         string `json:"tier"`
	FactorPPM    uint64 `json:"factor_ppm"`
	PricePerHour uint64 `json:"price_per_hour"`
}

// Market returns every class's market (or only class, when it is not
// empty), each with up to history closed epochs, newest last.
func Market(kv KV, class string, history int) ([]MarketInfo, error) {
	p, err := GetParams(kv)
	if err != nil {
		return nil, err
	}
	var recs []*MarketClass
	start, end := prefixMarketClass, prefixEnd(prefixMarketClass)
	if class != "" {
		start = marketClassKey(class)
		end = append(slices.Clone(start), 0)
	}
	kv.Iterate(start, end, func(k, v []byte) bool {
		var c *MarketClass
		if c, err = decodeMarketClass(string(k[len(prefixMarketClass):]), v); err != nil {
			return false
		}
		recs = append(recs, c)
		return true
	})
	if err != nil {
		return nil, err
	}
	out := make([]MarketInfo, 0, len(recs))
	for _, c := range recs {
		live := getMarketCounts(kv, c.Class)
		mi := MarketInfo{Class: c.Class, Index: c.Index(), IndexMicro: c.IndexMicro, UtilisationPPM: c.LastPPM, EMAPPM: c.EMAPPM,
			OfferedUnits: live.offered, ReservedUnits: live.reserved}
		for _, t := range Tiers {
			mi.Prices = append(mi.Prices, TierPrice{Tier: t, FactorPPM: p.TierFactorPPM(t), PricePerHour: c.PricePerUnit(p, t)})
		}
		if history > 0 {
			hp := marketHistPrefix(c.Class)
			var hs []MarketEpoch
			kv.Iterate(hp, prefixEnd(hp), func(k, v []byte) bool {
				var e MarketEpoch
				if e, err = decodeMarketEpoch(binary.BigEndian.Uint64(k[len(hp):]), v); err != nil {
					return false
				}
				hs = append(hs, e)
				return true
			})
			if err != nil {
				return nil, err
			}
			if len(hs) > history {
				hs = hs[len(hs)-history:]
			}
			mi.History = hs
		}
		out = append(out, mi)
	}
	return out, nil
}

// marketCountsMatchRecords: the live counts (mktl/) are what the provider
// and job records say: the units online providers offer per class of
// their asks, and the units the slot-holding assignments of unfinished
// jobs and the replicas of services reserve, self-dealing left out.
func marketCountsMatchRecords(s *invariantState) error {
	want := map[string]marketCounts{}
	for _, p := range s.providers {
		for c, n := range offeredUnits(p) {
			w := want[c]
			w.offered += n
			want[c] = w
		}
	}
	for _, j := range s.jobs {
		if j.Done() {
			continue
		}
		for i := range j.Assignments {
			if a := &j.Assignments[i]; a.holdsSlot() && countsInMarket(j, a) {
				w := want[a.Class]
				w.reserved += j.Spec.Units()
				want[a.Class] = w
			}
		}
	}
	for _, sv := range s.services {
		for i := range sv.Replicas {
			if r := &sv.Replicas[i]; sv.Owner != r.Provider {
				view := sv.Spec.JobView()
				w := want[r.Class]
				w.reserved += view.Units()
				want[r.Class] = w
			}
		}
	}
	var err error
	s.kv.Iterate(prefixMarketLive, prefixEnd(prefixMarketLive), func(k, _ []byte) bool {
		c := string(k[len(prefixMarketLive):])
		if got := getMarketCounts(s.kv, c); got != want[c] {
			err = fmt.Errorf("invariant: class %q counts %d offered and %d reserved units, the records %d and %d: %w", c, got.offered, got.reserved, want[c].offered, want[c].reserved, ErrInternal)
			return false
		}
		return true
	})
	if err != nil {
		return err
	}
	for c, w := range want {
		if w != (marketCounts{}) && getMarketCounts(s.kv, c) == (marketCounts{}) {
			return fmt.Errorf("invariant: class %q has %d offered and %d reserved units and no live count: %w", c, w.offered, w.reserved, ErrInternal)
		}
	}
	return nil
}
