package ledger

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds and patterns shared by provider declarations (msg_provider.go) and
// job specs (spec.go).

// Executors the ledger knows.
var knownExecutors = []string{ExecutorOCI, ExecutorWASM}

var (
	classRE      = regexp.MustCompile(`^[A-Z0-9][A-Z0-9_]{0,31}$`)
	regionRE     = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
	computeCapRE = regexp.MustCompile(`^[0-9]{1,2}\.[0-9]{1,2}$`)
)

// ValidHardwareClass reports whether class is written as a hardware class
// (a GPU's, as in a declaration's gpus[].class or a job's models): 1 to 32
// of A-Z 0-9 _, starting with a letter or digit, e.g. RTX_4090.
func ValidHardwareClass(class string) bool { return classRE.MatchString(class) }

// ValidRegion reports whether region is written as a region: 1 to 32
// lower-case letters, digits and -, starting with a letter or digit.
func ValidRegion(region string) bool { return regionRE.MatchString(region) }

// ValidComputeCap reports whether cc is a CUDA compute capability written
// MAJOR.MINOR, e.g. 8.6.
func ValidComputeCap(cc string) bool { return computeCapRE.MatchString(cc) }

const (
	maxGPUs       = 64
	maxCPUCores   = uint64(4096)
	maxRAM        = uint64(64) << 40 // 64 TiB
	maxDisk       = uint64(1) << 50  // 1 PiB
	maxVRAM       = uint64(1) << 40  // 1 TiB per GPU
	maxMaxJobs    = uint64(1024)
	maxPriceHour  = uint64(1_000_000_000_000) // 1M SYNC per unit-hour
	maxTextLength = 128
)

// MaxLabelLen is the most bytes a provider's label (ProviderInfo.Label)
// may hold.
const MaxLabelLen = 40

// labelPunct is the punctuation a label may hold besides letters, digits
// and spaces.
const labelPunct = "-_.,'()&/#+"

// CheckLabel checks a provider's label: empty (none), or at most
// MaxLabelLen bytes of valid UTF-8 made of letters (unicode.IsLetter),
// digits (unicode.IsDigit), single spaces between words and the
// punctuation -_.,'()&/#+. Control and format characters (bidi
// overrides, zero-width spaces, unicode.Cf), combining marks and the
// Hangul fillers (letters that draw nothing) are refused, so that what a
// label says is what is drawn. Which code points are letters and digits
// is Go's unicode tables (unicode.Version, 15.0.0): a toolchain that
// updates them changes which labels are valid, which is a consensus
// change (TestLabelUnicodeVersion). The error names the field, e.g.
// `label "a\u202eb": U+202E is not allowed; ...`.
func CheckLabel(label string) error {
	if why := LabelProblem(label); why != "" {
		return invalid("label %q: %s", label, why)
	}
	return nil
}

// LabelProblem says what is wrong with label, "" when nothing is
// (CheckLabel without the error: the CLI checks --label with it).
func LabelProblem(label string) string {
	switch {
	case label == "":
		return ""
	case len(label) > MaxLabelLen:
		return fmt.Sprintf("%d bytes, at most %d", len(label), MaxLabelLen)
	case !utf8.ValidString(label):
		return "not valid UTF-8"
	case label[0] == ' ' || label[len(label)-1] == ' ':
		return "starts or ends with a space"
	case strings.Contains(label, "  "):
		return "two spaces in a row"
	}
	for _, r := range label {
		if !labelRune(r) {
			return fmt.Sprintf("%U is not allowed; want letters, digits, single spaces and %s", r, labelPunct)
		}
	}
	return ""
}

// labelRune reports whether a label may hold r.
func labelRune(r rune) bool {
	switch {
	case r == ' ' || strings.ContainsRune(labelPunct, r):
		return true
	case r == '\u115f' || r == '\u1160' || r == '\u3164' || r == '\uffa0':
		// Hangul fillers: letters (Lo) that draw nothing.
		return false
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}
