// Package jobclient is the consumer's side of a job: it turns a spec into a
// submission (module and inputs encrypted under a fresh job key and
// uploaded to the blob gateway), grants the job key to the providers the
// ledger assigns, follows the job, and fetches and decrypts its outputs and
// logs. Job keys are kept under the home so that any later command can
// grant them.
package jobclient

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"filippo.io/age"

	"github.com/gpunet/gpunet/internal/blob"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/clock"
	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/seal"
)

// Client acts for one consumer key.
type Client struct {
	Chain *chainclient.Client
	Blobs *blob.Client
	Key   *keys.Key
	// Dir keeps the job keys: Dir/<id>.key.
	Dir string
	// Clock is what the follow loops wait on between polls (tests
	// advance a fake); nil is the real clock.
	Clock clock.Clock
}

// New returns a client talking to the node at chain (blobs go through the
// same node's gateway, and follow chain to another node when chain has
// several and moves on), keeping job keys under home/jobs/<chain id>.
func New(chain *chainclient.Client, key *keys.Key, home, chainID string) *Client {
	blobs := blob.NewClient(chain.Base())
	blobs.HTTPClient = &http.Client{Transport: chain.Transport()}
	if key != nil {
		blobs.Signer = key // uploads are charged to the consumer's account
	}
	return &Client{Chain: chain, Blobs: blobs, Key: key, Dir: filepath.Join(home, "jobs", chainID)}
}

// LedgerSpec is the on-chain part of s, with module the blob holding the
// (encrypted) module: jobspec.Spec.LedgerSpec.
func LedgerSpec(s *jobspec.Spec, module string) ledger.JobSpec { return s.LedgerSpec(module) }

// Prepare encrypts and uploads a spec's module and inputs under a new job
// key and returns the submission and the key.
func (c *Client) Prepare(ctx context.Context, s *jobspec.Spec) (*ledger.MsgSubmitJob, *age.X25519Identity, error) {
	key, err := seal.NewJobKey()
	if err != nil {
		return nil, nil, err
	}
	module := ""
	if path, ok := s.LocalModule(); ok {
		h, err := c.uploadSealed(ctx, key.Recipient(), func(w io.Writer) error {
			f, err := os.Open(path)
			if err != nil {
				return fmt.Errorf("module: %w", err)
			}
			defer f.Close()
			_, err = io.Copy(w, f)
			return err
		})
		if err != nil {
			return nil, nil, fmt.Errorf("upload module %s: %w", path, err)
		}
		module = h.String()
	} else if s.Executor == "wasm" {
		// A module already in the gateway: it must be sealed to this job's
		// key, so only a local module can be used with a fresh key.
		return nil, nil, errors.New("module: give a local .wasm file; a blob reference cannot be re-sealed to a new job key")
	}
	program := ""
	if path, ok := s.Compare.LocalProgram(); ok {
		// The judge travels like the module: sealed to the job key, which
		// every replica that judges holds.
		h, err := c.uploadSealed(ctx, key.Recipient(), func(w io.Writer) error {
			f, err := os.Open(path)
			if err != nil {
				return fmt.Errorf("compare.program: %w", err)
			}
			defer f.Close()
			_, err = io.Copy(w, f)
			return err
		})
		if err != nil {
			return nil, nil, fmt.Errorf("upload compare.program %s: %w", path, err)
		}
		program = h.String()
	} else if s.Compare != nil && s.Compare.Program != "" {
		return nil, nil, errors.New("compare.program: give a local .wasm file; a blob reference cannot be re-sealed to a new job key")
	}
	// The key's hash lets a committed replica hand the key to an audit
	// replica checkably when this client is not online to grant it.
	kc := ledger.JobKeyCommitment([]byte(key.String()))
	msg := &ledger.MsgSubmitJob{Spec: LedgerSpec(s, module), ConsumerKey: c.Key.Recipient(), KeyCommitment: &kc}
	if program != "" {
		msg.Spec.Compare.Program = program
	}
	// Where the module and inputs were put, so that a provider talking to
	// another node gets them through its own node's gateway. A node that
	// does not say (an older gpunet) leaves it empty.
	if at, err := c.Blobs.NodeAPIURL(ctx); err == nil {
		msg.DataAt = at
	}
	if len(msg.Spec.Inputs) > 0 {
		files := map[string]string{}
		for i, in := range s.Inputs {
			if jobspec.IsURL(in.From) {
				continue // the provider fetches it (spec.URLInputs)
			}
			if jobspec.IsBlobRef(in.From) {
				// Like the module, a gateway blob cannot be re-sealed to
				// this job's key.
				return nil, nil, fmt.Errorf("inputs[%d].from %s: give a local file or directory; blob references are not supported yet", i, in.From)
			}
			files[in.Path] = in.From
		}
		h, err := c.uploadSealed(ctx, key.Recipient(), func(w io.Writer) error { return seal.PackFiles(w, files) })
		if err != nil {
			return nil, nil, fmt.Errorf("upload inputs: %w", err)
		}
		msg.InputBlob = h.String()
	}
	return msg, key, nil
}

