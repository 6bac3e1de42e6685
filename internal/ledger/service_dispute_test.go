package ledger_test

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// receiptOf is k's signed receipt of an answer to request on service svc.
func receiptOf(c *lt.Chain, k lt.Key, svc uint64, request, answer string) ledger.ServiceReceipt {
	r := ledger.ServiceReceipt{
		ServiceID: svc, Provider: k.Addr,
		RequestHash:  sha256.Sum256([]byte(request)),
		ResponseHash: sha256.Sum256([]byte(answer)),
		ParamsHash:   sha256.Sum256([]byte("seed=1")),
		PromptTokens: 5, CompletionTokens: 7,
		Time: c.Now().UnixMilli(),
	}
	r.Sign(lt.ChainID, k.Priv)
	return r
}

// disputeChain has a service whose answers its owner declares bit-exact
// (openai.exact) with three ready replicas on prov1, prov2 and prov3, and
// a fourth provider free to replace one.
func disputeChain(t *testing.T) *lt.Chain {
	t.Helper()
	return disputeChainOf(t, func(s *ledger.ServiceSpec) { s.OpenAI.Exact = true })
}

// disputeChainOf is disputeChain with the service's spec as edit leaves it.
func disputeChainOf(t *testing.T, edit func(*ledger.ServiceSpec)) *lt.Chain {
	t.Helper()
	c := serviceChain(t)
	prov4 := lt.NewKey("prov4")
	must(t, []ledger.TxResult{send(t, c, consumer, &ledger.MsgSend{To: prov4.Addr, Amount: 100_000_000})})
	info := lt.ProviderInfo("", 0, 144_000)
	info.Executors = []string{"wasm", "oci"}
	must(t, []ledger.TxResult{send(t, c, prov4, &ledger.MsgRegisterProvider{ProviderInfo: info})})
	must(t, []ledger.TxResult{send(t, c, prov4, &ledger.MsgStake{Amount: 10_000_000})})
	spec := lt.ServiceSpec("tinylm", 200_000)
	spec.Replicas = 3
	edit(&spec)
	must(t, []ledger.TxResult{deploy(t, c, spec, 100_000_000)})
	s := service(t, c, 1)
	if len(s.Replicas) != 3 {
		t.Fatalf("%d replicas placed, want 3", len(s.Replicas))
	}
	c.Advance(5 * time.Second)
	for _, k := range []lt.Key{prov1, prov2, prov3} {
		must(t, []ledger.TxResult{heartbeat(t, c, k, true, 1)})
	}
	return c
}

