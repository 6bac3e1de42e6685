package provider

import (
	"context"
	"math/rand/v2"
	"net"
	"sync"

	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/receipt"
)

// Receipts (issue 29, docs/ledger.md "Service disputes"): every chat
// completion a replica answers on its service's OpenAI port goes through a
// receipt.Proxy, which signs a receipt of it with the provider's key for
// the node to relay and check. A replica's OpenAI port is reached through
// a pipe: the relay copies bytes into it as for any port, and the proxy
// reads HTTP out of it.

// chainStatuser is a Chain that tells the chain's ID.
type chainStatuser interface {
	Status(ctx context.Context) (*apiwire.StatusBody, error)
}

// receiptChain caches the chain ID receipts are signed for.
type receiptChain struct {
	mu sync.Mutex
	id string
	// status is Options.Chain when it tells the chain's ID, taken before
	// metrics wrap the chain in a recordingChain, which would hide it.
	status chainStatuser
}

// chainID is the chain the agent's receipts are signed for: Options.ChainID,
// else the one its Chain tells (read once); "" when neither says.
func (a *Agent) chainID(ctx context.Context) string {
	a.rchain.mu.Lock()
	defer a.rchain.mu.Unlock()
	if a.rchain.id == "" {
		a.rchain.id = a.o.ChainID
	}
	if a.rchain.id == "" {
		if a.rchain.status != nil {
			if st, err := a.rchain.status.Status(ctx); err == nil {
				a.rchain.id = st.ChainID
			} else {
				a.log.Warn("reading the chain ID from the node", "err", err)
			}
		}
	}
	return a.rchain.id
}

// withReceipts returns the end of a pipe whose other end a receipt.Proxy
// serves towards back, the replica's OpenAI port. Without a chain ID the
// replica is reached as it is, and its answers carry no receipt.
func (a *Agent) withReceipts(ctx context.Context, service uint64, back net.Conn) net.Conn {
	chain := a.chainID(ctx)
	if chain == "" || a.o.Key == nil {
		a.log.Warn("no chain ID known: the replica's answers carry no receipt", "service", service)
		return back
	}
	p := &receipt.Proxy{Signer: &receipt.Signer{Key: a.o.Key.PrivateKey(), ChainID: chain, Now: a.clk.Now}, Service: service, Log: a.log}
	if f := a.o.Faults; f != nil && f.WrongAnswers > 0 {
		p.Wrong = func() bool {
			if rand.Float64() >= f.WrongAnswers {
				return false
			}
			a.log.Warn("FAULT INJECTION: answering this request wrongly", "service", service)
			return true
		}
	}
	near, far := net.Pipe()
	go p.Serve(far, back)
	return near
}
