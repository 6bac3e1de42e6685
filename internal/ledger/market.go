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

// A marketBook is one set of per-class indexes: the plain market (every
// provider and job) or the TEE market (attested providers and trust: tee
// work, market_tee.go). Each has its records, history and live counts
// under its own prefixes, and endMarket moves both the same way.
type marketBook struct {
	class, hist, live []byte
	trust             string // "" or TrustTEE: the trust its events name
}

var (
	plainBook = marketBook{class: prefixMarketClass, hist: prefixMarketHist, live: prefixMarketLive}
	teeBook   = marketBook{class: prefixMarketTEEClass, hist: prefixMarketTEEHist, live: prefixMarketTEELive, trust: TrustTEE}
)

func (b marketBook) liveKey(class string) []byte { return append(slices.Clone(b.live), class...) }

func (b marketBook) counts(kv KV, class string) marketCounts {
	return decodeMarketCounts(kv.Get(b.liveKey(class)))
}

func decodeMarketCounts(b []byte) marketCounts {
	if len(b) != 16 {
		return marketCounts{}
	}
	return marketCounts{binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])}
}

func (b marketBook) setCounts(o *Overlay, class string, c marketCounts) {
	if c == (marketCounts{}) {
		if o.Get(b.liveKey(class)) != nil {
			o.Delete(b.liveKey(class))
		}
		return
	}
	o.Set(b.liveKey(class), binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, c.offered), c.reserved))
}

