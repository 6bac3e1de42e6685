package ledger

import (
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/gpunet/gpunet/internal/address"
)

// Where a job's data is. Blobs live in the gateways of the nodes they were
// uploaded to, so a job records the API URL of the node that holds its
// module and inputs (Job.DataAt) and each result the node that holds its
// outputs and log (JobResult.DataAt); another node's gateway fetches them
// from there (docs/blobs.md). A job may also name public inputs by URL,
// pinned by their hash (URLInput). A provider that cannot get a job's data
// hands it back (MsgReleaseJob).

// Bounds of where data is.
const (
	MaxDataAtLen   = 256  // bytes of a data_at URL
	MaxURLInputs   = 32   // URL-pinned inputs per job
	MaxInputURLLen = 2048 // bytes of an input's URL
	MaxReleaseLen  = 512  // bytes of a release's reason
)

// checkDataAt checks a data_at URL: empty (an older client), or an http or
// https URL with a host, no user, query or fragment, at most MaxDataAtLen
// bytes.
func checkDataAt(field, s string) error {
	if s == "" {
		return nil
	}
	if len(s) > MaxDataAtLen {
		return invalid("%s: %d bytes, at most %d", field, len(s), MaxDataAtLen)
	}
	if err := checkHTTPURL(s, false); err != nil {
		return invalid("%s %q: %v (want the API URL of a node, like http://203.0.113.7:8080)", field, s, err)
	}
	return nil
}

// ValidDataAt reports whether s may be a data_at: a node's API URL, or
// empty.
func ValidDataAt(s string) bool { return checkDataAt("data_at", s) == nil }

// checkHTTPURL checks that s is an absolute http or https URL with a host
// and no user information or fragment; query is whether it may have a
// query.
func checkHTTPURL(s string, query bool) error {
	if !utf8.ValidString(s) || strings.ContainsAny(s, " \t\r\n\x00") {
		return fmt.Errorf("not a URL")
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("scheme %q: want http or https", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("no host")
	case u.User != nil:
		return fmt.Errorf("user information is not allowed")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return fmt.Errorf("a fragment is not allowed")
	case !query && (u.RawQuery != "" || strings.Contains(s, "?")):
		return fmt.Errorf("a query is not allowed")
	}
	return nil
}

// URLInput is a public input the provider fetches itself from URL and
// places at Path in the job's input directory, after checking that it
// hashes to SHA256. It is neither encrypted nor private: anyone who reads
// the ledger can fetch it too.
type URLInput struct {
	Path   string `json:"path"`   // guest path
	URL    string `json:"url"`    // http or https
	SHA256 string `json:"sha256"` // sha256:<64 hex> of the content
	// Size is the content's length in bytes when the owner declared it
	// (the provider then reads no more); 0 is undeclared, and the job's
	// disk bounds it.
	Size uint64 `json:"size,omitempty"`
}

// validateURLInputs checks s.URLInputs: at most MaxURLInputs, each an
// http(s) URL pinned by its hash at a guest path no other input uses, and
// their declared sizes within the job's disk.
func (s *JobSpec) validateURLInputs() error {
	if len(s.URLInputs) > MaxURLInputs {
		return invalid("url inputs: %d, at most %d", len(s.URLInputs), MaxURLInputs)
	}
	seen := make(map[string]bool, len(s.Inputs)+len(s.URLInputs))
	for _, p := range s.Inputs {
		seen[p] = true
	}
	var total uint64
	for i, in := range s.URLInputs {
		field := fmt.Sprintf("inputs (from a URL)[%d]", i)
		if err := checkGuestPath(field+".path", in.Path); err != nil {
			return err
		}
		if in.Path == "/" || strings.HasSuffix(in.Path, "/") {
			return invalid("%s.path %q: want a file's path", field, in.Path)
		}
		if seen[in.Path] {
			return invalid("%s.path %q: another input has that path", field, in.Path)
		}
		seen[in.Path] = true
		if len(in.URL) > MaxInputURLLen {
			return invalid("%s.from: %d bytes, at most %d", field, len(in.URL), MaxInputURLLen)
		}
		if err := checkHTTPURL(in.URL, true); err != nil {
			return invalid("%s.from %q: %v", field, in.URL, err)
		}
		if !ValidBlobRef(in.SHA256) {
			return invalid("%s.sha256 %q: want sha256:<64 lower-case hex> of the content", field, in.SHA256)
		}
		if in.Size > s.Disk || total+in.Size > s.Disk {
			return invalid("%s.size: the URL inputs declare more than the job's disk (%d bytes)", field, s.Disk)
		}
		total += in.Size
	}
	return nil
}

// MsgReleaseJob is an assigned provider handing a job back before it
// committed a result, because it cannot run it: its data is missing
// everywhere, a URL input is down or does not match its hash. The job goes
// back to the scheduler as after a missed start, and Job.Released records
// who and why.
//
// Releasing costs the provider what a missed start costs: nothing is paid
// for the slot it held and the placement counts against the job's
// attempts, but no stake is slashed, since data another party failed to
// provide is not the provider's fault. It cannot be used to cherry-pick:
// the scheduler, not the provider, picks what it gets next, and a provider
// that wants fewer jobs can lower its max_jobs for the same effect.
type MsgReleaseJob struct {
	JobID  uint64 `json:"job_id"`
	Reason string `json:"reason"`
}

// Type implements Msg.
func (*MsgReleaseJob) Type() MsgType { return MsgTypeReleaseJob }

// ValidateBasic implements Msg.
func (m *MsgReleaseJob) ValidateBasic() error {
	if m.Reason == "" || len(m.Reason) > MaxReleaseLen || !utf8.ValidString(m.Reason) {
		return invalid("reason: want 1 to %d bytes of text saying why the job is handed back", MaxReleaseLen)
	}
	return nil
}

func execReleaseJob(o *Overlay, from address.Address, m *MsgReleaseJob, p Params, info BlockInfo) ([]Event, error) {
	j, a, err := jobParty(o, m.JobID, from)
	if err != nil {
		return nil, err
	}
	if a.Commitment != nil || a.Result != nil {
		return nil, fmt.Errorf("%s already committed a result for job %d; it cannot hand it back: %w", from, j.ID, ErrJobState)
	}
	by := from
	j.Released, j.ReleasedBy = m.Reason, &by
	events := []Event{jobEvent("job_released", j, Attr{"provider", from.String()}, Attr{"reason", m.Reason})}
	evs, err := reassign(o, j, []address.Address{from}, Wait{Cause: CauseReleased, Text: m.Reason}, p, info)
	return append(events, evs...), err
}

// URLInputsValid checks s.URLInputs alone, with the rules Validate applies
// (for the job spec's own checks).
func (s *JobSpec) URLInputsValid() error { return s.validateURLInputs() }
