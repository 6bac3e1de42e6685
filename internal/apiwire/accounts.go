package apiwire

import "github.com/gpunet/gpunet/internal/ledger"

// AccountBody is GET /v1/accounts/{addr}.
type AccountBody struct {
	ledger.Account
	// NextSequence is the sequence the account's next tx must carry,
	// counting its txs waiting in the mempool ("sequence" counts only
	// committed ones).
	NextSequence uint64 `json:"next_sequence"`
	// Provider tells whether the account is a registered provider; Stake
	// and Earned (usync paid for its jobs) are then its provider record's.
	Provider  bool   `json:"provider"`
	Stake     uint64 `json:"stake"`
	Unbonding uint64 `json:"unbonding"` // usync on its way back to the balance
	Earned    uint64 `json:"earned"`
	Height    uint64 `json:"height"`
}

// BalanceBody is GET /v1/accounts/{addr}/balance.
type BalanceBody struct {
	Address string `json:"address"`
	Balance uint64 `json:"balance"`
	Denom   string `json:"denom"`
	Height  uint64 `json:"height"`
}

// SupplyBody is GET /v1/supply: where the tokens are, in usync.
type SupplyBody struct {
	Supply    uint64 `json:"supply"`
	Treasury  uint64 `json:"treasury"`
	Staked    uint64 `json:"staked"`
	Unbonding uint64 `json:"unbonding"`
	Escrowed  uint64 `json:"escrowed"`
	Height    uint64 `json:"height"`
}
