package daemon

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Service disputes (issue 29): the node's OpenAI gateway samples requests
// for re-execution (openaigw.CheckOptions) at the ledger's
// service_check_rate_ppm, and sends the disputes it finds with the node's
// DisputeKey through its own API.

// checkRate reads params.service_check_rate_ppm from the committed state.
func checkRate(view func() (ledger.KV, func())) func() uint64 {
	return func() uint64 {
		kv, release := view()
		defer release()
		p, err := ledger.GetParams(kv)
		if err != nil {
			return 0
		}
		return p.ServiceCheckRatePPM
	}
}

// disputeSender sends disputes with key through the node's API.
type disputeSender struct {
	key chainclient.Signer
	log *slog.Logger
	cl  atomic.Pointer[chainclient.Client]
}

func (d *disputeSender) setAPI(url string) { d.cl.Store(chainclient.New(url)) }

func (d *disputeSender) send(ctx context.Context, m *ledger.MsgServiceDispute) error {
	cl := d.cl.Load()
	if d.key == nil || cl == nil {
		return errors.New("this node has no dispute key: the dispute is logged, not sent")
	}
	res, err := cl.SendMsg(ctx, d.key, 0, m)
	if err != nil {
		return err
	}
	d.log.Info("service dispute sent", "service", m.Receipts[0].ServiceID, "tx", res.Hash)
	return nil
}
