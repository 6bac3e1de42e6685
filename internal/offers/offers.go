// Package offers is how consumers search provider hardware: the Offer record
// that `gpunet offers` and `gpunet query providers` print, and the query
// language (after Vast.ai's) that filters and sorts offers, e.g.
//
//	gpu=RTX_4090 count>=2 vram>=24GiB price<0.5 region=eu executor=oci tee=tdx
//
// A query is whitespace-separated `field op value` terms, all of which must
// hold. Operators are < <= = != >= > in notin (== is accepted for =). Fields
// and their types are listed by [Fields]; see [Parse] for the full syntax.
//
// The package is pure: it parses, matches and sorts values handed to it, so
// the CLI, the API server and the scheduler can share one definition of what
// a query means.
package offers

// Offer is one provider's hardware as consumers search it. Its JSON form is a
// stable interface (DESIGN.md §7): `gpunet offers --output json` and
// `gpunet query providers --output json` print arrays of it.
type Offer struct {
	Address string `json:"address"` // provider account, bech32 "gpu1…"
	// Label is the name the provider gives itself ("Acme GPUs #2"),
	// empty when it set none. It is self-declared and not unique (any
	// provider may take any label): show it beside Address, never
	// instead of it.
	Label      string   `json:"label,omitempty"`
	Stake      uint64   `json:"stake"`       // usync bonded
	Online     bool     `json:"online"`      // reachable now
	GPU        string   `json:"gpu"`         // hardware class, e.g. "H100_80GB", "RTX_4090"; "cpu" for a CPU-only provider
	Count      int      `json:"count"`       // number of GPUs (0 for CPU-only)
	VRAM       float64  `json:"vram"`        // GiB per GPU
	ComputeCap string   `json:"compute_cap"` // e.g. "9.0"
	CPU        int      `json:"cpu"`         // cores
	RAM        float64  `json:"ram"`         // GiB
	Disk       float64  `json:"disk"`        // GiB free
	Price      float64  `json:"price"`       // SYNC per hour per unit (per GPU; per CPU core for CPU-only)
	Region     string   `json:"region"`      // e.g. "eu", "us-east"
	Reputation float64  `json:"reputation"`  // 0..1
	Uptime     float64  `json:"uptime"`      // 0..1, fraction of liveness challenges answered
	TOPS       float64  `json:"tops"`        // measured int8 TOPS (whole machine)
	Bandwidth  float64  `json:"bandwidth"`   // measured memory bandwidth, GB/s
	Executor   []string `json:"executor"`    // supported executors, e.g. ["oci","wasm"], sorted
	// WasmEngine is the engine it runs wasm jobs on, e.g.
	// "wasmtime-39.0.1/linux-amd64/…/wasi-gpunet-1"; empty without wasm.
	// The replicas of a verified wasm job all run on one engine.
	WasmEngine string `json:"wasm_engine,omitempty"`
	MaxJobs    int    `json:"max_jobs"` // most jobs it runs at once
	Jobs       int    `json:"jobs"`     // running now
	// Proof of Sync record: results a replica confirmed, results outvoted,
	// the share of hardware challenges passed (1 before the first), and
	// all the usync ever slashed.
	Validated     uint64  `json:"validated"`
	Invalid       uint64  `json:"invalid"`
	ChallengePass float64 `json:"challenge_pass"`
	Slashed       uint64  `json:"slashed"`
	// TEE is the kind of confidential guest ("tdx", "sev-snp") the
	// provider's TEE evidence proved, accepted by the chain over the
	// encryption key it declares now and unexpired at the block time of
	// the answer's height; "" for none. TEEExpiry is when that
	// attestation stops counting (unix seconds; 0 for none).
	TEE       string `json:"tee,omitempty"`
	TEEExpiry int64  `json:"tee_expiry,omitempty"`
	// Interconnect is what links the provider's GPUs to each other, as
	// its agent detected it: "nvlink" (every pair over NVLink), "pcie",
	// or "" (fewer than two GPUs, or not known).
	Interconnect string `json:"interconnect,omitempty"`
}

// Filter returns the offers that q matches, in their original order. A nil
// q matches every offer. The result is a new slice, never nil, so that it
// encodes as a JSON array even when empty; offers is not modified.
func Filter(offers []Offer, q *Query) []Offer {
	out := make([]Offer, 0, len(offers))
	for i := range offers {
		if q.Match(&offers[i]) {
			out = append(out, offers[i])
		}
	}
	return out
}
