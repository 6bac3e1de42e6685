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
