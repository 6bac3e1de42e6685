// Package chainclient talks to a node's HTTP API: status, accounts, and
// building, signing and submitting txs. Every call takes a context first.
package chainclient

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/clock"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/offers"
)

// Client is a client of a node's API, or of several nodes' of one network
// (see New and Failover). Its methods may be called from several
// goroutines at once.
type Client struct {
	// Clock, when set before the first call, is what the min_fee cache
	// and SendMsg's waits between attempts go by (tests advance a fake);
	// nil is the real clock.
	Clock clock.Clock

	nodes *Failover
	http  *http.Client

	// The chain's params.min_fee, as last read, and when (see minFee).
	feeMu  sync.Mutex
	fee    uint64
	feeAt  time.Time
	feeSet bool
}

// MinFeeTTL is how long a Client trusts the params.min_fee it last read
// before reading it again. The parameter changes rarely (only with a new
// genesis today); a tx that still pays too little after a change is
// refused with code 10 and SendMsg reads the parameter again at once.
const MinFeeTTL = time.Minute

// New returns a client for the API at base ("http://127.0.0.1:26680" or
// "127.0.0.1:26680"), or, given a comma-separated list of them, for the
// APIs of several nodes of one network: each request goes to the node that
// answered last and moves on to the next when that one cannot be reached
// (see Failover).
func New(base string) *Client {
	var bases []string
	for _, b := range strings.Split(base, ",") {
		if b = strings.TrimSpace(b); b == "" && strings.Contains(base, ",") {
			continue
		}
		if !strings.Contains(b, "://") {
			b = "http://" + b
		}
		if b = strings.TrimRight(b, "/"); !slices.Contains(bases, b) {
			bases = append(bases, b)
		}
	}
	if len(bases) == 0 {
		bases = []string{"http://"}
	}
	nodes := NewFailover(bases, nil)
	return &Client{nodes: nodes, http: &http.Client{Timeout: 2 * time.Minute, Transport: nodes}}
}

// Base returns the base URL of the node requests go to now.
func (c *Client) Base() string { return c.nodes.Current() }

// Bases returns the base URLs of every node the client may use, in order.
func (c *Client) Bases() []string { return c.nodes.Bases() }

// Transport is the client's failover transport, for other clients of the
// same nodes (blob.Client.HTTPClient) to follow the node it uses: a request
// to any of Bases goes to the current node. It sets no timeout.
func (c *Client) Transport() http.RoundTripper { return c.nodes }

// where names the node, or the nodes, in an error.
func (c *Client) where() string {
	if b := c.nodes.Bases(); len(b) > 1 {
		return strings.Join(b, ", ")
	}
	return c.Base()
}

// ErrUnreachable wraps failures to reach the node at all.
var ErrUnreachable = errors.New("node unreachable")

// APIError is an error response from the node.
type APIError struct {
	Status int
	// Code is the API's stable error code (apiwire.CodeNotFound, …).
	Code string
	// LedgerCode is the ledger's error code behind it, if any.
	LedgerCode uint32
	Msg        string
}

func (e *APIError) Error() string { return e.Msg }

func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) (int, error) {
	return c.doWith(ctx, method, path, body, nil, out)
}

// doWith is do with these request headers.
func (c *Client) doWith(ctx context.Context, method, path string, body []byte, hdr http.Header, out any) (int, error) {
	base := c.Base()
	req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%w at %s: %v (is the node running? start one with `gpunet devnet` or `gpunet node`)", ErrUnreachable, c.where(), err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("read response from %s: %w", base, err)
	}
	if resp.StatusCode >= 400 {
		var eb apiwire.ErrorBody
		if json.Unmarshal(b, &eb) == nil && eb.Message != "" {
			if eb.Tx != nil && out != nil {
				// A rejected tx: its result is the answer (see BroadcastTx).
				if res, ok := out.(*apiwire.TxResult); ok {
					*res = *eb.Tx
					return resp.StatusCode, nil
				}
			}
			return resp.StatusCode, &APIError{Status: resp.StatusCode, Code: eb.Code, LedgerCode: eb.LedgerCode, Msg: eb.Message}
		}
		return resp.StatusCode, &APIError{Status: resp.StatusCode, Msg: fmt.Sprintf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, bytes.TrimSpace(b))}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode response of %s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// Status returns the node's status.
