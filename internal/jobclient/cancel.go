package jobclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
)

// NotOwnerError is a client asked for what only a job's owner may have
// (its logs and outputs are sealed to the owner's key, and only the owner
// may cancel it) with another key.
type NotOwnerError struct {
	Job   uint64
	Owner address.Address // the job's owner
	Key   address.Address // the client's key
}

func (e *NotOwnerError) Error() string {
	return fmt.Sprintf("job %d belongs to %s, not to %s", e.Job, e.Owner, e.Key)
}

// CheckOwner returns a *NotOwnerError unless the client's key owns j.
func (c *Client) CheckOwner(j *ledger.Job) error {
	if j.Owner != c.Key.Address {
		return &NotOwnerError{Job: j.ID, Owner: j.Owner, Key: c.Key.Address}
	}
	return nil
}

// ErrAlreadyDone is Cancel asked to cancel a job that has ended.
var ErrAlreadyDone = errors.New("the job has ended; there is nothing to cancel")

// Cancel cancels job id as its owner and returns the job as the ledger
// settled it: Cost and Fee what the providers and the treasury were paid
// for the time the job held or ran, Refund the rest of the escrow. A job
// cancelled has no result, so no log blob: Cancel keeps what the node
// relayed of its live log, before and just after the cancel, in the
// client's directory (SavedLog), where FollowLogs finds it after the node
// has forgotten it.
func (c *Client) Cancel(ctx context.Context, id uint64) (*ledger.Job, error) {
	j, err := c.Chain.Job(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := c.CheckOwner(j); err != nil {
		return j, err
	}
	if j.Done() {
		return j, fmt.Errorf("job %d %s: %w", id, j.State, ErrAlreadyDone)
	}
	var log bytes.Buffer
	var next uint64
	c.readRelay(ctx, id, &next, &log) // best effort: the relay is a convenience
	if _, err := c.Chain.SendMsg(ctx, c.Key, 0, &ledger.MsgCancelJob{JobID: id}); err != nil {
		return j, err
	}
	c.readRelay(ctx, id, &next, &log)
	if log.Len() > 0 {
		if err := c.saveLog(id, log.Bytes()); err != nil {
			return j, err
		}
	}
	if j, err = c.Chain.Job(ctx, id); err != nil {
		return nil, err
	}
	return j, c.ForgetKey(j)
}

func (c *Client) logPath(id uint64) string { return filepath.Join(c.Dir, fmt.Sprintf("%d.log", id)) }

// SavedLog returns the live log Cancel kept of job id, or nil.
func (c *Client) SavedLog(id uint64) []byte {
	b, _ := os.ReadFile(c.logPath(id))
	return b
}

func (c *Client) saveLog(id uint64, b []byte) error {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(c.logPath(id), b, 0o600)
}

// readRelay writes every chunk of job id's live log the node holds from
// *next on to w, page after page, and reports whether there was any.
func (c *Client) readRelay(ctx context.Context, id uint64, next *uint64, w io.Writer) (bool, error) {
	got := false
	for {
		before := *next
		n, err := c.streamPage(ctx, id, next, w)
		if err != nil {
			return got, err
		}
		got = got || n > 0
		if n == 0 || *next == before {
			return got, nil
		}
	}
}

// ErrNoLog is FollowLogs on a job that ended without a result (no log
// blob) when neither the node nor this client kept its live log.
var ErrNoLog = errors.New("the job ended without a result, and its live log is no longer held by the node nor kept here")

// endedLog writes the log of a job that ended without a result (cancelled,
// or failed before any replica reported): what the node's relay still
// holds, kept here for later, else what Cancel kept.
func (c *Client) endedLog(ctx context.Context, j *ledger.Job, w io.Writer) error {
	var relayed bytes.Buffer
	var next uint64
	if ok, err := c.readRelay(ctx, j.ID, &next, &relayed); err == nil && ok {
		if _, err := w.Write(relayed.Bytes()); err != nil {
			return err
		}
		return c.saveLog(j.ID, relayed.Bytes())
	}
	if b := c.SavedLog(j.ID); b != nil {
		_, err := w.Write(b)
		return err
	}
	return fmt.Errorf("job %d %s: %w", j.ID, j.State, ErrNoLog)
}
