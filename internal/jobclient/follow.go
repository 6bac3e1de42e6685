package jobclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"filippo.io/age"

	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/clock"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/seal"
)

// Following a job: granting its key to the providers the ledger assigns,
// watching its state to the end, and relaying its live log.

// GrantIfNeeded grants the job key to assigned providers that lack it. It
// reports whether it sent a grant. On a job that has ended it removes the
// key instead (ForgetKey).
func (c *Client) GrantIfNeeded(ctx context.Context, j *ledger.Job) (bool, error) {
	if j.Done() {
		return false, c.ForgetKey(j)
	}
	// Assigned jobs, and verifying ones that got an audit or escalation
	// replica, wait for the key.
	if j.Owner != c.Key.Address {
		return false, nil
	}
	var grants []ledger.Grant
	key := (*age.X25519Identity)(nil)
	for _, a := range j.Assignments {
		if a.KeyGrant != nil {
			continue
		}
		if key == nil {
			var err error
			if key, err = c.loadKey(j.ID); err != nil {
				return false, err
			}
		}
		p, err := c.Chain.Provider(ctx, a.Provider)
		if err != nil {
			return false, fmt.Errorf("provider %s: %w", a.Provider, err)
		}
		recipient := p.Record.EncryptionKey
		if j.Spec.Trust == ledger.TrustTEE {
			// Keys only to attested code: a provider whose attestation
			// is missing, expired, over another key than the one it
			// declares or of a measurement the job does not pin gets no
			// grant (the ledger refuses one too); the job's grant
			// timeout moves it.
			if !attestedFor(p.Record, &j.Spec, clock.Or(c.Clock).Now()) {
				continue
			}
			recipient = p.Record.TEE.Key
		}
		wrapped, err := seal.WrapKey(key, recipient)
		if err != nil {
			return false, fmt.Errorf("wrap the job key to %s: %w", a.Provider, err)
		}
		grants = append(grants, ledger.Grant{Provider: a.Provider, WrappedKey: wrapped})
	}
	if len(grants) == 0 {
		return false, nil
	}
	// A grant_key carries at most maxGrantsPerMsg grants: a gang of more
	// members is granted in several, until one fails.
	var err error
	for len(grants) > 0 && err == nil {
		n := min(len(grants), maxGrantsPerMsg)
		_, err = c.Chain.SendMsg(ctx, c.Key, 0, &ledger.MsgGrantKey{JobID: j.ID, Grants: grants[:n]})
		grants = grants[n:]
	}
	var txErr *chainclient.TxError
	switch {
	case errors.As(err, &txErr) && (txErr.Result.Code == ledger.ErrJobState.Code || txErr.Result.Code == ledger.ErrNotJobParty.Code):
		return false, nil // it moved on meanwhile (reassigned, a replica dropped, cancelled)
	case errors.Is(err, chainclient.ErrNotInBlockYet):
		return true, nil // in the mempool: the next poll sees it
	}
	return err == nil, err
}

// attestedFor reports whether p may receive the key of the trust: tee job
// of spec at now: attested, unexpired, over the key it declares, of one of
// the measurements spec pins if it pins any.
func attestedFor(p *ledger.Provider, spec *ledger.JobSpec, now time.Time) bool {
	if !p.AttestedAt(now.Unix()) {
		return false
	}
	return len(spec.TEEMeasurements) == 0 || slices.Contains(spec.TEEMeasurements, p.TEE.Measurement)
}

// maxGrantsPerMsg is the most grants the ledger takes in one grant_key.
const maxGrantsPerMsg = 8

// Follow watches job id until it ends or ctx does, granting the job key
// whenever it is assigned. onChange sees each new state or reason.
func (c *Client) Follow(ctx context.Context, id uint64, poll time.Duration, onChange func(*ledger.Job)) (*ledger.Job, error) {
	var last string
	for {
		j, err := c.Chain.Job(ctx, id)
		if err != nil {
			return nil, err
		}
		if sig := j.State + "\x00" + j.Reason; sig != last {
			last = sig
			if onChange != nil {
				onChange(j)
			}
		}
		if j.Done() {
			return j, c.ForgetKey(j)
		}
		if _, err := c.GrantIfNeeded(ctx, j); err != nil {
			return j, err
		}
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-clock.Or(c.Clock).After(poll):
		}
	}
}

