package ledger_test

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/gpunet/gpunet/internal/ledger"
	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

// TestLabelValidation: a provider's label (issue 33) is optional, at most
// 40 bytes of letters, digits, single spaces and -_.,'()&/#+; anything
// that could make it draw other than it reads (bidi overrides, zero-width
// and other format characters, controls, fillers) is refused, and the
// error names the field.
func TestLabelValidation(t *testing.T) {
	good := []string{
		"",
		"Acme GPUs",
		"Acme GPUs #2",
		"rack-7_b.eu",
		"O'Brien & Sons (Dublin)",
		"A/B testing, inc. +1",
		"Zürich Rechenzentrum",  // composed letters
		"東京 GPU",                // letters of any script
		"ГПУ ферма 3",           // Cyrillic
		strings.Repeat("x", 40), // exactly the limit
		strings.Repeat("é", 20), // 40 bytes of two-byte letters
		"٣ GPUs",                // any decimal digit (Nd)
	}
	for _, l := range good {
		pi := lt.ProviderInfo("RTX_4090", 1, 500_000)
		pi.Label = l
		if err := (&ledger.MsgRegisterProvider{ProviderInfo: pi}).ValidateBasic(); err != nil {
			t.Errorf("label %q refused: %v", l, err)
		}
	}
	for _, c := range []struct{ label, why string }{
		{strings.Repeat("x", 41), "41 bytes, at most 40"},
		{strings.Repeat("é", 20) + "x", "41 bytes"},
		{"evil\u202eexe.gpu", "U+202E"}, // right-to-left override
		{"a\u2066b\u2069", "U+2066"},    // bidi isolate
		{"\u200fAcme", "U+200F"},        // right-to-left mark
		{"Ac\u200bme", "U+200B"},        // zero-width space
		{"Ac\u200dme", "U+200D"},        // zero-width joiner
		{"Acme\ufeff", "U+FEFF"},        // byte order mark
		{"Ac\u00adme", "U+00AD"},        // soft hyphen (Cf)
		{"Acme\nGPUs", "U+000A"},        // control characters
		{"Acme\tGPUs", "U+0009"},
		{"Acme\x00", "U+0000"},
		{"Acme\x1b[31m", "U+001B"},
		{"Acme\u0085", "U+0085"},
		{"Acme\xff", "not valid UTF-8"},          // invalid UTF-8
		{"Acme\xc3", "not valid UTF-8"},          // truncated sequence
		{"\xed\xa0\x80", "not valid UTF-8"},      // a surrogate
		{" Acme", "starts or ends with a space"}, // leading, trailing, double spaces
		{"Acme ", "starts or ends with a space"},
		{" ", "starts or ends with a space"},
		{"Acme  GPUs", "two spaces in a row"},
		{"Acme\u00a0GPUs", "U+00A0"}, // other spaces
		{"Acme\u3000GPUs", "U+3000"},
		{"Ac\u3164me", "U+3164"}, // Hangul filler: a letter that draws nothing
		{"\u115f", "U+115F"},
		{"Acme\u0301", "U+0301"}, // combining mark
		{"<b>x</b>", "U+003C"},   // markup
		{`Acme "GPUs"`, "U+0022"},
		{"Acme!", "U+0021"},
		{"Acme;", "U+003B"},
		{"Acme\\x", "U+005C"},
		{"100%", "U+0025"},
		{"Acme™", "U+2122"}, // symbols
		{"GPU 🚀", "U+1F680"},
	} {
		pi := lt.ProviderInfo("RTX_4090", 1, 500_000)
		pi.Label = c.label
		err := (&ledger.MsgRegisterProvider{ProviderInfo: pi}).ValidateBasic()
		if !errors.Is(err, ledger.ErrInvalidMsg) || !strings.HasPrefix(err.Error(), "label ") || !strings.Contains(err.Error(), c.why) {
			t.Errorf("label %q: got %v, want ErrInvalidMsg naming the label and %q", c.label, err, c.why)
			continue
		}
		// The error quotes the label escaped: it never carries the
		// characters it refuses into a log or a terminal.
		for _, r := range strings.TrimPrefix(err.Error(), "label ") {
			if !unicode.IsPrint(r) {
				t.Errorf("label %q: the error %q holds %U", c.label, err, r)
			}
		}
		if upd := (&ledger.MsgUpdateProvider{ProviderInfo: pi}).ValidateBasic(); upd == nil || upd.Error() != err.Error() {
			t.Errorf("label %q: an update is not refused as a registration is: %v", c.label, upd)
		}
	}
	// Through a block too: a signed registration with a bidi override is
	// refused by CheckTx.
	c := lt.NewChain(t, lt.Genesis(1_000_000_000, "prov1"))
	pi := lt.ProviderInfo("RTX_4090", 1, 500_000)
	pi.Label = "gpu1\u202eevil"
	r := c.L.CheckTx(ledger.NewOverlay(c.KV), prov1.Tx(lt.ChainID, 0, 0, &ledger.MsgRegisterProvider{ProviderInfo: pi}))
	if !errors.Is(r.Err, ledger.ErrInvalidMsg) || !strings.Contains(r.Err.Error(), `label "gpu1\u202eevil"`) {
		t.Fatalf("bidi label in a tx: %v", r.Err)
	}
}