func (c *Client) Status(ctx context.Context) (*apiwire.StatusBody, error) {
	var s apiwire.StatusBody
	_, err := c.do(ctx, http.MethodGet, "/v1/status", nil, &s)
	return &s, err
}

// Account returns an account's state.
func (c *Client) Account(ctx context.Context, a address.Address) (*apiwire.AccountBody, error) {
	var out apiwire.AccountBody
	_, err := c.do(ctx, http.MethodGet, "/v1/accounts/"+a.String(), nil, &out)
	return &out, err
}

// Balance returns an account's balance.
func (c *Client) Balance(ctx context.Context, a address.Address) (*apiwire.BalanceBody, error) {
	var out apiwire.BalanceBody
	_, err := c.do(ctx, http.MethodGet, "/v1/accounts/"+a.String()+"/balance", nil, &out)
	return &out, err
}

// TxError is a tx the ledger rejected, at CheckTx or in its block.
type TxError struct{ Result *apiwire.TxResult }

func (e *TxError) Error() string {
	name := "error"
	for _, le := range ledger.AllErrors {
		if le.Code == e.Result.Code {
			name = le.Name
		}
	}
	where := "rejected"
	if e.Result.Height > 0 {
		where = fmt.Sprintf("failed in block %d", e.Result.Height)
	}
	return fmt.Sprintf("tx %s (code %d, %s): %s", where, e.Result.Code, name, e.Result.Log)
}

// BroadcastTx submits a signed tx. With wait it returns once the tx is in
// a block. A tx rejected or failed returns its result and a *TxError.
func (c *Client) BroadcastTx(ctx context.Context, tx []byte, wait bool) (*apiwire.TxResult, error) {
	path := "/v1/txs"
	if !wait {
		path += "?wait=false"
	}
	var res apiwire.TxResult
	status, err := c.do(ctx, http.MethodPost, path, tx, &res)
	if err != nil {
		return nil, err
	}
	if res.Code != 0 {
		return &res, &TxError{Result: &res}
	}
	if wait && status == http.StatusAccepted {
		return &res, fmt.Errorf("tx %s %w; check later with its hash", res.Hash, ErrNotInBlockYet)
	}
	return &res, nil
}

// ErrNotInBlockYet: the node accepted the tx into its mempool, but no block
// held it before the node stopped waiting. It is not a failure of the tx.
var ErrNotInBlockYet = errors.New("accepted but not in a block yet")

// Signer is what SendMsg needs from a key.
type Signer interface {
	PrivateKey() ed25519.PrivateKey
}

// SendMsg builds a tx carrying msg from key with the account's next
// sequence, signs it, submits it and waits for its block. When another tx
// of the same key takes the sequence first (the mempool rejects it with a
// bad sequence), it signs again with the next one, up to
// MaxSequenceRetries times.
//
// The tx pays max(fee, the chain's params.min_fee), so callers that have
// no reason to pay more pass 0 and still pay what the chain asks. The
// parameter is read with Params and kept for MinFeeTTL.
func (c *Client) SendMsg(ctx context.Context, key Signer, fee uint64, msg ledger.Msg) (*apiwire.TxResult, error) {
	return c.sendMsg(ctx, key, fee, msg, true)
}

// SubmitMsg is SendMsg without waiting for the block: it returns once the
// mempool accepted the tx. Later txs of the same key take the next
// sequence, so they land after it.
func (c *Client) SubmitMsg(ctx context.Context, key Signer, fee uint64, msg ledger.Msg) (*apiwire.TxResult, error) {
	return c.sendMsg(ctx, key, fee, msg, false)
}

// MaxSequenceRetries bounds how often SendMsg signs again after losing
// the sequence to another tx of the same key: about 25 s of waiting, room
// for a few dozen concurrent senders of one key at a block a second.
const MaxSequenceRetries = 30

