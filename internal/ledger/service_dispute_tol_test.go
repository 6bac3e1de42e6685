package ledger_test

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
	"github.com/gpunet/gpunet/internal/ledger/logprob"
)

// Answers of a float model, log-probabilities in thousandths of a nat.
func lpAnswer(text string, toks ...logprob.Token) *logprob.Answer {
	return &logprob.Answer{Choices: []logprob.Choice{{Index: 0, Text: text, Finish: "stop", Tokens: toks}}}
}

func lpTok(s string, milli int64, top ...any) logprob.Token {
	t := logprob.Token{Token: s, Logprob: milli * 1_000_000}
	for i := 0; i < len(top); i += 2 {
		t.Top = append(t.Top, logprob.Alt{Token: top[i].(string), Logprob: int64(top[i+1].(int)) * 1_000_000})
	}
	return t
}

var (
	// Two honest replicas on different hardware: the same first token
	// within 0.004 nats, then " cat" and " dog" nearly tied (0.005
	// apart), each rating the other's choice.
	honestA = lpAnswer("A cat", lpTok("A", -120, "A", -120, "The", -2300), lpTok(" cat", -700, " cat", -700, " dog", -705))
	honestB = lpAnswer("A dog", lpTok("A", -124, "A", -124, "The", -2290), lpTok(" dog", -701, " dog", -701, " cat", -704))
	// Another model: it rates its first token otherwise.
	otherModel = lpAnswer("A cow", lpTok("A", -900, "A", -900), lpTok(" cow", -50, " cow", -50))
)

// lpReceipt is k's signed receipt of answer a to request on service svc.
func lpReceipt(c *lt.Chain, k lt.Key, svc uint64, request string, a *logprob.Answer) ledger.ServiceReceipt {
	r := ledger.ServiceReceipt{
		ServiceID: svc, Provider: k.Addr,
		RequestHash:  sha256.Sum256([]byte(request)),
		ResponseHash: a.TextHash(), LogprobsHash: a.LogprobsHash(),
		ParamsHash:   sha256.Sum256([]byte("temperature=0")),
		PromptTokens: 5, CompletionTokens: 2,
		Time: c.Now().UnixMilli(),
	}
	r.Sign(lt.ChainID, k.Priv)
	return r
}

// lpDispute is the dispute of prov1's, prov2's and prov3's answers a, b
// and odd.
func lpDispute(c *lt.Chain, a, b, odd *logprob.Answer) *ledger.MsgServiceDispute {
	const req = `{"model":"tinylm","messages":[{"role":"user","content":"an animal"}],"temperature":0}`
	return &ledger.MsgServiceDispute{
		Receipts: []ledger.ServiceReceipt{lpReceipt(c, prov1, 1, req, a), lpReceipt(c, prov2, 1, req, b), lpReceipt(c, prov3, 1, req, odd)},
		Answers:  []json.RawMessage{a.Encode(), b.Encode(), odd.Encode()},
	}
}

// tolerant declares a tolerance of 0.02 nats.
func tolerant(s *ledger.ServiceSpec) { s.OpenAI.LogprobTolE9 = 20_000_000 }

// TestServiceDisputeByLogprobs: on a service that declares a tolerance,
// two honest answers that differ at a near tie outvote a third whose
// log-probabilities neither explains: it is slashed as an outvoted exact
// replica is (its replica ended, excluded, replaced), the two are not,
// and the evidence cannot be used twice.
func TestServiceDisputeByLogprobs(t *testing.T) {
	c := disputeChainOf(t, tolerant)
	before1, before3 := provider(t, c, prov1), provider(t, c, prov3)
	m := lpDispute(c, honestA, honestB, otherModel)
	must(t, []ledger.TxResult{send(t, c, consumer, m)})
	after3 := provider(t, c, prov3)
	if want := before3.Stake * 1_000 / 10_000; before3.Stake-after3.Stake != want {
		t.Errorf("prov3 lost %d, want slash_bps of its stake: %d", before3.Stake-after3.Stake, want)
	}
	if n := len(after3.SlashEvents); n == 0 || after3.SlashEvents[n-1].Code != ledger.SlashServiceOutvoted {
		t.Errorf("prov3's slash events %+v, want a service_outvoted one", after3.SlashEvents)
	}
	for _, k := range []lt.Key{prov1, prov2} {
		if p := provider(t, c, k); p.Stake != before1.Stake || len(p.SlashEvents) != 0 {
			t.Errorf("%s, of the majority, was slashed: stake %d, events %+v", k.Addr, p.Stake, p.SlashEvents)
		}
	}
	s := service(t, c, 1)
	last := s.Ended[len(s.Ended)-1]
	if last.Provider != prov3.Addr || last.Code != ledger.EndDisputed || len(s.Replicas) != 3 {
		t.Errorf("ended %+v with %d replicas left, want prov3's ended as disputed and a replacement placed", last, len(s.Replicas))
	}
	if r := send(t, c, consumer, m); !errors.Is(r.Err, ledger.ErrInvalidMsg) {
		t.Errorf("the same evidence again: err %v, want ErrInvalidMsg", r.Err)
	}
}

