package openaigw

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"mime"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/ledger/logprob"
	"github.com/gpunet/gpunet/internal/receipt"
)

// Checks (issue 29, docs/ledger.md "Service disputes"): the gateway
// verifies each replica's receipt against the bytes it relayed, passes it
// to the client (Gpunet-Receipt), and sends a sample of the deterministic
// requests it answered also to a replica of another provider, in the
// background, after the answer: byte for byte the same request, by the
// same path, so that neither replica can tell the copy from any request.
// On a different answer it asks a third provider's replica, and two alike
// against one make a MsgServiceDispute for CheckOptions.Dispute when the
// service declares its answers bit-exact (ServiceOpenAI.Exact). Of a
// service that does not, every request asks for log-probabilities
// (asksLogprobs), so that a check can tell a near tie from a wrong answer
// (logprob.Equivalent, the rule the ledger judges by). When the service
// declares a tolerance on them (ServiceOpenAI.LogprobTolE9), one answer
// that two others' log-probabilities judge different (logprob.Judge)
// makes a dispute that carries the three answers, which the ledger judges
// itself; when it declares none, the difference is recorded and counted
// (CheckDiverged), never disputed: an honest float replica can differ on
// other hardware by more than the owner would have said.

// CheckOptions turn on receipts and sampled re-execution.
type CheckOptions struct {
	// ChainID is the chain receipts are signed for.
	ChainID string
	// RatePPM is the share of deterministic requests checked, in parts
	// per million (the ledger's service_check_rate_ppm); read per request.
	RatePPM func() uint64
	// Dispute sends a dispute (a tx); nil: the gateway logs it only.
	Dispute func(ctx context.Context, m *ledger.MsgServiceDispute) error
	// MaxInFlight bounds the checks running at once (default 8); a
	// request drawn while all run is not checked.
	MaxInFlight int
	// Keep is how many checks' records are kept (default 256).
	Keep int
	// Timeout bounds one check, its third answer included (default 2
	// minutes).
	Timeout time.Duration
	// Draw, when set, replaces the random draw (tests): it reports whether
	// to check a request at rate ppm.
	Draw func(ppm uint64) bool
	// LogprobTolerance is the tolerance on log-probabilities (natural
	// log) under which two different answers of a service that declares
	// none count as the same model's on different hardware
	// (logprob.Equivalent): such a check ends CheckTolerated. Default
	// DefaultLogprobTolerance; negative: never.
	LogprobTolerance float64
	// LogprobTolMinE9, when set, reads the chain's least tolerance
	// (params.service_logprob_tolerance_min_e9, parts per 10^9 of a nat):
	// a service's declared tolerance is raised to it, as the ledger does.
	LogprobTolMinE9 func() uint64
}

// DefaultLogprobTolerance is CheckOptions.LogprobTolerance's default:
// float rounding moves a log-probability by far less.
const DefaultLogprobTolerance = 0.01

// tolerance is the tolerance a check of svc judges by, in parts per 10^9
// of a nat (negative: never tolerate), and whether the service declares
// it (then a check can end in a dispute judged by it).
func (c *checker) tolerance(svc *ledger.Service) (tol int64, declared bool) {
	if o := svc.Spec.OpenAI; o != nil && o.LogprobTolE9 > 0 {
		t := o.LogprobTolE9
		if c.o.LogprobTolMinE9 != nil {
			t = max(t, c.o.LogprobTolMinE9())
		}
		return int64(min(t, ledger.MaxLogprobTolE9)), true
	}
	if c.o.LogprobTolerance < 0 {
		return -1, false
	}
	return int64(math.Round(c.o.LogprobTolerance * logprob.Scale)), false
}

// answered is what the gateway kept of an answer it relayed: the
// replica's checked receipt and the answer's outputs (nil when none).
type answered struct {
	r *ledger.ServiceReceipt
	o *receipt.Outputs
}

