// Package challenge is the hardware challenge of Proof of Sync (DESIGN.md
// section 5, issue #6): a provider proves the int8 throughput it claims by
// computing a GEMM chosen by the chain, and validators check the answer at
// a thousandth of the cost. The provider's agent (through the subpackage
// prove) and the ledger both import this package, so it is pure in the
// ledger's sense: standard library only, no clock, no randomness, no
// goroutines, no floating point; the same inputs give the same bytes on
// every machine. TestImportRule enforces that.
//
// # Protocol
//
//  1. Issue. At a height the chain draws, it gives a provider a 32-byte
//     seed (derived from block data and the provider's address, unique per
//     challenge) and a Plan for the provider's claimed throughput: the
//     Size N×K×M and a deadline.
//  2. Compute. The seed defines A (N×K) and B (K×M), int8 matrices expanded
//     with AES-256-CTR (see Generator). The provider computes C = A·B with
//     exact int32 results, the same on any hardware.
//  3. Commit. It publishes the Merkle root of C (a Commit, 33 bytes) in a
//     block no later than DeadlineMillis after the challenge's block. A
//     missed deadline is a failure.
//  4. Select. Randomness that did not exist at commit time (the hash of a
//     block after the one holding the commit) picks K entries of C in K
//     distinct leaves (Challenge.Select; K = 60 by default).
//  5. Open. The provider publishes the K leaves that hold them, each with
//     its Merkle proof (an Opening, about 54 KB for a 100-GOPS plan). The
//     prover has everything at hand, so the ledger can give it a short
//     window.
//  6. Verify. Each validator runs Challenge.Verify: the leaf is the
//     selected one, its proof leads to the committed root, and the
//     selected entry equals row i of A · column j of B, recomputed from
//     the seed in O(K). Any error is objective evidence against the
//     provider: slash and reputation loss. A provider that commits late
//     but opens correctly has shown MeasuredGOPS, which replaces its claim.
//
// # Parameters
//
// NewPlan sizes a challenge so that it takes Params.TargetMillis (10 s by
// default) at the claimed throughput, counting a multiply-add as two
// operations as hwinfo and GPU datasheets do. The shape is a cube while it
// fits the bounds (multiples of Align = 64; K ≤ MaxK = 2¹⁶ keeps every
// entry exact in int32; M ≤ MaxM = 2¹⁴ keeps B at 1 GiB; N ≤ MaxN = 2²³ rows
// that a prover streams), then grows N. Claims beyond MaxOps = 2⁵⁴
// operations per target (1.8 POPS at 10 s) get MaxOps and a shorter
// challenge: an H100 claim of 1 979 TOPS gets 9.1 s. Challenge one device
// at a time; a multi-GPU provider's summed claim is not what a single
// challenge should size.
//
// The deadline is ⌈compute × SlackPermille/1000⌉ + AllowanceMillis: ×1.25
// for the expansion of A and B, the hashing of C and run-to-run spread,
// plus 6 s, one 6-s block, for getting the commit included. Examples (see ExampleNewPlan):
//
//	claim            size                  compute   deadline   opening
//	1 GOPS (CPU)     1664×1728×1728        9.9 s     18.4 s     46 KB
//	100 GOPS (CPU)   7936×7936×7936        10.0 s    18.5 s     54 KB
//	130 TOPS (T4)    605376×65536×16384    10.0 s    18.5 s     69 KB
//	1979 TOPS (H100) 8388608×65536×16384   9.1 s     17.4 s     75 KB
//
// Load: an honest provider is busy at most BusyMillis = compute × slack per
// challenge (12.5 s by default). Plan.MinGapMillis = 60 × BusyMillis
// (12.5 minutes, 125 blocks of 6 s): a chain that challenges a provider at
// most once per MinGapMillis keeps it within DESIGN.md's 60 s per hour; a
// chain that draws challenges at random with probability p per block
// should keep p ≤ block time / MinGapMillis and also enforce the gap, or
// the bound holds only on average.
//
// # Encodings
//
// Integers are little-endian, the layout of an int32 row in the memory of
// every CPU and GPU, so C is hashed as it lies. Each format has exactly
// one encoding of each value, and decoding rejects anything else (wrong
// length, version, count or depth) with an error wrapping ErrEncoding:
//
//	Commit   version(1)=1 ‖ root(32)                                 33 bytes
//	Opening  version(1)=1 ‖ count(u16) ‖ depth(1) ‖
//	         count × { leaf(u32) ‖ 64 × int32 entries ‖ depth × 32-byte siblings }
//
// An opening is 4 + K·(260 + 32·depth) bytes: 54 004 for 100 GOPS, at most
// 75 124 with K = 60 (depth ≤ MaxDepth = 31) and MaxOpeningBytes = 160 260
// with K = MaxOpenings = 128, inside a 256 KiB tx. The matrices, the tree
// and the selection are specified where they are implemented: Generator
// (matrix.go), the Merkle tree (merkle.go) and Challenge.Select
// (verify.go). testdata/reference.py reimplements all three from that text
// and produces the values TestGolden pins.
//
// # Security
//
// Binding. A Merkle root binds the prover to one C before the selection
// exists (SHA-256 collision resistance; leaf and node hashes are
// domain-separated by a prefix byte so a leaf can never pass for a node;
// padding is the fixed empty hash and is checked). The selection mixes the
// seed, the size, the root and the later randomness, so the prover cannot
// know which entries will be checked while it can still change C.
//
// Skipped work. A prover that computes only part of C and fills a fraction
// f of its leaves with anything else (the cheapest way to cheat: a faked
// entry anywhere in a leaf costs the whole leaf) passes only if none of
// the K distinct selected leaves is faked: probability C((1−f)L, K)/C(L, K)
// ≤ (1−f)^K. With K = 60 it is caught with probability at least
//
//	f = 1%: 45%   f = 5%: 95.4%   f = 10%: 99.8%   f = 25%: 1 − 3·10⁻⁸   f = 50%: 1 − 2⁻⁶⁰
//
// every time, and one catch costs its stake. TestCatchProbability checks
// the exact rate on a small case.
//
// Time. A device of real throughput R claiming G finishes in
// compute × G/R and is late when that exceeds the deadline, so a proof in
// time bounds claims to G/R ≤ deadline/compute: 1.85 with the defaults
// (faster blocks or a longer target tighten it, at the cost of fewer
// challenges per hour within the load bound). A late proof is not a
// failure: the chain records the throughput it shows in place of the
// claim (MeasuredGOPS), so a prover that wants its claim to stand in time
// must skip a fraction f ≥ 1 − deadline·R/(compute·G) of the work and is
// caught as above.
//
// Precomputation is impossible: A and B depend on a seed from the
// challenge's block and on the size, through the AES keys. Seeds must not
// repeat. Outsourcing to other hardware is not prevented; the challenge
// measures the throughput a provider can bring, not which chip brings it.
//
// Verifier cost. Per opened leaf: two AES-CTR lines of K bytes, one dot
// product of length K, and a proof of depth d (5 SHA-256 compressions for
// the leaf, 2 per node); about 60·K multiply-adds and 120·K bytes
// of AES in all, against 2·N·K·M operations for the prover. On one core
// that is well under a thousandth of the challenge's compute time for every
// plan above (BENCHMARKS.md, "Hardware challenges").
package challenge