// TestServiceDisputeSlashesMinority: three receipts for one request, two
// alike, slash the third provider by slash_bps of its stake (part of it
// to the owner), lower its reputation, end its replica (excluded, a
// replacement placed on prov4) and never touch the two that agree; the
// same receipts cannot be used again.
func TestServiceDisputeSlashesMinority(t *testing.T) {
	c := disputeChain(t)
	before1, before3 := provider(t, c, prov1), provider(t, c, prov3)
	ownerBefore := c.Balance(t, consumer.Addr)
	req := `{"model":"tinylm","messages":[{"role":"user","content":"hi"}],"seed":1}`
	m := &ledger.MsgServiceDispute{Receipts: []ledger.ServiceReceipt{
		receiptOf(c, prov1, 1, req, "hello"),
		receiptOf(c, prov3, 1, req, "wrong"),
		receiptOf(c, prov2, 1, req, "hello"),
	}}
	// Anyone may send it: here the owner.
	res := send(t, c, consumer, m)
	must(t, []ledger.TxResult{res})
	after3 := provider(t, c, prov3)
	want := (before3.Stake) * 1_000 / 10_000
	if got := before3.Stake - after3.Stake; got != want {
		t.Errorf("prov3 lost %d of its stake, want slash_bps of it: %d", got, want)
	}
	if n := len(after3.SlashEvents); n == 0 || after3.SlashEvents[n-1].Code != ledger.SlashServiceOutvoted || after3.SlashEvents[n-1].Service != 1 {
		t.Errorf("prov3's slash events %+v, want a service_outvoted one for service 1", after3.SlashEvents)
	}
	if after3.Reputation >= before3.Reputation || after3.Invalid != before3.Invalid+1 {
		t.Errorf("prov3 reputation %d (was %d), invalid %d (was %d): want lower, and one more", after3.Reputation, before3.Reputation, after3.Invalid, before3.Invalid)
	}
	for _, k := range []lt.Key{prov1, prov2} {
		if p := provider(t, c, k); p.Stake != before1.Stake || len(p.SlashEvents) != 0 {
			t.Errorf("%s, of the majority, was slashed: stake %d, events %+v", k.Addr, p.Stake, p.SlashEvents)
		}
	}
	if got := c.Balance(t, consumer.Addr); got <= ownerBefore {
		t.Errorf("the owner's balance %d did not rise with its share of the slash (was %d)", got, ownerBefore)
	}
	s := service(t, c, 1)
	for _, r := range s.Replicas {
		if r.Provider == prov3.Addr {
			t.Fatalf("prov3's replica still runs after the dispute")
		}
	}
	if len(s.Replicas) != 3 {
		t.Errorf("%d replicas after the dispute, want 3 (a replacement placed)", len(s.Replicas))
	}
	last := s.Ended[len(s.Ended)-1]
	if last.Provider != prov3.Addr || last.Code != ledger.EndDisputed || last.Slashed == 0 {
		t.Errorf("ended %+v, want prov3's, code %q, with what it was slashed", last, ledger.EndDisputed)
	}
	excluded := false
	for _, a := range s.Excluded {
		excluded = excluded || a == prov3.Addr
	}
	if !excluded {
		t.Errorf("prov3 not excluded from the service")
	}
	// Replay: the same receipts again, in another order.
	m.Receipts[0], m.Receipts[2] = m.Receipts[2], m.Receipts[0]
	if r := send(t, c, consumer, m); !errors.Is(r.Err, ledger.ErrInvalidMsg) {
		t.Errorf("a replayed dispute: err %v, want ErrInvalidMsg", r.Err)
	}
	if p := provider(t, c, prov3); p.Stake != after3.Stake {
		t.Errorf("the replay slashed again: stake %d, was %d", p.Stake, after3.Stake)
	}
}