func (c *Client) sendMsg(ctx context.Context, key Signer, fee uint64, msg ledger.Msg, wait bool) (*apiwire.TxResult, error) {
	st, err := c.Status(ctx)
	if err != nil {
		return nil, err
	}
	priv := key.PrivateKey()
	from := address.FromPubKey(priv.Public().(ed25519.PublicKey))
	refreshed := false
	for attempt := 1; ; attempt++ {
		minFee, err := c.MinFee(ctx, refreshed)
		if err != nil {
			return nil, err
		}
		acct, err := c.Account(ctx, from)
		if err != nil {
			return nil, err
		}
		tx := &ledger.Tx{ChainID: st.ChainID, Sequence: acct.NextSequence, Fee: max(fee, minFee), Msg: msg}
		if err := tx.Sign(priv); err != nil {
			return nil, err
		}
		raw, err := tx.Encode()
		if err != nil {
			return nil, err
		}
		res, err := c.BroadcastTx(ctx, raw, wait)
		var txErr *TxError
		if !refreshed && errors.As(err, &txErr) && txErr.Result.Height == 0 && txErr.Result.Code == ledger.ErrInsufficientFee.Code {
			// The minimum went up since it was read: read it again, once.
			refreshed = true
			continue
		}
		if attempt < MaxSequenceRetries && errors.As(err, &txErr) && txErr.Result.Height == 0 && txErr.Result.Code == ledger.ErrBadSequence.Code {
			// Another tx of this key holds the sequence until its block:
			// wait for it (longer each time, at most a second) and take
			// the next. Many senders of one key (a client following many
			// jobs) each get through in turn.
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-clock.Or(c.Clock).After(min(time.Duration(attempt)*100*time.Millisecond, time.Second)):
			}
			continue
		}
		return res, err
	}
}

// MinFee returns the chain's params.min_fee, from the copy read less than
// MinFeeTTL ago unless fresh is set.
func (c *Client) MinFee(ctx context.Context, fresh bool) (uint64, error) {
	c.feeMu.Lock()
	now := clock.Or(c.Clock).Now()
	if c.feeSet && !fresh && now.Sub(c.feeAt) < MinFeeTTL {
		defer c.feeMu.Unlock()
		return c.fee, nil
	}
	c.feeMu.Unlock()
	p, err := c.Params(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the chain's min_fee: %w", err)
	}
	c.feeMu.Lock()
	defer c.feeMu.Unlock()
	c.fee, c.feeAt, c.feeSet = p.MinFee, clock.Or(c.Clock).Now(), true
	return c.fee, nil
}