// Check is the record of one sampled request.
type Check struct {
	Service uint64
	Request ledger.Hash
	// Receipts are the replicas' receipts: the one that answered the
	// client first, then the others asked.
	Receipts []ledger.ServiceReceipt
	// Verdict says how it ended: CheckAgreed, CheckDisputed, CheckSplit
	// (three different answers), CheckTolerated (different answers whose
	// log-probabilities say a near tie, or, of a service with a declared
	// tolerance, three whose differences near ties explain with no
	// minority), CheckDiverged (one answer against two, more than a near
	// tie, of a service that declares neither exact answers nor a
	// tolerance: not disputed) or CheckFailed (Err says why).
	Verdict string
	Err     string
	At      time.Time
}

// Verdicts of a Check.
const (
	CheckAgreed    = "agreed"
	CheckDisputed  = "disputed"
	CheckSplit     = "split"
	CheckTolerated = "tolerated"
	CheckDiverged  = "diverged"
	CheckFailed    = "failed"
)

// CheckVerdicts lists the verdicts of a Check.
var CheckVerdicts = []string{CheckAgreed, CheckTolerated, CheckDiverged, CheckDisputed, CheckSplit, CheckFailed}

// checker runs a Gateway's checks.
type checker struct {
	o   CheckOptions
	sem chan struct{}
	mu  sync.Mutex
	log []Check
	// counts are the checks recorded by verdict, since the start.
	counts map[string]uint64
}

func newChecker(o *CheckOptions) *checker {
	if o == nil {
		return nil
	}
	c := &checker{o: *o, counts: make(map[string]uint64, len(CheckVerdicts))}
	if c.o.MaxInFlight <= 0 {
		c.o.MaxInFlight = 8
	}
	if c.o.Keep <= 0 {
		c.o.Keep = 256
	}
	if c.o.Timeout <= 0 {
		c.o.Timeout = 2 * time.Minute
	}
	if c.o.LogprobTolerance == 0 {
		c.o.LogprobTolerance = DefaultLogprobTolerance
	}
	if c.o.Draw == nil {
		c.o.Draw = func(ppm uint64) bool { return rand.Uint64N(1_000_000) < ppm }
	}
	c.sem = make(chan struct{}, c.o.MaxInFlight)
	return c
}

func (c *checker) record(ch Check) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, ch)
	c.counts[ch.Verdict]++
	if n := len(c.log); n > c.o.Keep {
		c.log = slices.Delete(c.log, 0, n-c.o.Keep)
	}
}

// Checks returns the records of the latest checks, oldest first.
func (g *Gateway) Checks() []Check {
	if g.checks == nil {
		return nil
	}
	g.checks.mu.Lock()
	defer g.checks.mu.Unlock()
	return slices.Clone(g.checks.log)
}

// CheckCounts returns how many checks ended with each verdict since the
// gateway started (every verdict of CheckVerdicts is a key), or nil when
// checks are off.
func (g *Gateway) CheckCounts() map[string]uint64 {
	if g.checks == nil {
		return nil
	}
	g.checks.mu.Lock()
	defer g.checks.mu.Unlock()
	out := make(map[string]uint64, len(CheckVerdicts))
	for _, v := range CheckVerdicts {
		out[v] = g.checks.counts[v]
	}
	return out
}

// answerReceipt checks the receipt that came with an answer of c's replica
// to body with outputs o: the encoded receipt to pass to the client, and
// the receipt, or "" and nil when there is none that matches.
func (g *Gateway) answerReceipt(enc string, c *candidate, body []byte, o *receipt.Outputs) (string, *ledger.ServiceReceipt) {
	if g.checks == nil || enc == "" {
		return "", nil
	}
	r, err := receipt.Decode(enc)
	if err == nil {
		err = receipt.Check(r, g.checks.o.ChainID, c.Service.ID, c.Provider, body, o)
	}
	if err != nil {
		g.log.Warn("openai gateway: a replica's receipt does not match its answer; not relayed", "service", c.Service.ID, "provider", c.Provider, "err", err)
		return "", nil
	}
	return enc, r
}

