// Package sched is the ledger's placement planner: given what a job (or a
// service replica) needs and a read-only view of the providers' offers, it
// decides which providers the job should get, or why it gets none. It is
// Nomad's scheduler split: the planner reads a small [State] and returns a
// [Plan]; the ledger (internal/ledger) implements State over its offer
// index and applies the plan (assignments, provider slots, market
// reservations, events, dequeueing).
//
// Place is the one function every placement and every quote calls: the
// end-of-block scheduler (ledger's place and placeService), QuoteJob and
// QuoteService, the scheduler benchmark (internal/bench/schedbench, through
// the ledger) and this package's table tests (a fake in-memory State).
//
// Like the ledger, it is deterministic (DESIGN.md section 4): all integer,
// no clock, no randomness, no goroutines, no map iteration reaching the
// result; it imports the standard library and internal/address only, and
// never internal/ledger.
//
// # How a plan is made
//
// Place walks a pipeline:
//
//  1. classes: the hardware classes the request may use (its GPU models,
//     every GPU class with offers, or CPUClass), each with its
//     [ClassSummary]; a class none of whose offers can meet the GPU needs
//     is skipped unscanned, and a class whose market price for the tier is
//     above the ceiling is skipped too.
//  2. scan: the class's offers from the cheapest ask up to the ceiling
//     (State.Offers), each checked against the hard constraints (fits, in
//     the order [Miss] counts them; a free slot is one no granted job
//     holds, with fewer than [TentativePerSlot] ungranted placements on
//     it: [Positions]), the first PerClass that fit scored ([Score]); at
//     most ScanLimit offers in all.
//  3. rank: best score first, ties to the lower address; a provider whose
//     several classes fit appears once, at its best.
//  4. group: for a job whose replicas share a wasm engine, the candidates
//     of one engine (chooseEngine).
//  5. cheapestAbove: with fewer candidates than the job plans replicas, the
//     cheapest ask above the ceiling, for its reason.
//  6. pick: the providers the job does not have yet, the first Need of
//     them, all or none unless Request.Partial; with fewer, the [Code] of
//     why it waits. For a gang (Request.Gang), the first site (region) in
//     rank order to have Need of them, and its best Need (gang.go), the
//     scan having gone on until one site had them.
//
// # Where wave 3 goes
//
// Trust tiers are a hard constraint and a ranking term: a field of [Offer]
// (which the ledger encodes in the index entry, offer.go), a minimum in
// [Request], a case in fits with its count in [Miss], and, if trust should
// rank too, a term in [Score]. Gang placement is built that way (gang.go):
// Request.Gang and NVLink, Miss.Sites, Together and NVLink, the Apart
// code; a bound on measured latency between members would be one more
// constraint on the site pickGang chooses.
package sched
