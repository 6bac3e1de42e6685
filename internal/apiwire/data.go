package apiwire

// NetPeers is GET /v1/net/peers: the API URL this node advertises and the
// other nodes' API URLs it knows (its peer_apis and those it learned from
// them). A blob gateway fetches what it lacks only from these.
type NetPeers struct {
	ChainID string   `json:"chain_id"`
	APIURL  string   `json:"api_url"`
	Peers   []string `json:"peers"`
}

// Storage is GET /v1/storage: what a node's blob gateway holds, how long it
// keeps finished jobs' blobs, and, with ?account=, what that account holds
// against its quota.
type Storage struct {
	Blobs        int   `json:"blobs"`
	Bytes        int64 `json:"bytes"`
	MaxBlobBytes int64 `json:"max_blob_bytes"`
	// RetentionSeconds is how long a finished job's blobs are kept;
	// FetchedGraceSeconds how long its outputs are kept after their owner
	// fetched them.
	RetentionSeconds    int64 `json:"retention_seconds"`
	FetchedGraceSeconds int64 `json:"fetched_grace_seconds"`
	// UnreferencedBytes is what all accounts' uploads that no job
	// references take (in progress included), UnreferencedMaxBytes the
	// node's bound on them (negative: none); past it uploads get 507.
	UnreferencedBytes    int64 `json:"unreferenced_bytes"`
	UnreferencedMaxBytes int64 `json:"unreferenced_max_bytes"`
	// USyncPerGiB is what an account must hold on the ledger for each GiB
	// of such uploads the node keeps for it.
	USyncPerGiB uint64          `json:"usync_per_gib"`
	Account     *AccountStorage `json:"account,omitempty"`
}

// AccountStorage is what one account holds in a gateway that no job
// references, against its quota (a negative quota is unlimited).
type AccountStorage struct {
	Address  string `json:"address"`
	Bytes    int64  `json:"bytes"`
	Blobs    int    `json:"blobs"`
	InFlight int64  `json:"in_flight"`
	// QuotaBytes is what it may keep: the node's cap per account, or less
	// when what it holds (Held, usync: balance, provider stake, escrow of
	// its unfinished jobs) buys less at the node's USyncPerGiB.
	QuotaBytes int64  `json:"quota_bytes"`
	QuotaBlobs int    `json:"quota_blobs"`
	Held       uint64 `json:"held"`
}

// OutputsFetched is the answer to POST /v1/jobs/{id}/fetched: how many of
// the job's result blobs this node marked as fetched by their owner.
type OutputsFetched struct {
	Marked int `json:"marked"`
}