// maybeCheck draws whether to check the request just answered by first's
// replica with receipt r, and if so starts the check in the background.
func (g *Gateway) maybeCheck(c *candidate, req *chatRequest, body []byte, a answered) {
	k := g.checks
	if k == nil || a.r == nil || !receipt.Deterministic(body) || !k.o.Draw(k.o.RatePPM()) {
		return
	}
	select {
	case k.sem <- struct{}{}:
	default:
		g.log.Debug("openai gateway: too many checks running; this request is not checked", "service", c.Service.ID)
		return
	}
	go func() {
		defer func() { <-k.sem }()
		ctx, cancel := context.WithTimeout(context.Background(), k.o.Timeout)
		defer cancel()
		k.record(g.check(ctx, c, req.Stream, body, a))
	}()
}

// check asks a second provider's replica, and a third on a disagreement.
func (g *Gateway) check(ctx context.Context, c *candidate, stream bool, body []byte, a answered) Check {
	first := a.r
	tol, declared := g.checks.tolerance(c.Service)
	ch := Check{Service: c.Service.ID, Request: first.RequestHash, Receipts: []ledger.ServiceReceipt{*first}, At: g.now()}
	fail := func(err error) Check {
		ch.Verdict, ch.Err = CheckFailed, err.Error()
		g.log.Warn("openai gateway: a sampled check could not finish", "service", c.Service.ID, "err", err)
		return ch
	}
	asked := []address.Address{c.Provider}
	second, o2, err := g.askOther(ctx, c, stream, body, asked)
	if err != nil {
		return fail(err)
	}
	ch.Receipts = append(ch.Receipts, *second)
	if second.ResponseHash == first.ResponseHash {
		ch.Verdict = CheckAgreed
		return ch
	}
	if receipt.Equivalent(a.o, o2, tol) {
		ch.Verdict = CheckTolerated
		return ch
	}
	g.log.Warn("openai gateway: two replicas answered a checked request differently; asking a third", "service", c.Service.ID,
		"first", first.Provider, "second", second.Provider)
	asked = append(asked, second.Provider)
	third, o3, err := g.askOther(ctx, c, stream, body, asked)
	if err != nil {
		return fail(fmt.Errorf("a third replica: %w", err))
	}
	ch.Receipts = append(ch.Receipts, *third)
	encoded := func() []string {
		return []string{receipt.Encode(&ch.Receipts[0]), receipt.Encode(&ch.Receipts[1]), receipt.Encode(&ch.Receipts[2])}
	}
	m := &ledger.MsgServiceDispute{Receipts: slices.Clone(ch.Receipts)}
	var odd address.Address
	if declared {
		// The ledger's own rule on the three answers: it judges the
		// dispute by the same.
		outs := [3]*receipt.Outputs{a.o, o2, o3}
		var answers [3]*logprob.Answer
		for i, o := range outs {
			if o == nil {
				return fail(fmt.Errorf("answer %d: no outputs to judge", i))
			}
			answers[i] = o.Answer()
		}
		i, ok := logprob.Judge(answers, tol)
		if !ok {
			ch.Verdict = CheckSplit
			if receipt.Equivalent(outs[2], outs[0], tol) || receipt.Equivalent(outs[2], outs[1], tol) {
				// The third is like one of the two or both: differences
				// that near ties explain, no minority against anyone.
				ch.Verdict = CheckTolerated
			}
			return ch
		}
		odd = ch.Receipts[i].Provider
		for _, an := range answers {
			m.Answers = append(m.Answers, an.Encode())
		}
	} else {
		if third.ResponseHash != first.ResponseHash && third.ResponseHash != second.ResponseHash {
			ch.Verdict = CheckSplit
			g.log.Warn("openai gateway: three replicas gave three answers; no majority to dispute by", "service", c.Service.ID)
			return ch
		}
		oddOut := a.o
		odd = first.Provider
		if third.ResponseHash == first.ResponseHash {
			odd, oddOut = second.Provider, o2
		}
		if receipt.Equivalent(oddOut, o3, tol) {
			// The odd answer differs from the majority's only where two
			// tokens were nearly tied: not evidence of a wrong model.
			ch.Verdict = CheckTolerated
			return ch
		}
		if o := c.Service.Spec.OpenAI; o == nil || !o.Exact {
			// Evidence of a different answer, not of a wrong one: the
			// owner declares neither bit-exact answers nor a tolerance.
			ch.Verdict = CheckDiverged
			g.log.Warn("openai gateway: a replica's answer differs from two others' by more than a near tie; the service declares neither bit-exact answers (openai.exact) nor a tolerance (openai.tolerance), so it is reported, not disputed",
				"service", c.Service.ID, "provider", odd, "receipts", encoded())
			return ch
		}
	}
	ch.Verdict = CheckDisputed
	if err := m.ValidateBasic(); err != nil {
		// An answer over logprob.MaxEvidence, for one: the ledger could
		// not judge it.
		return fail(fmt.Errorf("the dispute of provider %s is not valid: %w", odd, err))
	}
	g.log.Warn("openai gateway: a replica's answer was outvoted; disputing it", "service", c.Service.ID, "provider", odd,
		"receipts", encoded(), "by_logprobs", declared)
	if d := g.checks.o.Dispute; d != nil {
		if err := d(ctx, m); err != nil {
			ch.Err = err.Error()
			g.log.Error("openai gateway: the dispute was not accepted", "service", c.Service.ID, "err", err)
		}
	}
	return ch
}

