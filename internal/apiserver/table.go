package apiserver

import (
	"net/http"
	"strings"
	"time"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// msgTypesDoc lists the message types for the documentation of filters,
// from the ledger's own list so that it cannot fall behind.
var msgTypesDoc = func() string {
	var names []string
	for _, mt := range ledger.MsgTypes() {
		names = append(names, mt.String())
	}
	return strings.Join(names, ", ")
}()

var (
	addrParam  = map[string]string{"addr": "an account address (bech32, gpu1…)"}
	jobIDParam = map[string]string{"id": "a job id (a positive integer)"}
)

// apiRoutes is the API's own route table.
func (s *Server) apiRoutes() []Route {
	h := func(f http.HandlerFunc) http.Handler { return f }
	return []Route{
		{Method: "GET", Path: "/openapi.json", ID: "openapi", Tag: "meta", Summary: "This document: the API in OpenAPI 3",
			Resp: map[string]any{}, Handler: h(s.openapi)},
		{Method: "GET", Path: "/v1/status", ID: "getStatus", Tag: "chain", Summary: "The node's chain: id, height, app hash, validators, and the API's base URL",
			Resp: apiwire.StatusBody{}, Errors: []int{503}, Handler: h(s.status)},
		{Method: "GET", Path: "/v1/params", ID: "getParams", Tag: "chain", Summary: "The ledger's parameters",
			Resp: ledger.Params{}, Handler: h(s.params)},
		{Method: "GET", Path: "/v1/supply", ID: "getSupply", Tag: "chain", Summary: "Total supply, treasury, stake, unbonding and escrow (usync)",
			Resp: apiwire.SupplyBody{}, Handler: h(s.supply)},
		{Method: "GET", Path: "/v1/validators", ID: "listValidators", Tag: "chain", Summary: "The ledger's validators: power, bond, missed blocks in the downtime window, status (bonded, unbonded, jailed, tombstoned)",
			Resp: apiwire.ValidatorList{}, Handler: h(s.validators)},
		{Method: "GET", Path: "/v1/market", ID: "getMarket", Tag: "chain", Summary: "Each hardware class's price index, utilisation and tier prices over its last epochs, and the open epoch's rewards",
			Query: []Param{{Name: "class", Type: "string", Desc: "one hardware class (e.g. RTX_4090, or cpu)"}, {Name: "history", Type: "integer", Desc: "closed epochs per class (default 48)", Min: 0, Max: 256}},
			Resp:  apiwire.Market{}, Errors: []int{400}, Handler: h(s.market)},
		{Method: "GET", Path: "/v1/genesis", ID: "getGenesis", Tag: "net", Summary: "The network's genesis file, byte for byte; its SHA-256 in the X-Gpunet-Genesis-Sha256 header (what gpunet init --join --genesis-hash checks)",
			Resp: apiwire.GenesisDoc{}, Errors: []int{501, 503}, Handler: h(s.genesis)},
		{Method: "GET", Path: "/v1/net/info", ID: "getNetInfo", Tag: "net", Summary: "What a joining node needs: chain id, genesis hash, this node's p2p, RPC and API addresses, its peers, the latest block, a header to trust for state sync, and its snapshots",
			Resp: apiwire.NetInfo{}, Errors: []int{501, 503}, Handler: h(s.netInfo)},

		{Method: "GET", Path: "/v1/accounts/{addr}", ID: "getAccount", Tag: "accounts", Summary: "An account: balance, sequences, stake, unbonding and earnings",
			PathParams: addrParam, Resp: apiwire.AccountBody{}, Errors: []int{400}, Handler: h(s.account)},
		{Method: "GET", Path: "/v1/accounts/{addr}/balance", ID: "getBalance", Tag: "accounts", Summary: "An account's balance",
			PathParams: addrParam, Resp: apiwire.BalanceBody{}, Errors: []int{400}, Handler: h(s.balance)},

		{Method: "POST", Path: "/v1/txs", ID: "submitTx", Tag: "txs",
			Summary: "Submit a signed tx (wire form; hex with Content-Type text/plain). Waits for its block unless wait=false",
			Query: []Param{
				{Name: "wait", Type: "boolean", Desc: "false: answer 202 after CheckTx without waiting for the block"},
				{Name: "timeout", Type: "string", Desc: "how long to wait for the block, up to 5m (default 30s); 202 if it is not in one by then"},
			},
			BodyType: "application/octet-stream", Resp: apiwire.TxResult{}, MaxBody: maxTxBody, Timeout: 5*time.Minute + 30*time.Second, BodyTimeout: txBodyTimeout,
			Errors: []int{400, 409, 413, 422, 503}, Handler: h(s.submitTx)},
		{Method: "GET", Path: "/v1/txs", ID: "listTxs", Tag: "txs", Summary: "Recent txs, newest first, optionally of one message type",
			Query: []Param{
				{Name: "type", Type: "string", Desc: "only txs of this message type: " + msgTypesDoc},
			},
			List: true, Resp: apiwire.TxList{}, Errors: []int{400, 503}, Handler: h(s.listTxs)},
		{Method: "GET", Path: "/v1/txs/{hash}", ID: "getTx", Tag: "txs", Summary: "An included tx's result",
			PathParams: map[string]string{"hash": "the tx hash, 64 hex characters"}, Resp: apiwire.TxResult{}, Errors: []int{400, 404, 503}, Handler: h(s.getTx)},
		{Method: "GET", Path: "/v1/blocks", ID: "listBlocks", Tag: "blocks",
			Summary: "Recent blocks, newest first; optionally only those with a tx of a message type or an event of a type (a filtered page walks at most 5000 blocks and may end short, with a cursor to go on from)",
			Query: []Param{
				{Name: "tx_type", Type: "string", Desc: "only blocks with a tx of this message type (" + msgTypesDoc + "), or any: blocks with at least one tx"},
				{Name: "event", Type: "string", Desc: "only blocks where an event of this type happened, in a tx or in the block's own processing, e.g. job_replica_slashed, hw_challenge_failed, job_assigned, liveness_missed"},
			},
			List: true, Resp: apiwire.BlockList{}, Errors: []int{400, 503}, Handler: h(s.listBlocks)},
		{Method: "GET", Path: "/v1/blocks/{height}", ID: "getBlock", Tag: "blocks", Summary: "A block with its txs and their results",
			PathParams: map[string]string{"height": "a block height (a positive integer)"}, Resp: apiwire.Block{}, Errors: []int{400, 404, 503}, Handler: h(s.block)},

		{Method: "GET", Path: "/v1/providers", ID: "listProviders", Tag: "providers", Summary: "Every registered provider as an offer, by address",
			List: true, Resp: apiwire.ProviderList{}, Errors: []int{400}, Handler: h(s.providers)},
		{Method: "GET", Path: "/v1/offers", ID: "listOffers", Tag: "providers",
			Summary: "Providers matching an offers query (internal/offers), sorted; by default only those that can take jobs now",
			Query: []Param{
				{Name: "q", Type: "string", Desc: "offers query, e.g. gpu=RTX_4090 count>=2 price<0.5 region=eu"},
				{Name: "sort", Type: "string", Desc: "sort keys, e.g. price- (descending) or region,price"},
				{Name: "all", Type: "boolean", Desc: "true: include providers that cannot take jobs now (offline or under-staked)"},
			},
			List: true, Resp: apiwire.OfferList{}, Errors: []int{400}, Handler: h(s.offersList)},
		{Method: "GET", Path: "/v1/providers/{addr}", ID: "getProvider", Tag: "providers", Summary: "A provider: offer, ledger record (its slash events with a code and, rendered, a reason), unbonding stake, open challenge",
			PathParams: addrParam, Resp: apiwire.ProviderBody{}, Errors: []int{400, 404}, Handler: h(s.provider)},
		{Method: "GET", Path: "/v1/providers/{addr}/jobs", ID: "listProviderJobs", Tag: "providers", Summary: "The unfinished jobs assigned to a provider, oldest first",
			PathParams: addrParam, List: true, Resp: apiwire.JobList{}, Errors: []int{400}, Handler: h(s.providerJobs)},

		{Method: "GET", Path: "/v1/jobs", ID: "listJobs", Tag: "jobs", Summary: "Jobs, newest first: all of them, or one owner's, optionally in one state",
			Query: []Param{
				{Name: "owner", Type: "string", Desc: "only this account's jobs (an address)"},
				{Name: "state", Type: "string", Desc: "only jobs in this state: queued, assigned, running, verifying, succeeded, failed, cancelled"},
			},
			List: true, Resp: apiwire.JobList{}, Errors: []int{400}, Handler: h(s.jobs)},
		{Method: "GET", Path: "/v1/jobs/{id}", ID: "getJob", Tag: "jobs", Summary: "A job: spec, state, assignments, results, escrow and cost, and why it is where it is: wait (a stable code and its numbers, docs/ledger.md \"Waits\"; wait_code the scheduler's case) for programs, reason (that rendered as a sentence, whose words may change) for people",
			PathParams: jobIDParam, Resp: ledger.Job{}, Errors: []int{400, 404}, Handler: h(s.job)},
		{Method: "POST", Path: "/v1/quote", ID: "quote", Tag: "jobs", Summary: "What submitting a spec now would give: matching providers, price, escrow, or why it would wait",
			Body: ledger.JobSpec{}, Resp: ledger.Quote{}, MaxBody: 1 << 20, Errors: []int{400, 413}, Handler: h(s.quote)},
		{Method: "POST", Path: "/v1/jobs/{id}/logs", ID: "postJobLog", Tag: "jobs", Summary: "A running job's provider posts a chunk of its live log (sealed to the owner, signed)",
			PathParams: jobIDParam,
			Query: []Param{
				{Name: "X-Gpunet-Provider", In: "header", Type: "string", Required: true, Desc: "the provider's address"},
				{Name: "X-Gpunet-Seq", In: "header", Type: "integer", Required: true, Desc: "the provider's post number for this job: 0, 1, …"},
				{Name: "X-Gpunet-Signature", In: "header", Type: "string", Required: true, Desc: "hex ed25519 signature of LogSignBytes"},
			},
			BodyType: "application/octet-stream", Resp: apiwire.LogPosted{}, Status: http.StatusCreated, MaxBody: maxLogChunkBytes,
			Errors: []int{400, 403, 404, 409, 413}, Handler: h(s.postLog)},
		{Method: "GET", Path: "/v1/jobs/{id}/logs", ID: "getJobLog", Tag: "jobs", Summary: "A job's live log chunks (ciphertext only its owner can read), from a sequence number",
			PathParams: jobIDParam,
			Query: []Param{
				{Name: "from", Type: "integer", Desc: "the first chunk's seq (the next of the previous page; default 0)"},
				{Name: "limit", Type: "integer", Min: 1, Max: maxChunksPerJob, Desc: "chunks per page, 1 to 512 (default 64)"},
			},
			Resp: apiwire.LogPage{}, Errors: []int{400}, Handler: h(s.getLog)},
	}
}
