package jobclient

import (
	"context"
	"fmt"
	"strings"

	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/ledger/sched"
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

// PriceError is Check refusing a spec whose max_price is below every ask
// of the providers that could otherwise run it.
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

// UnmetError is Check refusing a spec that asks for something no online
// provider offers at any price: submitted, it would lock its escrow and
// wait until such a provider comes.
type UnmetError struct {
	// Unmet are the requirements that turned the providers away, each
	// with how many it turned away and what the network offers instead,
	// in the order the scheduler checks them.
	Unmet []Unmet
	// Seen is how many online providers offer the job's class (CPU
	// capacity, or its GPU models): those the scheduler looked at.
	Seen uint64
	// Quote is the ledger's answer to the spec at the highest price a
	// job may offer: its Code and Miss say why none would take it.
	Quote *ledger.Quote
}

// Unmet is one requirement of a spec that no online provider, or not
// enough of them, meets.
type Unmet struct {
	// Field is the spec's field ("resources.gpu.count", "region").
	Field string `json:"field"`
	// Want is what the spec asks, as a spec writes it ("1 GPU", "1TiB").
	Want string `json:"want"`
	// Providers is how many online providers it turned away (each is
	// counted under the first requirement it fails); 0 when none offers
	// the job's class at all.
	Providers uint64 `json:"providers"`
	// Offered is what the network offers instead ("at most 64GiB",
	// "regions eu (3)").
	Offered string `json:"offered"`
}

func (e *UnmetError) Error() string {
	var parts []string
	for _, u := range e.Unmet {
		p := fmt.Sprintf("%s %s, where the network offers %s", u.Field, u.Want, u.Offered)
		if u.Providers > 0 {
			p += fmt.Sprintf(" (%d of the %d providers it could use fall short on it)", u.Providers, e.Seen)
		}
		parts = append(parts, p)
	}
	return "no online provider can run this job, at any price: " + strings.Join(parts, "; ")
}

// Check is what submitting s should be refused for before anything is
// uploaded or escrow locked: a requirement that no online provider meets
// at any price (a GPU model, GPU count or VRAM, cores, memory, disk,
// executor, region, network, distinct providers for its verification),
// an *UnmetError; or, when providers meet them all, a max_price below
// every ask that fits (Quote.Code ledger.QuoteOverPrice), a *PriceError.
// Both would wait: for a provider that may never come, or a cheaper one,
// which is rarely what a spec's author meant. A job that would wait only
// because the providers that fit are busy, under-staked, on another wasm
// engine or above the market price is not refused. The ledger's own
// acceptance rules are not these: a submission Check refuses is valid.
func (c *Client) Check(ctx context.Context, s *jobspec.Spec) error {
	ls := QuoteSpec(s)
	q, err := c.Chain.Quote(ctx, &ls)
	if err != nil || q.Code == "" {
		return err
	}
	// At the highest price a job may offer, the providers that fit are
	// those that meet every requirement, whatever they ask.
	atAny := ls
	atAny.MaxPricePerHour = ledger.MaxJobPricePerHour
	qa, err := c.Chain.Quote(ctx, &atAny)
	if err != nil {
		// Not this spec's fault (it was quoted once): judge by the price
		// alone, as without this second quote.
		qa = &ledger.Quote{}
	}
	if unmet := unmetBy(qa, &ls); len(unmet) > 0 {
		e := &UnmetError{Unmet: unmet, Quote: qa}
		if qa.Miss != nil {
			e.Seen = qa.Miss.Seen
		}
		// What the network offers instead: a description, so a failure
		// to list the offers only leaves it vaguer.
		all, _ := c.Chain.Offers(ctx, "", "", false)
		for i := range e.Unmet {
			if e.Unmet[i].Offered == "" {
				e.Unmet[i].Offered = describeOffered(e.Unmet[i].Field, &ls, all)
			}
		}
		return e
	}
	if q.Code == ledger.QuoteOverPrice {
		return &PriceError{MaxPrice: ls.MaxPricePerHour, Quote: q}
	}
	return nil
}

// unmetBy is what q, a quote of s at any price, says no online provider
// meets: none when some provider that fits is only busy, under-staked or
// on another wasm engine (it may take the job later), or when the scan
// was cut short.
func unmetBy(q *ledger.Quote, s *ledger.JobSpec) []Unmet {
	m := q.Miss
	if q.Code == "" || m == nil {
		return nil
	}
	switch q.Code {
	case ledger.QuoteNoOffer:
		if s.GPUCount == 0 {
			return []Unmet{{Field: "resources.cpu", Want: "CPU capacity"}}
		}
		if len(s.GPUModels) > 0 {
			return []Unmet{{Field: "resources.gpu.models", Want: strings.Join(s.GPUModels, " or ")}}
		}
		return []Unmet{{Field: "resources.gpu.count", Want: gpus(s.GPUCount)}}
	case ledger.QuoteNoFit, ledger.QuoteTooFew:
	default:
		return nil
	}
	if m.Busy > 0 || m.Stake > 0 || m.NoEngine > 0 || m.OtherEngine > 0 || m.Seen >= sched.ScanLimit {
		return nil
	}
	var out []Unmet
	add := func(n uint64, field, want string) {
		if n > 0 {
			out = append(out, Unmet{Field: field, Want: want, Providers: n})
		}
	}
	add(m.Executor, "executor", s.Executor)
	add(m.CPU, "resources.cpu", cores(s.CPUMilli))
	add(m.RAM, "resources.memory", jobspec.Bytes(s.Memory).String())
	add(m.Disk, "resources.disk", jobspec.Bytes(s.Disk).String())
	add(m.Region, "region", s.Region+" (region_required)")
	add(m.Network, "network", "true")
	add(m.NVLink, "resources.gpu.interconnect", "nvlink")
	add(m.GPUs, "resources.gpu.count", gpus(s.GPUCount))
	add(m.VRAM, "resources.gpu.min_vram", jobspec.Bytes(s.MinVRAM).String()+" per GPU")
	add(m.ComputeCap, "resources.gpu.min_compute_cap", s.MinComputeCap)
	if q.Code == ledger.QuoteTooFew && m.Fit < m.Need && s.Gang() {
		out = append(out, Unmet{Field: "resources.nodes", Want: fmt.Sprintf("%d members on distinct providers in one region", m.Need),
			Offered: fmt.Sprintf("%d that can run it", m.Fit)})
	} else if q.Code == ledger.QuoteTooFew && m.Fit < m.Need {
		out = append(out, Unmet{Field: "verification", Want: fmt.Sprintf("%s: %d distinct providers", s.Verification, m.Need),
			Offered: fmt.Sprintf("%d that can run it", m.Fit)})
	}
	return out
}

func gpus(n uint64) string {
	if n == 1 {
		return "1 GPU"
	}
	return fmt.Sprintf("%d GPUs", n)
}

func cores(milli uint64) string {
	return fmt.Sprintf("%g cores", float64(milli)/1000)
}