// IsNotFound reports whether err is the node saying a thing does not exist.
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// Provider returns a provider's offer and record; IsNotFound(err) when a is
// not registered.
func (c *Client) Provider(ctx context.Context, a address.Address) (*apiwire.ProviderBody, error) {
	var out apiwire.ProviderBody
	if _, err := c.do(ctx, http.MethodGet, "/v1/providers/"+a.String(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Providers returns every registered provider as an offer, walking
// every page.
func (c *Client) Providers(ctx context.Context) ([]offers.Offer, error) {
	out := []offers.Offer{}
	cursor := ""
	for {
		var page struct {
			Providers  []offers.Offer `json:"providers"`
			NextCursor string         `json:"next_cursor"`
		}
		v := url.Values{"limit": {strconv.Itoa(apiwire.MaxPageLimit)}}
		if cursor != "" {
			v.Set("cursor", cursor)
		}
		if _, err := c.do(ctx, http.MethodGet, "/v1/providers?"+v.Encode(), nil, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Providers...)
		if cursor = page.NextCursor; cursor == "" {
			return out, nil
		}
	}
}

// Offers returns the offers matching query, sorted by sortKeys, walking
// every page; all includes providers that cannot take jobs now.
func (c *Client) Offers(ctx context.Context, query, sortKeys string, all bool) ([]offers.Offer, error) {
	out := []offers.Offer{}
	cursor := ""
	for {
		v := url.Values{}
		v.Set("q", query)
		v.Set("sort", sortKeys)
		v.Set("limit", strconv.Itoa(apiwire.MaxPageLimit))
		if all {
			v.Set("all", "true")
		}
		if cursor != "" {
			v.Set("cursor", cursor)
		}
		var page struct {
			Offers     []offers.Offer `json:"offers"`
			NextCursor string         `json:"next_cursor"`
		}
		if _, err := c.do(ctx, http.MethodGet, "/v1/offers?"+v.Encode(), nil, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Offers...)
		if cursor = page.NextCursor; cursor == "" {
			return out, nil
		}
	}
}

// Params returns the ledger's parameters.
func (c *Client) Params(ctx context.Context) (*ledger.Params, error) {
	var p ledger.Params
	_, err := c.do(ctx, http.MethodGet, "/v1/params", nil, &p)
	return &p, err
}

// Job returns a job; IsNotFound(err) when there is none.
func (c *Client) Job(ctx context.Context, id uint64) (*ledger.Job, error) {
	var j ledger.Job
	if _, err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v1/jobs/%d", id), nil, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// Jobs returns owner's newest jobs, newest first, at most limit of them
// (up to apiwire.MaxPageLimit).
func (c *Client) Jobs(ctx context.Context, owner address.Address, limit int) (*apiwire.JobList, error) {
	return c.ListJobs(ctx, &owner, "", limit)
}

// ListJobs returns the newest jobs of owner (nil: anyone's) in state
// (empty: any), newest first, at most limit of them (up to
// apiwire.MaxPageLimit).
func (c *Client) ListJobs(ctx context.Context, owner *address.Address, state string, limit int) (*apiwire.JobList, error) {
	q := url.Values{"limit": {fmt.Sprint(limit)}}
	if owner != nil {
		q.Set("owner", owner.String())
	}
	if state != "" {
		q.Set("state", state)
	}
	var out apiwire.JobList
	_, err := c.do(ctx, http.MethodGet, "/v1/jobs?"+q.Encode(), nil, &out)
	return &out, err
}

// ProviderJobs returns the unfinished jobs assigned to a provider, every
// page of them.
func (c *Client) ProviderJobs(ctx context.Context, provider address.Address) (*apiwire.JobList, error) {
	var out apiwire.JobList
	cursor := ""
	for {
		var page apiwire.JobList
		path := fmt.Sprintf("/v1/providers/%s/jobs?limit=%d", provider, apiwire.MaxPageLimit)
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		if _, err := c.do(ctx, http.MethodGet, path, nil, &page); err != nil {
			return nil, err
		}
		out.Jobs = append(out.Jobs, page.Jobs...)
		out.Height = page.Height
		if cursor = page.NextCursor; cursor == "" {
			if out.Jobs == nil {
				out.Jobs = []*ledger.Job{}
			}
			return &out, nil
		}
	}
}

// Quote asks what submitting spec now would give.
func (c *Client) Quote(ctx context.Context, spec *ledger.JobSpec) (*ledger.Quote, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	var q ledger.Quote
	_, err = c.do(ctx, http.MethodPost, "/v1/quote", b, &q)
	return &q, err
}

// PostLog sends chunk seq of job id's live log, signed by the provider's key.
func (c *Client) PostLog(ctx context.Context, key Signer, job, seq uint64, data []byte) error {
	return c.postSignedLog(ctx, key, fmt.Sprintf("/v1/jobs/%d/logs", job), seq, data, apiwire.LogSignBytes(job, seq, data))
}

// postSignedLog posts a live log chunk to path, with the provider's
// address, the post number seq and the provider's signature of signBytes.
func (c *Client) postSignedLog(ctx context.Context, key Signer, path string, seq uint64, data, signBytes []byte) error {
	priv := key.PrivateKey()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Base()+path, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("X-Gpunet-Provider", address.FromPubKey(priv.Public().(ed25519.PublicKey)).String())
	req.Header.Set("X-Gpunet-Seq", strconv.FormatUint(seq, 10))
	req.Header.Set("X-Gpunet-Signature", hex.EncodeToString(ed25519.Sign(priv, signBytes)))
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%w at %s: %v", ErrUnreachable, c.where(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		var eb apiwire.ErrorBody
		json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&eb)
		return &APIError{Status: resp.StatusCode, Code: eb.Code, LedgerCode: eb.LedgerCode, Msg: eb.Message}
	}
	return nil
}

// Logs returns job id's live log chunks from seq from.
func (c *Client) Logs(ctx context.Context, job, from uint64) (*apiwire.LogPage, error) {
	var p apiwire.LogPage
	_, err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v1/jobs/%d/logs?from=%d", job, from), nil, &p)
	return &p, err
}