// WatchOptions tune Watch.
type WatchOptions struct {
	// Poll is how often the job and its log are read.
	Poll time.Duration
	// OnChange, when set, sees each new state or reason.
	OnChange func(*ledger.Job)
	// Logs, when set, receives the job's live log, decrypted, as its
	// provider relays it. It is written from another goroutine than
	// OnChange's, and no more once Watch has returned.
	Logs io.Writer
}

// Watch is Follow (the job's state to its end, its key granted whenever
// it is assigned) that also relays the job's live log to o.Logs while it
// runs, reading what came last once the job has ended or ctx has.
func (c *Client) Watch(ctx context.Context, id uint64, o WatchOptions) (*ledger.Job, error) {
	if o.Logs == nil {
		return c.Follow(ctx, id, o.Poll, o.OnChange)
	}
	lctx, stopLogs := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var next uint64
		for {
			c.StreamLogs(lctx, id, &next, o.Logs)
			select {
			case <-lctx.Done():
				c.StreamLogs(context.Background(), id, &next, o.Logs) // what came last
				return
			case <-clock.Or(c.Clock).After(o.Poll):
			}
		}
	}()
	j, err := c.Follow(ctx, id, o.Poll, o.OnChange)
	stopLogs()
	<-done
	return j, err
}

// FollowLogs writes job id's log to w: while the job runs, its live log
// as the provider relays it, until the job ends (granting the job key
// when it is due) or ctx does, which is not an error; once it is verifying
// or done, the log so far (Log). A client whose key does not own the job
// gets a *NotOwnerError, before anything is read.
func (c *Client) FollowLogs(ctx context.Context, id uint64, poll time.Duration, w io.Writer) error {
	j, err := c.Chain.Job(ctx, id)
	if err != nil {
		return err
	}
	if err := c.CheckOwner(j); err != nil {
		return err
	}
	if j.Done() || j.State == ledger.JobVerifying {
		return c.log(ctx, j, w)
	}
	var next uint64
	for !j.Done() {
		if err := c.StreamLogs(ctx, id, &next, w); err != nil {
			return err
		}
		c.GrantIfNeeded(ctx, j)
		select {
		case <-ctx.Done():
			return nil
		case <-clock.Or(c.Clock).After(poll):
		}
		if j, err = c.Chain.Job(ctx, id); err != nil {
			return err
		}
	}
	_, err = c.readRelay(ctx, id, &next, w)
	return err
}

// Log writes job id's log so far to w, without waiting for more: the full
// log its delivered result holds, once it has one; before that (queued,
// running, verifying) what the node relays of its live log; for a job that
// ended without a result (cancelled, or failed before any replica
// reported), what the node still relays, else what Cancel kept here, else
// an error wrapping ErrNoLog. Like FollowLogs, only for the job's owner.
func (c *Client) Log(ctx context.Context, id uint64, w io.Writer) error {
	j, err := c.Chain.Job(ctx, id)
	if err != nil {
		return err
	}
	if err := c.CheckOwner(j); err != nil {
		return err
	}
	return c.log(ctx, j, w)
}

func (c *Client) log(ctx context.Context, j *ledger.Job, w io.Writer) error {
	switch {
	case j.DeliveredResult() != nil:
		return c.FetchLogs(ctx, j, w)
	case j.Done():
		return c.endedLog(ctx, j, w)
	}
	var next uint64
	_, err := c.readRelay(ctx, j.ID, &next, w)
	return err
}

// StreamLogs writes job id's live log to w as the provider relays it, from
// chunk *next on (updating it): one page of what the node holds. Chunks
// that fail to decrypt are reported in the stream, not fatal.
func (c *Client) StreamLogs(ctx context.Context, id uint64, next *uint64, w io.Writer) error {
	_, err := c.streamPage(ctx, id, next, w)
	return err
}

// streamPage is StreamLogs, reporting how many chunks it read.
func (c *Client) streamPage(ctx context.Context, id uint64, next *uint64, w io.Writer) (int, error) {
	page, err := c.Chain.Logs(ctx, id, *next)
	if err != nil {
		return 0, err
	}
	if page.Dropped > 0 {
		fmt.Fprintf(w, "[gpunet: %d earlier log chunks are no longer held by the node]\n", page.Dropped)
	}
	for _, ch := range page.Chunks {
		plain, err := seal.Decrypt(bytes.NewReader(ch.Data), c.Key.Identity())
		if err == nil {
			_, err = io.Copy(w, plain)
		}
		if err != nil {
			fmt.Fprintf(w, "[gpunet: log chunk %d from %s unreadable: %v]\n", ch.Seq, ch.Provider, err)
		}
	}
	*next = page.Next
	return len(page.Chunks), nil
}
