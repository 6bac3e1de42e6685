package apiserver

import (
	"net/http"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// validators answers GET /v1/validators: the ledger's validators with
// their power, bond, missed blocks and status.
func (s *Server) validators(w http.ResponseWriter, r *http.Request) {
	kv, release := s.chain.View()
	defer release()
	p, err := ledger.GetParams(kv)
	if err != nil {
		writeLedgerError(w, err)
		return
	}
	vs, err := ledger.Validators(kv)
	if err != nil {
		writeLedgerError(w, err)
		return
	}
	out := apiwire.ValidatorList{Validators: vs, Managed: ledger.ManagesValidators(kv), Window: p.DowntimeWindow, Height: ledger.Height(kv)}
	if out.Validators == nil {
		out.Validators = []ledger.ValidatorInfo{}
	}
	for _, v := range vs {
		out.TotalPower += v.Power
	}
	writeJSON(w, http.StatusOK, out)
}
