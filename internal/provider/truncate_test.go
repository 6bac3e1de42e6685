package provider

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gpunet/gpunet/internal/ledger"
)

// TestTruncateText: a reason sent to the ledger fits its bound and is
// valid UTF-8, whatever the error said (an image pull's error, which once
// made a replica's release over MaxServiceReleaseReason, refused).
func TestTruncateText(t *testing.T) {
	for _, s := range []string{
		strings.Repeat("x", 1000),
		strings.Repeat("é", 300), // cut inside a character
		"pull: \xff\xfe bad bytes " + strings.Repeat("ü", 200),
		"short",
	} {
		got := truncateText(s, ledger.MaxServiceReleaseReason)
		if len(got) > ledger.MaxServiceReleaseReason || !utf8.ValidString(got) {
			t.Errorf("truncateText(%.20q…) = %d bytes, valid %v", s, len(got), utf8.ValidString(got))
		}
		if len(s) <= ledger.MaxServiceReleaseReason && utf8.ValidString(s) && got != s {
			t.Errorf("a short reason changed: %q → %q", s, got)
		}
	}
}
