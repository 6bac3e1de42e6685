package apiwire

import "github.com/gpunet/gpunet/internal/ledger"

// Market is GET /v1/market: each hardware class's price index,
// utilisation and tier prices, with its closed epochs (oldest first), and
// the rewards of the open epoch.
type Market struct {
	Height      uint64              `json:"height"`
	Epoch       ledger.Epoch        `json:"epoch"`
	EpochBlocks uint64              `json:"epoch_blocks"`
	TargetPPM   uint64              `json:"target_ppm"` // the utilisation the index steers toward
	Classes     []ledger.MarketInfo `json:"classes"`
	Rewards     *ledger.Rewards     `json:"rewards"`
}
