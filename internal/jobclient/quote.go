package jobclient

import (
	"context"
	"fmt"

	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/ledger"
)

// QuoteSpec is what a quote of s asks about: its on-chain part, with a
// placeholder for a wasm module, since quoting uploads nothing.
func QuoteSpec(s *jobspec.Spec) ledger.JobSpec {
	module := ""
	if s.Executor == "wasm" {
		module = "sha256:" + fmt.Sprintf("%064x", 0)
	}
	return LedgerSpec(s, module)
}

// PriceError is CheckPrice refusing a spec whose max_price is below every
// ask of the providers that could otherwise run it.
type PriceError struct {
	// MaxPrice is the spec's max_price_per_hour, usync.
	MaxPrice uint64
	// Quote is the ledger's answer: Code ledger.QuoteOverPrice, its
	// CheapestAsk and Reason.
	Quote *ledger.Quote
}

func (e *PriceError) Error() string {
	return fmt.Sprintf("max_price %d usync/h is below every ask that fits this job (%s)", e.MaxPrice, e.Quote.Reason)
}

// CheckPrice quotes s and returns a *PriceError when the ledger says its
// max_price is below every ask that fits it (Quote.Code is
// ledger.QuoteOverPrice): submitted, it would wait for a cheaper provider,
// and that is rarely what a price typo wants. A job that would wait for
// another reason (no provider of its class, none free now) is not refused.
func (c *Client) CheckPrice(ctx context.Context, s *jobspec.Spec) error {
	ls := QuoteSpec(s)
	q, err := c.Chain.Quote(ctx, &ls)
	if err != nil {
		return err
	}
	if q.Code == ledger.QuoteOverPrice {
		return &PriceError{MaxPrice: ls.MaxPricePerHour, Quote: q}
	}
	return nil
}