func (c *Client) uploadSealed(ctx context.Context, to age.Recipient, produce func(io.Writer) error) (blob.Hash, error) {
	pr, pw := io.Pipe()
	go func() {
		enc, err := seal.Encrypt(pw, to)
		if err == nil {
			err = produce(enc)
			if cerr := enc.Close(); err == nil {
				err = cerr
			}
		}
		pw.CloseWithError(err)
	}()
	h, _, err := c.Blobs.Put(ctx, pr)
	pr.CloseWithError(err)
	return h, err
}

// Submit prepares and submits s and returns the new job's id.
func (c *Client) Submit(ctx context.Context, s *jobspec.Spec) (uint64, error) {
	msg, key, err := c.Prepare(ctx, s)
	if err != nil {
		return 0, err
	}
	res, err := c.Chain.SendMsg(ctx, c.Key, 0, msg)
	if err != nil {
		return 0, err
	}
	for _, e := range res.Events {
		if e.Type != "job_submitted" {
			continue
		}
		for _, a := range e.Attrs {
			if a.Key == "job" {
				id, err := strconv.ParseUint(a.Value, 10, 64)
				if err != nil {
					return 0, fmt.Errorf("job id %q in the tx result: %w", a.Value, err)
				}
				return id, c.saveKey(id, key)
			}
		}
	}
	return 0, fmt.Errorf("tx %s has no job_submitted event", res.Hash)
}

func (c *Client) keyPath(id uint64) string { return filepath.Join(c.Dir, fmt.Sprintf("%d.key", id)) }

func (c *Client) saveKey(id uint64, k *age.X25519Identity) error {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(c.keyPath(id), []byte(k.String()+"\n"), 0o600)
}

func (c *Client) loadKey(id uint64) (*age.X25519Identity, error) {
	b, err := os.ReadFile(c.keyPath(id))
	if err != nil {
		return nil, fmt.Errorf("job %d's key is not in %s (was it submitted from another home?): %w", id, c.Dir, err)
	}
	return age.ParseX25519Identity(strings.TrimSpace(string(b)))
}

