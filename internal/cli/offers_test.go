package cli

import (
	"bytes"
	"strings"
	"testing"

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
