package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
	"github.com/gpunet/gpunet/internal/offers"
)

// TestOffersPriceUnit: the offers table says what a price is per: a GPU of
// a GPU provider, a core of a CPU-only one, and an hour (issue 33: the
// PRICE/h column did not say per what).
func TestOffersPriceUnit(t *testing.T) {
	var b bytes.Buffer
	printOffers(&b, []offers.Offer{
		{Address: "gpu1gpu", GPU: "RTX_4090", Count: 2, VRAM: 24, CPU: 16, Price: 0.8, Region: "eu"},
		{Address: "gpu1cpu", GPU: "cpu", CPU: 8, Price: 0.02, Region: "us-east"},
	}, false, keyNames{})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("table:\n%s", b.String())
	}
	if h := strings.Fields(lines[0]); h[7] != "PRICE" {
		t.Errorf("header %q: want PRICE after TOPS", lines[0])
	}
	for i, want := range []string{"0.8 SYNC/GPU/h", "0.02 SYNC/core/h"} {
		if !strings.Contains(lines[i+1], want) {
			t.Errorf("row %d %q: want its price as %q", i+1, lines[i+1], want)
		}
	}
}

// TestOffersShowLabels: a provider's label (issue 33) is shown beside its
// address, quoted as the provider's own words, by offers and query
// provider, and carried in their JSON; a list without labels keeps its
// columns.
func TestOffersShowLabels(t *testing.T) {
	var b bytes.Buffer
	printOffers(&b, []offers.Offer{
		{Address: "gpu1labelled", Label: "Acme GPUs #2", GPU: "cpu", CPU: 8, Price: 0.02, Region: "eu"},
		{Address: "gpu1plain", GPU: "cpu", CPU: 8, Price: 0.02, Region: "eu"},
	}, false, keyNames{})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if h := strings.Fields(lines[0]); len(lines) != 3 || h[0] != "PROVIDER" || h[1] != "LABEL" {
		t.Fatalf("table:\n%s", b.String())
	}
	if f := strings.Fields(lines[1]); f[0] != "gpu1labelled" || !strings.HasPrefix(lines[1], `gpu1labelled  "Acme GPUs #2"  `) {
		t.Errorf("labelled row %q: want the address, then the label in quotes", lines[1])
	}
	if f := strings.Fields(lines[2]); f[0] != "gpu1plain" || f[1] != "-" {
		t.Errorf("unlabelled row %q: want the address, then -", lines[2])
	}
	b.Reset()
	printOffers(&b, []offers.Offer{{Address: "gpu1plain", GPU: "cpu", CPU: 8, Price: 0.02, Region: "eu"}}, false, keyNames{})
	if strings.Contains(b.String(), "LABEL") {
		t.Errorf("no provider labelled, yet a LABEL column:\n%s", b.String())
	}

	// Through the node's API: p1 labels itself.
	s := newStory(t)
	pi := lt.ProviderInfo("", 0, 3_600_000)
	pi.EncryptionKey = s.provID.Recipient().String()
	pi.Label = "Zürich (rack 7)"
	s.chain.Send(s.prov, &ledger.MsgUpdateProvider{ProviderInfo: pi})
	out := s.ok("offers")
	if !strings.Contains(out, s.prov.Addr.String()+`  "Zürich (rack 7)"`) {
		t.Errorf("offers: want p1's address, then its label:\n%s", out)
	}
	var list []offers.Offer
	if err := json.Unmarshal([]byte(s.ok("offers", "-o", "json")), &list); err != nil || len(list) != 1 || list[0].Label != "Zürich (rack 7)" {
		t.Errorf("offers -o json: %v %+v", err, list)
	}
	// The label is a query field too.
	if out := s.ok("offers", `label="zürich (rack 7)"`); !strings.Contains(out, s.prov.Addr.String()) {
		t.Errorf("offers label=…: %s", out)
	}
	out = s.ok("query", "provider", s.prov.Addr.String())
	if !strings.Contains(out, "provider "+s.prov.Addr.String()+"\n") || !strings.Contains(out, "label:       \"Zürich (rack 7)\" (set by the provider;") {
		t.Errorf("query provider: want the address and the label:\n%s", out)
	}
}