// TestProviderUpdateChangesLabel: a provider registers with a label,
// changes it with an update, and clears it; others see each in its
// record, and two providers may share one (the address tells them apart).
func TestProviderUpdateChangesLabel(t *testing.T) {
	c := lt.NewChain(t, lt.Genesis(1_000_000_000, "prov1", "prov2"))
	pi := lt.ProviderInfo("L4", 1, 100)
	pi.Label = "Acme GPUs"
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgRegisterProvider{ProviderInfo: pi})})
	if got := provider(t, c, prov1).Label; got != "Acme GPUs" {
		t.Fatalf("registered label %q", got)
	}
	pi.Label = "Acme GPUs (Berlin) #2"
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgUpdateProvider{ProviderInfo: pi})})
	p := provider(t, c, prov1)
	if p.Label != "Acme GPUs (Berlin) #2" || p.UpdatedHeight != uint64(c.Height) {
		t.Fatalf("after the update: label %q updated at %d (height %d)", p.Label, p.UpdatedHeight, c.Height)
	}
	// A refused update leaves the label as it was.
	bad := pi
	bad.Label = "Acme\u200b"
	if r := send(t, c, prov1, &ledger.MsgUpdateProvider{ProviderInfo: bad}); !errors.Is(r.Err, ledger.ErrInvalidMsg) {
		t.Fatalf("zero-width label update: %v", r.Err)
	}
	if got := provider(t, c, prov1).Label; got != "Acme GPUs (Berlin) #2" {
		t.Fatalf("after a refused update: label %q", got)
	}
	// Another provider may pick the same label: it is not a name anyone
	// owns.
	pi2 := lt.ProviderInfo("L4", 1, 100)
	pi2.Label = "Acme GPUs (Berlin) #2"
	must(t, []ledger.TxResult{send(t, c, prov2, &ledger.MsgRegisterProvider{ProviderInfo: pi2})})
	// An update without one clears it.
	pi.Label = ""
	must(t, []ledger.TxResult{send(t, c, prov1, &ledger.MsgUpdateProvider{ProviderInfo: pi})})
	if got := provider(t, c, prov1).Label; got != "" {
		t.Fatalf("after clearing: label %q", got)
	}
	if got := provider(t, c, prov2).Label; got != "Acme GPUs (Berlin) #2" {
		t.Fatalf("the other provider's label: %q", got)
	}
}

// TestLabelUnicodeVersion: which code points a label may hold is Go's
// unicode tables (unicode.IsLetter, IsDigit). Every node must agree on
// them, or a registration one accepts another refuses and their states
// part. A Go toolchain with other tables fails here: moving to it is a
// consensus change (the labels valid under both stay valid; new letters
// become valid), to be made at an upgrade height, not by rebuilding.
func TestLabelUnicodeVersion(t *testing.T) {
	if unicode.Version != "15.0.0" {
		t.Fatalf("unicode.Version %s, the ledger's label rules were set with 15.0.0: a change of which labels are valid (see ledger.CheckLabel)", unicode.Version)
	}
}

// FuzzCheckLabel: whatever CheckLabel accepts is short, valid UTF-8,
// printable, free of format and control characters, and has no space
// at either end or two in a row.
func FuzzCheckLabel(f *testing.F) {
	for _, s := range []string{"Acme GPUs #2", "evil\u202eexe", "Ac\u200bme", "Ac\u3164me", "<b>x</b>", "\xff", strings.Repeat("é", 21)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ledger.CheckLabel(s) != nil {
			return
		}
		if len(s) > ledger.MaxLabelLen || !utf8.ValidString(s) || strings.HasPrefix(s, " ") || strings.HasSuffix(s, " ") || strings.Contains(s, "  ") {
			t.Fatalf("accepted %q", s)
		}
		for _, r := range s {
			if !unicode.IsPrint(r) || unicode.Is(unicode.Cf, r) || unicode.IsControl(r) || unicode.Is(unicode.Mn, r) || strings.ContainsRune(`<>"\`, r) {
				t.Fatalf("accepted %q holding %U", s, r)
			}
		}
	})
}
