package ledgerbench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/cometbft/cometbft/mempool"
	rpchttp "github.com/cometbft/cometbft/rpc/client/http"
	jsonrpcclient "github.com/cometbft/cometbft/rpc/jsonrpc/client"
)

// Submission modes (Options.Submit).
const (
	// SubmitRPC sends each tx to the node's CometBFT RPC over loopback TCP
	// with CometBFT's own HTTP client (broadcast_tx_sync), as a client
	// would: the default, and the mode the design's kvstore anchor assumes.
	SubmitRPC = "rpc"
	// SubmitMempool hands each tx to the node's mempool in process
	// (Mempool().CheckTx): no RPC, no HTTP, no JSON.
	SubmitMempool = "mempool"
)

// errMempoolFull says the mempool turned a tx away for lack of room; the tx
// is submitted again a moment later.
var errMempoolFull = errors.New("mempool is full")

// submitFunc submits one tx and waits for CheckTx's verdict on it: its code
// and log, errMempoolFull, or another error (the tx was not admitted).
type submitFunc func(ctx context.Context, tx []byte) (code uint32, log string, err error)

// submitter returns a submitFunc for one submitting goroutine, in the given
// mode, and a function releasing what it holds. dials counts the TCP
// connections the RPC clients open.
func (n *benchNode) submitter(mode string, dials *atomic.Int64) (submitFunc, func(), error) {
	switch mode {
	case SubmitMempool:
		mp := n.Mempool()
		return func(_ context.Context, tx []byte) (uint32, string, error) {
			rr, err := mp.CheckTx(tx, "")
			var full mempool.ErrMempoolIsFull
			if errors.As(err, &full) {
				return 0, "", errMempoolFull
			}
			if err != nil {
				return 0, "", err
			}
			rr.Wait()
			if err := rr.Error(); err != nil {
				return 0, "", err
			}
			r := rr.Response.GetCheckTx()
			if r == nil {
				return 0, "", errors.New("no CheckTx response")
			}
			return r.Code, r.Log, nil
		}, func() {}, nil

	case SubmitRPC:
		if n.rpcAddr == "" {
			return nil, nil, errors.New("the node's RPC is off")
		}
		remote := "tcp://" + n.rpcAddr
		// CometBFT's default client (jsonrpcclient.DefaultHTTPClient), with
		// its dials counted. Each goroutine has its own client, which makes
		// one request at a time and so keeps one connection alive.
		dial, err := jsonrpcclient.MakeHTTPDialer(remote)
		if err != nil {
			return nil, nil, err
		}
		hc := &http.Client{Transport: &http.Transport{
			DisableCompression: true,
			DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				return dial(network, addr)
			},
			MaxIdleConnsPerHost: 1,
		}}
		submit, err := rpcSubmitter(remote, hc)
		return submit, hc.CloseIdleConnections, err
	}
	return nil, nil, fmt.Errorf("unknown submission mode %q", mode)
}

// rpcSubmitter returns a submitFunc calling broadcast_tx_sync on the
// CometBFT RPC at remote through hc.
func rpcSubmitter(remote string, hc *http.Client) (submitFunc, error) {
	c, err := rpchttp.NewWithClient(remote, hc)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx []byte) (uint32, string, error) {
		r, err := c.BroadcastTxSync(ctx, tx)
		if err != nil {
			if strings.Contains(err.Error(), "mempool is full") {
				return 0, "", errMempoolFull
			}
			return 0, "", err
		}
		return r.Code, r.Log, nil
	}, nil
}