// TestServiceDisputeRefused: the ledger takes no one's word: forged,
// foreign, mismatched or unanimous receipts are refused and slash no one.
func TestServiceDisputeRefused(t *testing.T) {
	c := disputeChain(t)
	req := `{"seed":1}`
	outsider := lt.NewKey("outsider")
	good := func() []ledger.ServiceReceipt {
		return []ledger.ServiceReceipt{receiptOf(c, prov1, 1, req, "a"), receiptOf(c, prov2, 1, req, "a"), receiptOf(c, prov3, 1, req, "b")}
	}
	for _, tc := range []struct {
		name string
		edit func([]ledger.ServiceReceipt) []ledger.ServiceReceipt
		want error
	}{
		{"two receipts", func(r []ledger.ServiceReceipt) []ledger.ServiceReceipt { return r[:2] }, ledger.ErrInvalidMsg},
		{"all agree", func(r []ledger.ServiceReceipt) []ledger.ServiceReceipt {
			r[2] = receiptOf(c, prov3, 1, req, "a")
			return r
		}, ledger.ErrInvalidMsg},
		{"all differ", func(r []ledger.ServiceReceipt) []ledger.ServiceReceipt {
			r[1] = receiptOf(c, prov2, 1, req, "c")
			return r
		}, ledger.ErrInvalidMsg},
		{"other request", func(r []ledger.ServiceReceipt) []ledger.ServiceReceipt {
			r[2] = receiptOf(c, prov3, 1, `{"seed":2}`, "b")
			return r
		}, ledger.ErrInvalidMsg},
		{"same provider twice", func(r []ledger.ServiceReceipt) []ledger.ServiceReceipt {
			r[1] = receiptOf(c, prov1, 1, req, "a")
			return r
		}, ledger.ErrInvalidMsg},
		{"answer changed after signing", func(r []ledger.ServiceReceipt) []ledger.ServiceReceipt {
			r[2].ResponseHash = sha256.Sum256([]byte("c"))
			r[0].ResponseHash = r[2].ResponseHash
			return r
		}, ledger.ErrBadSignature},
		{"signed by another key", func(r []ledger.ServiceReceipt) []ledger.ServiceReceipt {
			f := receiptOf(c, outsider, 1, req, "b")
			f.Provider = prov3.Addr
			r[2] = f
			return r
		}, ledger.ErrInvalidMsg},
		{"not a replica", func(r []ledger.ServiceReceipt) []ledger.ServiceReceipt {
			r[2] = receiptOf(c, outsider, 1, req, "b")
			return r
		}, ledger.ErrNotServiceParty},
		{"too old", func(r []ledger.ServiceReceipt) []ledger.ServiceReceipt {
			r[2].Time -= (ledger.MaxReceiptAge + 10) * 1000
			r[2].Sign(lt.ChainID, prov3.Priv)
			return r
		}, ledger.ErrInvalidMsg},
		{"other service", func(r []ledger.ServiceReceipt) []ledger.ServiceReceipt {
			for i, k := range []lt.Key{prov1, prov2, prov3} {
				r[i] = receiptOf(c, k, 9, req, map[int]string{0: "a", 1: "a", 2: "b"}[i])
			}
			return r
		}, ledger.ErrUnknownService},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := provider(t, c, prov3).Stake
			res := send(t, c, consumer, &ledger.MsgServiceDispute{Receipts: tc.edit(good())})
			if !errors.Is(res.Err, tc.want) {
				t.Fatalf("err %v, want %v", res.Err, tc.want)
			}
			if got := provider(t, c, prov3).Stake; got != before {
				t.Errorf("prov3 slashed by a refused dispute: %d → %d", before, got)
			}
		})
	}
	// A receipt for another chain does not verify here.
	r := good()
	r[2].Sign("other-chain", prov3.Priv)
	if res := send(t, c, consumer, &ledger.MsgServiceDispute{Receipts: r}); !errors.Is(res.Err, ledger.ErrBadSignature) {
		t.Errorf("a receipt signed for another chain: err %v, want ErrBadSignature", res.Err)
	}
}

// TestServiceDisputeNeedsExact: a dispute that would slash on a service
// whose owner declares its answers bit-exact is refused, with
// ErrServiceState and no one slashed, on a service that does not (a float
// model's honest replicas can differ at a near tie) or that declares no
// OpenAI models at all; the same receipts on an exact service slash.
func TestServiceDisputeNeedsExact(t *testing.T) {
	req := `{"model":"tinylm","messages":[{"role":"user","content":"hi"}],"temperature":0}`
	for _, tc := range []struct {
		name string
		edit func(*ledger.ServiceSpec)
		want error
	}{
		{"not exact", func(*ledger.ServiceSpec) {}, ledger.ErrServiceState},
		{"exact false", func(s *ledger.ServiceSpec) { s.OpenAI.Exact = false }, ledger.ErrServiceState},
		{"no openai", func(s *ledger.ServiceSpec) { s.OpenAI = nil }, ledger.ErrServiceState},
		{"exact", func(s *ledger.ServiceSpec) { s.OpenAI.Exact = true }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := disputeChainOf(t, tc.edit)
			before := provider(t, c, prov3).Stake
			res := send(t, c, consumer, &ledger.MsgServiceDispute{Receipts: []ledger.ServiceReceipt{
				receiptOf(c, prov1, 1, req, "a cat"), receiptOf(c, prov2, 1, req, "a cat"), receiptOf(c, prov3, 1, req, "a dog"),
			}})
			if !errors.Is(res.Err, tc.want) || (tc.want == nil && res.Err != nil) {
				t.Fatalf("err %v, want %v", res.Err, tc.want)
			}
			after := provider(t, c, prov3).Stake
			if slashed := after < before; slashed != (tc.want == nil) {
				t.Errorf("prov3's stake %d → %d; slashed %v, want %v", before, after, slashed, tc.want == nil)
			}
			if tc.want != nil && !strings.Contains(res.Err.Error(), "openai.exact") {
				t.Errorf("err %q does not name openai.exact", res.Err)
			}
		})
	}
}