// askOther sends body to a routable replica of c's service whose provider
// is not in asked, picked at random, and returns its checked receipt and
// its answer's outputs.
func (g *Gateway) askOther(ctx context.Context, c *candidate, stream bool, body []byte, asked []address.Address) (*ledger.ServiceReceipt, *receipt.Outputs, error) {
	var others []address.Address
	for i := range c.Service.Replicas {
		rep := &c.Service.Replicas[i]
		if routable(c.Service, rep) && !slices.Contains(asked, rep.Provider) {
			others = append(others, rep.Provider)
		}
	}
	if len(others) == 0 {
		return nil, nil, fmt.Errorf("service %d has no other provider's replica ready", c.Service.ID)
	}
	p := others[rand.IntN(len(others))]
	o, enc, err := g.exchange(ctx, c, p, stream, body)
	if err != nil {
		return nil, nil, fmt.Errorf("provider %s: %w", p, err)
	}
	if enc == "" {
		return nil, nil, fmt.Errorf("provider %s answered without a receipt", p)
	}
	r, err := receipt.Decode(enc)
	if err == nil {
		err = receipt.Check(r, g.checks.o.ChainID, c.Service.ID, p, body, o)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("provider %s: %w", p, err)
	}
	return r, o, nil
}

// exchange sends body to provider's replica of c's service as try does
// (the same path, headers and bytes) and reads the whole answer: its
// outputs and its encoded receipt.
func (g *Gateway) exchange(ctx context.Context, c *candidate, provider address.Address, stream bool, body []byte) (*receipt.Outputs, string, error) {
	t := &target{svc: c.Service, provider: provider, port: c.Service.Spec.OpenAI.Port, credential: c.Credential}
	ctx = context.WithValue(ctx, targetKey{}, t)
	up, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+targetHost(t)+UpstreamPath, bytes.NewReader(body))
	if err != nil {
		return nil, "", err
	}
	setUpstreamHeaders(up, stream)
	resp, err := g.transport.RoundTrip(up)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, "", fmt.Errorf("answered %s", resp.Status)
	}
	var o receipt.Outputs
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		br := bufio.NewReaderSize(io.LimitReader(resp.Body, maxReplyBody), 64<<10)
		for {
			line, err := readLine(br)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, "", err
			}
			if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				d = bytes.TrimPrefix(d, []byte(" "))
				if !bytes.Equal(d, doneEvent) {
					if err := o.Add(d); err != nil {
						return nil, "", err
					}
				}
			}
		}
		return &o, resp.Trailer.Get(receipt.Header), nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBody+1))
	if err != nil {
		return nil, "", err
	}
	if len(b) > maxReplyBody {
		return nil, "", fmt.Errorf("answered more than %d bytes", maxReplyBody)
	}
	if err := o.Add(b); err != nil {
		return nil, "", err
	}
	return &o, resp.Header.Get(receipt.Header), nil
}
