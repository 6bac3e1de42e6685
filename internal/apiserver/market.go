package apiserver

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// defaultMarketHistory is how many closed epochs GET /v1/market returns
// per class unless ?history= says otherwise.
const defaultMarketHistory = 48

// market answers GET /v1/market[?class=C][&history=N]: the price index,
// utilisation and tier prices per class over the last N epochs, and the
// open epoch's rewards.
func (s *Server) market(w http.ResponseWriter, r *http.Request) {
	class := r.URL.Query().Get("class")
	if class != "" && class != ledger.CPUClass && !ledger.ValidHardwareClass(class) {
		writeError(w, http.StatusBadRequest, 0, fmt.Sprintf("class %q: want a hardware class like RTX_4090, or cpu", class))
		return
	}
	history := defaultMarketHistory
	if v := r.URL.Query().Get("history"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > ledger.MarketHistoryEpochs {
			writeError(w, http.StatusBadRequest, 0, fmt.Sprintf("history %q: want 0 to %d epochs", v, ledger.MarketHistoryEpochs))
			return
		}
		history = n
	}
	kv, release := s.chain.View()
	defer release()
	p, err := ledger.GetParams(kv)
	if err != nil {
		writeLedgerError(w, err)
		return
	}
	classes, err := ledger.Market(kv, class, history)
	if err != nil {
		writeLedgerError(w, err)
		return
	}
	rw, err := ledger.GetRewards(kv)
	if err != nil {
		writeLedgerError(w, err)
		return
	}
	if classes == nil {
		classes = []ledger.MarketInfo{}
	}
	writeJSON(w, http.StatusOK, apiwire.Market{Height: ledger.Height(kv), Epoch: ledger.GetEpoch(kv), EpochBlocks: p.EpochBlocks, TargetPPM: p.MarketTargetPPM, Classes: classes, Rewards: rw})
}