// reserve adds d units (which may be negative) to class's reserved count.
func (b marketBook) reserve(o *Overlay, class string, d int64) {
	n := b.counts(o, class)
	n.reserved = addUnits(n.reserved, d)
	b.setCounts(o, class, n)
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
// nil), in the plain book and the TEE book. Called by setProviderFrom for
// every provider write.
func adjustOffered(o *Overlay, old, p *Provider) {
	if (old == nil || !old.Online) && (p == nil || !p.Online) {
		return
	}
	plainBook.adjustOffered(o, offeredUnits(old), offeredUnits(p))
	teeBook.adjustOffered(o, teeOfferedUnits(old), teeOfferedUnits(p))
}

// adjustOffered moves b's offered counts from before to after.
func (b marketBook) adjustOffered(o *Overlay, before, after map[string]uint64) {
	if len(before) == 0 && len(after) == 0 {
		return
	}
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
		n := b.counts(o, c)
		n.offered = addUnits(n.offered, int64(after[c])-int64(before[c]))
		b.setCounts(o, c, n)
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
	plainBook.reserve(o, a.Class, d*int64(j.Spec.Units()))
	if j.Spec.Trust == TrustTEE {
		teeBook.reserve(o, a.Class, d*int64(j.Spec.Units()))
	}
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

func (b marketBook) classKey(class string) []byte { return append(slices.Clone(b.class), class...) }

func marketClassKey(class string) []byte { return plainBook.classKey(class) }

// GetMarketClass reads a class's market record; ok is false for a class
// that never had offers or reservations.
func GetMarketClass(kv KV, class string) (*MarketClass, bool, error) {
	return plainBook.get(kv, class)
}

// GetTEEMarketClass reads a class's TEE market record (market_tee.go); ok
// is false for a class that never had attested offers or trust: tee work.
func GetTEEMarketClass(kv KV, class string) (*MarketClass, bool, error) {
	return teeBook.get(kv, class)
}

func (b marketBook) get(kv KV, class string) (*MarketClass, bool, error) {
	v := kv.Get(b.classKey(class))
	if v == nil {
		return nil, false, nil
	}
	c, err := decodeMarketClass(class, v)
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

func (b marketBook) histPrefix(class string) []byte {
	return append(append(slices.Clone(b.hist), class...), '/')
}

func (b marketBook) histKey(class string, epoch uint64) []byte {
	return u64(b.histPrefix(class), epoch)
}

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
// (rewards.go). The TEE book (market_tee.go) moves the same way, after
// the plain one. Its cost is the number of classes, whatever the number
// of providers.
func endMarket(o *Overlay, p Params, info BlockInfo) ([]Event, error) {
	now, h := info.Time.Unix(), uint64(info.Height)
	ep := GetEpoch(o)
	closing := p.EpochBlocks > 0 && h >= ep.StartHeight+p.EpochBlocks
	var events []Event
	for _, b := range []marketBook{plainBook, teeBook} {
		evs, err := b.end(o, p, ep, now, h, closing)
		if err != nil {
			return nil, err
		}
		events = append(events, evs...)
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

// end is endMarket for the classes of book b.
func (b marketBook) end(o *Overlay, p Params, ep Epoch, now int64, h uint64, closing bool) ([]Event, error) {
	// The classes with a record or live counts, in order.
	type row struct {
		rec  *MarketClass
		live marketCounts
	}
	var rows []row
	var err error
	o.Iterate(b.class, prefixEnd(b.class), func(k, v []byte) bool {
		var c *MarketClass
		if c, err = decodeMarketClass(string(k[len(b.class):]), v); err != nil {
			return false
		}
		rows = append(rows, row{rec: c})
		return true
	})
	if err != nil {
		return nil, err
	}
	o.Iterate(b.live, prefixEnd(b.live), func(k, v []byte) bool {
		class := string(k[len(b.live):])
		live := decodeMarketCounts(v)
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
			o.Set(b.histKey(c.Class, ep.Number), e.encode())
			if ep.Number >= MarketHistoryEpochs {
				if old := b.histKey(c.Class, ep.Number-MarketHistoryEpochs); o.Get(old) != nil {
					o.Delete(old)
				}
			}
			attrs := []Attr{
				{"class", c.Class}, {"epoch", strconv.FormatUint(ep.Number, 10)},
				{"utilisation_ppm", strconv.FormatUint(e.UtilisationPPM, 10)}, {"index", strconv.FormatUint(c.Index(), 10)},
			}
			if b.trust != "" {
				attrs = append(attrs, Attr{"trust", b.trust})
			}
			events = append(events, Event{Type: "market_epoch", Attrs: attrs})
		}
		o.Set(b.classKey(c.Class), c.encode())
	}
	return events, nil
}

// marketClassOrFloor is a class's market record; a class without one is
// at the floor.
func marketClassOrFloor(kv KV, class string, p Params) (*MarketClass, error) {
	return plainBook.orFloor(kv, class, p)
}

func (b marketBook) orFloor(kv KV, class string, p Params) (*MarketClass, error) {
	c, ok, err := b.get(kv, class)
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
	// TEE is the class's TEE market (market_tee.go), when it has one: its
	// own index over attested providers and trust: tee work, and in
	// Prices what a trust: tee job pays at the index (the larger of the
	// two indexes, times the tier's factor).
	TEE *MarketInfo `json:"tee,omitempty"`
}

// TierPrice is one tier's index price per unit-hour.
type TierPrice struct {
	Tier         string `json:"tier"`
	FactorPPM    uint64 `json:"factor_ppm"`
	PricePerHour uint64 `json:"price_per_hour"`
}

// Market returns every class's market (or only class, when it is not
// empty), each with up to history closed epochs, newest last, and its
// TEE market's if it has one.
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
		mi, err := plainBook.info(kv, p, c, nil, history)
		if err != nil {
			return nil, err
		}
		tc, ok, err := teeBook.get(kv, c.Class)
		if err != nil {
			return nil, err
		}
		if ok {
			if mi.TEE, err = teeBook.info(kv, p, tc, c, history); err != nil {
				return nil, err
			}
		}
		out = append(out, *mi)
	}
	return out, nil
}

// info is c's MarketInfo in book b; plain, for the TEE book, is the
// class's plain record, whose index a trust: tee job's price is at least.
func (b marketBook) info(kv KV, p Params, c, plain *MarketClass, history int) (*MarketInfo, error) {
	live := b.counts(kv, c.Class)
	mi := &MarketInfo{Class: c.Class, Index: c.Index(), IndexMicro: c.IndexMicro, UtilisationPPM: c.LastPPM, EMAPPM: c.EMAPPM,
		OfferedUnits: live.offered, ReservedUnits: live.reserved}
	for _, t := range Tiers {
		price := c.PricePerUnit(p, t)
		if plain != nil {
			price = max(price, plain.PricePerUnit(p, t))
		}
		mi.Prices = append(mi.Prices, TierPrice{Tier: t, FactorPPM: p.TierFactorPPM(t), PricePerHour: price})
	}
	if history <= 0 {
		return mi, nil
	}
	hp := b.histPrefix(c.Class)
	var hs []MarketEpoch
	var err error
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
	return mi, nil
}

// marketCountsMatchRecords: the live counts (mktl/, and the TEE book's
// mkttl/) are what the provider, job and service records say: the units
// online providers offer per class of their asks, and the units the
// slot-holding assignments of unfinished jobs and the replicas of services
// reserve, self-dealing left out; in the TEE book, only attested providers'
// offers and trust: tee work.
func marketCountsMatchRecords(s *invariantState) error {
	want := map[string]marketCounts{}
	wantTEE := map[string]marketCounts{}
	add := func(m map[string]marketCounts, c string, offered, reserved uint64) {
		w := m[c]
		w.offered += offered
		w.reserved += reserved
		m[c] = w
	}
	for _, p := range s.providers {
		for c, n := range offeredUnits(p) {
			add(want, c, n, 0)
		}
		for c, n := range teeOfferedUnits(p) {
			add(wantTEE, c, n, 0)
		}
	}
	for _, j := range s.jobs {
		if j.Done() {
			continue
		}
		for i := range j.Assignments {
			if a := &j.Assignments[i]; a.holdsSlot() && countsInMarket(j, a) {
				add(want, a.Class, 0, j.Spec.Units())
				if j.Spec.Trust == TrustTEE {
					add(wantTEE, a.Class, 0, j.Spec.Units())
				}
			}
		}
	}
	for _, sv := range s.services {
		for i := range sv.Replicas {
			if r := &sv.Replicas[i]; sv.Owner != r.Provider {
				view := sv.Spec.JobView()
				add(want, r.Class, 0, view.Units())
				if view.Trust == TrustTEE {
					add(wantTEE, r.Class, 0, view.Units())
				}
			}
		}
	}
	if err := plainBook.countsMatch(s.kv, want); err != nil {
		return err
	}
	return teeBook.countsMatch(s.kv, wantTEE)
}

func (b marketBook) countsMatch(kv KV, want map[string]marketCounts) error {
	var err error
	kv.Iterate(b.live, prefixEnd(b.live), func(k, _ []byte) bool {
		c := string(k[len(b.live):])
		if got := b.counts(kv, c); got != want[c] {
			err = fmt.Errorf("invariant: class %q (trust %q) counts %d offered and %d reserved units, the records %d and %d: %w", c, b.trust, got.offered, got.reserved, want[c].offered, want[c].reserved, ErrInternal)
			return false
		}
		return true
	})
	if err != nil {
		return err
	}
	for c, w := range want {
		if w != (marketCounts{}) && b.counts(kv, c) == (marketCounts{}) {
			return fmt.Errorf("invariant: class %q (trust %q) has %d offered and %d reserved units and no live count: %w", c, b.trust, w.offered, w.reserved, ErrInternal)
		}
	}
	return nil
}