// TestOffersTEEColumn: the offers table shows each provider's attested
// TEE kind, "-" for none (issue 31).
func TestOffersTEEColumn(t *testing.T) {
	var b bytes.Buffer
	printOffers(&b, []offers.Offer{
		{Address: "gpu1snp", GPU: "cpu", CPU: 8, Price: 0.02, Region: "eu", TEE: "sev-snp"},
		{Address: "gpu1plain", GPU: "cpu", CPU: 8, Price: 0.02, Region: "eu"},
	}, false, keyNames{})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	col := strings.Index(lines[0], " TEE ") + 1 // the table aligns cells under their heading
	if col <= 0 || len(lines) != 3 {
		t.Fatalf("no TEE column:\n%s", b.String())
	}
	for i, want := range []string{"sev-snp", "-"} {
		if f := strings.Fields(lines[i+1][col:]); f[0] != want {
			t.Errorf("row %q: TEE %q, want %q", lines[i+1], f[0], want)
		}
	}
}

// TestOffersTEEPrices: below attested offers, each of their classes'
// on-demand price at the index for a trust: tee job (its TEE market's)
// and for a plain one; a class without a TEE market prices both alike.
func TestOffersTEEPrices(t *testing.T) {
	prices := func(p uint64) []ledger.TierPrice {
		return []ledger.TierPrice{{Tier: ledger.TierSpot, PricePerHour: p / 2}, {Tier: ledger.TierOnDemand, PricePerHour: p}}
	}
	markets := []ledger.MarketInfo{
		{Class: "cpu", Prices: prices(100_000), TEE: &ledger.MarketInfo{Class: "cpu", Prices: prices(250_000)}},
		{Class: "RTX_4090", Prices: prices(2_000_000)},
	}
	var b bytes.Buffer
	printTEEPrices(&b, []offers.Offer{
		{Address: "gpu1snp", GPU: "cpu", TEE: "sev-snp"},
		{Address: "gpu1tdx", GPU: "RTX_4090", Count: 1, TEE: "tdx"},
		{Address: "gpu1plain", GPU: "H100"},
	}, markets)
	want := "RTX_4090 at the index (on-demand): trust: tee 2 SYNC/GPU/h, plain 2 SYNC/GPU/h; a job pays at least its provider's ask\n" +
		"cpu at the index (on-demand): trust: tee 0.25 SYNC/core/h, plain 0.1 SYNC/core/h; a job pays at least its provider's ask\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	printTEEPrices(&b, []offers.Offer{{Address: "gpu1plain", GPU: "cpu"}}, markets)
	if b.Len() != 0 {
		t.Fatalf("prices without attested offers: %q", b.String())
	}
}

// TestQuoteTiersShowTEEIndex: a trust: tee quote's tiers name both of the
// class's indexes, of which the job pays the larger; a plain quote's one.
func TestQuoteTiersShowTEEIndex(t *testing.T) {
	var b bytes.Buffer
	printQuoteTiers(&b, &ledger.Quote{Tiers: []ledger.QuoteTier{
		{Tier: ledger.TierOnDemand, Class: "cpu", Index: 100_000, TEEIndex: 250_000, FactorPPM: 1_000_000, Market: 250_000, Ask: 36_000, PricePerHour: 250_000, Why: "index"},
	}})
	if want := "max(index 0.1 SYNC, tee index 0.25 SYNC)/unit-h × 1.00 = 0.25 SYNC/h"; !strings.Contains(b.String(), want) {
		t.Fatalf("tee quote tiers:\n%s\nwant %q", b.String(), want)
	}
	b.Reset()
	printQuoteTiers(&b, &ledger.Quote{Tiers: []ledger.QuoteTier{
		{Tier: ledger.TierOnDemand, Class: "cpu", Index: 100_000, FactorPPM: 1_000_000, Market: 100_000, PricePerHour: 100_000, Why: "index"},
	}})
	if strings.Contains(b.String(), "tee") || !strings.Contains(b.String(), "index 0.1 SYNC/unit-h") {
		t.Fatalf("plain quote tiers:\n%s", b.String())
	}
}
