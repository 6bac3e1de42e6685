package sched

// A Miss says why providers were passed over: how many offers each hard
// constraint turned away (an offer is counted under the first constraint
// it fails, in this order), what the price filters found, and, when fewer
// providers fit than the placement needs, its Code. All integer: the
// ledger records a Miss as a ledger.PlacementMiss, and internal/jobtext
// turns that into words for people.
type Miss struct {
	// Seen counts the offers looked at within the price: those scanned,
	// and those of the classes skipped unscanned for their summary.
	Seen int
	// The offers turned away by each constraint, in the order they are
	// checked: the executor, the stake the provider needs, CPU cores,
	// RAM, disk, a required region, network access, the GPUs of the class
	// (how many, then how many have the VRAM, then how many of those the
	// compute capability), a free slot (Busy: every slot granted, or
	// every position on the free ones held by ungranted placements,
	// Offer.free), the wasm engine (NoEngine, OtherEngine).
	Executor, Stake, CPU, RAM, Disk, Region, Network int
	// NVLink counts the offers turned away, after network access, for
	// GPUs not linked by NVLink (Request.NVLink).
	NVLink int
	// TEE counts the offers Request.Admit turned away: providers without
	// valid TEE attestation (or of another measurement) for a trust: tee
	// job.
	TEE                    int
	GPUs, VRAM, ComputeCap int
	Busy                   int
	// NoEngine counts, for a job whose replicas share a wasm engine, the
	// offers that fit but declare none; OtherEngine those that fit but run
	// another than the pinned one.
	NoEngine, OtherEngine int
	// Engines and Fitting, when the placement chose the engine and none
	// had enough candidates: how many engines the Fitting candidates run.
	Engines, Fitting int

	// Classes counts the classes looked at that have offers: those
	// skipped for their summary or their market price, those with offers
	// within the price and, when CheapestAbove is looked for, those with
	// offers above it only.
	Classes int
	// CheapestAbove, when fewer fit than Planned, is the cheapest ask
	// above the ceiling in the classes scanned, usync per hour for the
	// job (ask × units); 0 when there is none.
	CheapestAbove uint64
	// OverMarket counts the classes whose market price for the tier is
	// above the ceiling; MarketPrice is the cheapest of those prices, usync
	// per hour for the job.
	OverMarket  int
	MarketPrice uint64

	// Excluded counts the candidates left out because the request
	// excludes them (Request.Excluded).
	Excluded int
	// Fit is how many providers can take the placement now (len of
	// Plan.Ranked); Need how many it needs.
	Fit, Need int
	// Sites, for a gang, is how many sites (regions) the Fit providers
	// are in, and Together the most of them in one site: a gang waits
	// (Apart) while Together < Need.
	Sites, Together int
	// Code is why it waits, when Fit < Need (or, for a gang, when
	// Together < Need); "" otherwise.
	Code Code
}

// Code is why a placement waits, for programs (the ledger's Quote*
// constants and job records carry these strings).
type Code string

// The codes, in the order Place tells them apart.
const (
	// OverMarket: the market price of every class the job can use, for
	// its tier, is above its ceiling, and no offer was scanned.
	OverMarket Code = "over_market"
	// NoEngine: enough providers fit, but too few on one wasm engine
	// (or on the pinned one) for a job whose replicas share one.
	NoEngine Code = "no_engine"
	// Apart: enough fit for a gang, but too few of them in one site.
	Apart Code = "apart"
	// TooFew: some fit, fewer than needed.
	TooFew Code = "too_few"
	// NoOffer: no offer of the job's classes at any price.
	NoOffer Code = "no_offer"
	// OverPrice: offers exist, every ask above the ceiling.
	OverPrice Code = "over_price"
	// NoFit: offers within the price, none of which can run the job now.
	NoFit Code = "no_fit"
)

// code is why a placement with fit candidates of need waits.
func (m *Miss) code(fit, need int) Code {
	switch {
	case fit == 0 && m.OverMarket > 0 && m.Seen == 0:
		return OverMarket
	case m.Engines > 1 || (fit < need && fit+m.OtherEngine+m.NoEngine >= need):
		// Enough fit, but not on one engine (or not on the pinned one).
		return NoEngine
	case fit >= need && m.Together < need:
		// A gang: enough fit, but not in one site.
		return Apart
	case fit > 0:
		return TooFew
	case m.Classes == 0 || (m.Seen == 0 && m.CheapestAbove == 0):
		return NoOffer
	case m.Seen == 0:
		return OverPrice
	}
	return NoFit
}