// ForgetKey removes the job key of a job that has ended: no provider
// needs it any more (outputs and logs are sealed to the owner's own key),
// and a key left on disk would open the job's inputs to whoever reads the
// home later. It is a no-op for a job still running or not the client's.
func (c *Client) ForgetKey(j *ledger.Job) error {
	if !j.Done() || j.Owner != c.Key.Address {
		return nil
	}
	if err := os.Remove(c.keyPath(j.ID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// result picks the result whose outputs a finished job delivers: the
// verdict's majority.
func result(j *ledger.Job) (*ledger.JobResult, error) {
	if r := j.DeliveredResult(); r != nil {
		return r, nil
	}
	return nil, fmt.Errorf("job %d is %s and has no result (%s)", j.ID, j.State, j.Reason)
}

// FetchOutputs downloads, decrypts and unpacks a job's outputs into dir.
// Only the job's owner can: another key gets a *NotOwnerError.
func (c *Client) FetchOutputs(ctx context.Context, j *ledger.Job, dir string) error {
	if err := c.CheckOwner(j); err != nil {
		return err
	}
	r, err := result(j)
	if err != nil {
		return err
	}
	if j.Spec.Gang() {
		err = c.fetchGangOutputs(ctx, j, dir)
	} else {
		err = c.fetch(ctx, j.ID, r.OutputBlob, func(plain io.Reader) error {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			return seal.UnpackDir(plain, dir, seal.Limits{})
		})
	}
	if err == nil {
		// The node may now let the outputs go after a short grace
		// instead of its whole retention; failing to say so costs only
		// its disk.
		c.Blobs.MarkFetched(ctx, j.ID)
	}
	return err
}

// GangRankDir is the directory, under a gang's outputs, of the member of
// rank r's outputs.
func GangRankDir(r uint64) string { return fmt.Sprintf("rank-%d", r) }

// gangResults are a finished gang's members' results in rank order: at
// verification full, of the replica gang whose rank 0 was delivered (the
// other gangs' members have the same ranks).
func gangResults(j *ledger.Job) ([]*ledger.Assignment, error) {
	gang := uint64(0)
	if j.Delivered != nil {
		for _, a := range j.Assignments {
			if a.Provider == *j.Delivered {
				gang = a.Gang
			}
		}
	}
	var out []*ledger.Assignment
	for i := range j.Assignments {
		if a := &j.Assignments[i]; a.Result != nil && a.Gang == gang {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(x, y *ledger.Assignment) int { return cmp.Compare(x.Rank, y.Rank) })
	if len(out) == 0 {
		return nil, fmt.Errorf("job %d is %s and no member has a result (%s)", j.ID, j.State, j.Reason)
	}
	return out, nil
}

// fetchGangOutputs unpacks each member's outputs under dir/rank-N.
func (c *Client) fetchGangOutputs(ctx context.Context, j *ledger.Job, dir string) error {
	members, err := gangResults(j)
	if err != nil {
		return err
	}
	for _, a := range members {
		sub := filepath.Join(dir, GangRankDir(a.Rank))
		err := c.fetch(ctx, j.ID, a.Result.OutputBlob, func(plain io.Reader) error {
			if err := os.MkdirAll(sub, 0o755); err != nil {
				return err
			}
			return seal.UnpackDir(plain, sub, seal.Limits{})
		})
		if err != nil {
			return fmt.Errorf("rank %d's outputs: %w", a.Rank, err)
		}
	}
	return nil
}

// FetchLogs writes a finished job's log to w (the log blob of its
// delivered result). Only the job's owner can: another key gets a
// *NotOwnerError.
func (c *Client) FetchLogs(ctx context.Context, j *ledger.Job, w io.Writer) error {
	if err := c.CheckOwner(j); err != nil {
		return err
	}
	r, err := result(j)
	if err != nil {
		return err
	}
	if j.Spec.Gang() {
		return c.FetchGangLogs(ctx, j, -1, w)
	}
	if r.LogBlob == "" {
		return nil
	}
	return c.fetch(ctx, j.ID, r.LogBlob, func(plain io.Reader) error {
		_, err := io.Copy(w, plain)
		return err
	})
}

// fetch downloads blob ref of job id (the gateway fetches it from the node
// that holds it if it lacks it), decrypts it and hands the plaintext to
// use.
func (c *Client) fetch(ctx context.Context, id uint64, ref string, use func(io.Reader) error) error {
	h, err := blob.ParseHash(ref)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp("", "gpunet-blob-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if _, err := c.Blobs.GetForJob(ctx, h, id, tmp); err != nil {
		return fmt.Errorf("download %s: %w", ref, err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	plain, err := seal.Decrypt(tmp, c.Key.Identity())
	if err != nil {
		return fmt.Errorf("decrypt %s: %w", ref, err)
	}
	return use(plain)
}

// FetchGangLogs writes a finished gang's logs to w: the member of rank
// rank's as it is, or with rank < 0 every member's, each line prefixed
// with "[rank N] ". Only the job's owner can.
func (c *Client) FetchGangLogs(ctx context.Context, j *ledger.Job, rank int, w io.Writer) error {
	if err := c.CheckOwner(j); err != nil {
		return err
	}
	members, err := gangResults(j)
	if err != nil {
		return err
	}
	found := false
	for _, a := range members {
		if rank >= 0 && a.Rank != uint64(rank) {
			continue
		}
		found = true
		if a.Result.LogBlob == "" {
			continue
		}
		out := w
		var pw *prefixWriter
		if rank < 0 {
			pw = &prefixWriter{w: w, prefix: []byte(fmt.Sprintf("[rank %d] ", a.Rank)), bol: true}
			out = pw
		}
		if err := c.fetch(ctx, j.ID, a.Result.LogBlob, func(plain io.Reader) error {
			_, err := io.Copy(out, plain)
			return err
		}); err != nil {
			return fmt.Errorf("rank %d's log: %w", a.Rank, err)
		}
		if pw != nil && !pw.bol {
			if _, err := w.Write([]byte("\n")); err != nil {
				return err
			}
		}
	}
	if !found {
		return fmt.Errorf("job %d has no member of rank %d with a result", j.ID, rank)
	}
	return nil
}

// prefixWriter writes prefix at the beginning of every line.
type prefixWriter struct {
	w      io.Writer
	prefix []byte
	bol    bool // at the beginning of a line
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		if p.bol {
			if _, err := p.w.Write(p.prefix); err != nil {
				return n, err
			}
			p.bol = false
		}
		i := bytes.IndexByte(b, '\n')
		line := b
		if i >= 0 {
			line = b[:i+1]
			p.bol = true
		}
		m, err := p.w.Write(line)
		n += m
		if err != nil {
			return n, err
		}
		b = b[len(line):]
	}
	return n, nil
}