// TestServiceDisputeByLogprobsOddFirst: the odd answer may be any of the
// three; the ledger finds it by the rule, not by position.
func TestServiceDisputeByLogprobsOddFirst(t *testing.T) {
	c := disputeChainOf(t, tolerant)
	before2 := provider(t, c, prov2).Stake
	const req = `{"temperature":0}`
	m := &ledger.MsgServiceDispute{
		Receipts: []ledger.ServiceReceipt{lpReceipt(c, prov1, 1, req, honestA), lpReceipt(c, prov2, 1, req, otherModel), lpReceipt(c, prov3, 1, req, honestB)},
		Answers:  []json.RawMessage{honestA.Encode(), otherModel.Encode(), honestB.Encode()},
	}
	must(t, []ledger.TxResult{send(t, c, consumer, m)})
	if after := provider(t, c, prov2).Stake; after >= before2 {
		t.Errorf("prov2, the odd one in the middle, not slashed: %d → %d", before2, after)
	}
}

// TestServiceDisputeByLogprobsRefused: evidence that is not the replicas'
// own word, is over its bound, shows no minority, or is for a service that
// declares no tolerance is refused, and slashes no one.
func TestServiceDisputeByLogprobsRefused(t *testing.T) {
	// Honest answers a hair further apart than honestA and honestB: within
	// the chain's least tolerance (0.01), beyond a tolerance of 0.002.
	honestC := lpAnswer("A cat", lpTok("A", -118, "A", -118, "The", -2310), lpTok(" cat", -697, " cat", -697, " dog", -703))
	big := lpAnswer(strings.Repeat("x", logprob.MaxEvidence), lpTok("x", -1, "x", -1))
	for _, tc := range []struct {
		name string
		edit func(*ledger.ServiceSpec)
		msg  func(*lt.Chain) *ledger.MsgServiceDispute
		want error
		says string
	}{
		{"text changed after signing", tolerant, func(c *lt.Chain) *ledger.MsgServiceDispute {
			m := lpDispute(c, honestA, honestB, otherModel)
			m.Answers[2] = lpAnswer("A cat", otherModel.Choices[0].Tokens...).Encode()
			return m
		}, ledger.ErrInvalidMsg, "its text hashes"},
		{"an honest answer's logprobs made up", tolerant, func(c *lt.Chain) *ledger.MsgServiceDispute {
			// A disputer that rewrites prov1's logprobs to make it the odd
			// one: the receipt's logprobs hash says otherwise.
			m := lpDispute(c, honestA, honestB, otherModel)
			m.Answers[0] = lpAnswer("A cat", lpTok("A", -900, "A", -900), lpTok(" cat", -50, " cat", -50)).Encode()
			return m
		}, ledger.ErrInvalidMsg, "log-probabilities hash"},
		{"two answers", tolerant, func(c *lt.Chain) *ledger.MsgServiceDispute {
			m := lpDispute(c, honestA, honestB, otherModel)
			m.Answers = m.Answers[:2]
			return m
		}, ledger.ErrInvalidMsg, "answers: want 3"},
		{"an answer over the bound", tolerant, func(c *lt.Chain) *ledger.MsgServiceDispute {
			return lpDispute(c, honestA, honestB, big)
		}, ledger.ErrInvalidMsg, "bytes, at most"},
		{"not evidence", tolerant, func(c *lt.Chain) *ledger.MsgServiceDispute {
			m := lpDispute(c, honestA, honestB, otherModel)
			m.Answers[2] = json.RawMessage(`{"choices":[],"model":"x"}`)
			return m
		}, ledger.ErrInvalidMsg, "answers[2]"},
		{"near ties only", tolerant, func(c *lt.Chain) *ledger.MsgServiceDispute {
			return lpDispute(c, honestA, honestC, honestB)
		}, ledger.ErrInvalidMsg, "no minority"},
		{"three answers alike", tolerant, func(c *lt.Chain) *ledger.MsgServiceDispute {
			return lpDispute(c, honestA, honestA, honestA)
		}, ledger.ErrInvalidMsg, "the same"},
		{"three models", tolerant, func(c *lt.Chain) *ledger.MsgServiceDispute {
			return lpDispute(c, honestA, lpAnswer("Bird", lpTok("Bird", -10)), otherModel)
		}, ledger.ErrInvalidMsg, "no minority"},
		{"owner's tolerance under the chain's least", func(s *ledger.ServiceSpec) { s.OpenAI.LogprobTolE9 = 2_000_000 }, func(c *lt.Chain) *ledger.MsgServiceDispute {
			// At 0.002 honestC would be odd against honestA and a copy;
			// the ledger judges at 0.01 (service_logprob_tolerance_min_e9).
			return lpDispute(c, honestA, honestA, honestC)
		}, ledger.ErrInvalidMsg, "no minority"},
		{"no tolerance declared", func(*ledger.ServiceSpec) {}, func(c *lt.Chain) *ledger.MsgServiceDispute {
			return lpDispute(c, honestA, honestB, otherModel)
		}, ledger.ErrServiceState, "openai.tolerance"},
		{"exact, with answers", func(s *ledger.ServiceSpec) { s.OpenAI.Exact = true }, func(c *lt.Chain) *ledger.MsgServiceDispute {
			return lpDispute(c, honestA, honestB, otherModel)
		}, ledger.ErrServiceState, "openai.tolerance"},
		{"tolerance declared, no answers", tolerant, func(c *lt.Chain) *ledger.MsgServiceDispute {
			m := lpDispute(c, honestA, honestA, otherModel)
			m.Answers = nil
			return m
		}, ledger.ErrServiceState, "openai.exact"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := disputeChainOf(t, tc.edit)
			var before [3]uint64
			for i, k := range []lt.Key{prov1, prov2, prov3} {
				before[i] = provider(t, c, k).Stake
			}
			res := send(t, c, consumer, tc.msg(c))
			if !errors.Is(res.Err, tc.want) || !strings.Contains(res.Err.Error(), tc.says) {
				t.Fatalf("err %v, want %v saying %q", res.Err, tc.want, tc.says)
			}
			for i, k := range []lt.Key{prov1, prov2, prov3} {
				if got := provider(t, c, k).Stake; got != before[i] {
					t.Errorf("%s slashed by a refused dispute: %d → %d", k.Addr, before[i], got)
				}
			}
		})
	}
	// A receipt whose logprobs hash was changed after signing does not
	// verify: the answers are not even read.
	c := disputeChainOf(t, tolerant)
	m := lpDispute(c, honestA, honestB, otherModel)
	m.Receipts[1].LogprobsHash = ledger.Hash{}
	if err := m.ValidateBasic(); err != nil {
		t.Errorf("ValidateBasic: %v", err)
	}
	if res := send(t, c, consumer, m); !errors.Is(res.Err, ledger.ErrBadSignature) {
		t.Errorf("a receipt's logprobs hash changed after signing: %v, want ErrBadSignature", res.Err)
	}
}

// TestServiceToleranceSpec: a declared tolerance is bounded and excludes
// openai.exact.
func TestServiceToleranceSpec(t *testing.T) {
	for _, tc := range []struct {
		tol   uint64
		exact bool
		want  string
	}{
		{20_000_000, false, ""},
		{ledger.MaxLogprobTolE9, false, ""},
		{ledger.MaxLogprobTolE9 + 1, false, "logprob_tol_e9"},
		{20_000_000, true, "exclusive"},
	} {
		s := lt.ServiceSpec("tinylm", 200_000)
		s.OpenAI.LogprobTolE9, s.OpenAI.Exact = tc.tol, tc.exact
		err := s.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && (!errors.Is(err, ledger.ErrInvalidMsg) || !strings.Contains(err.Error(), tc.want))) {
			t.Errorf("tolerance %d, exact %v: %v, want %q", tc.tol, tc.exact, err, tc.want)
		}
	}
}
