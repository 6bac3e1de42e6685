// Package apiserver serves a node's HTTP JSON API: chain status, accounts,
// and tx submission. It depends only on the Chain interface, which the
// validator package implements; the bodies it answers with are
// internal/apiwire's, which clients decode.
package apiserver

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/admission"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/ledger"
)

// Chain is what the API needs from a node.
type Chain interface {
	Status(ctx context.Context) (*apiwire.Status, error)
	View() (ledger.KV, func())
	// BroadcastTx returns CheckTx's verdict; for a tx the node has seen
	// recently, an error wrapping apiwire.ErrDuplicateTx.
	BroadcastTx(ctx context.Context, tx []byte) (*apiwire.TxResult, error)
	GetTx(ctx context.Context, hash []byte) (*apiwire.TxResult, error)
	WaitTx(ctx context.Context, hash []byte) (*apiwire.TxResult, error)
	NextSequence(addr address.Address) (uint64, error)
	// Blocks returns up to limit block headers from height down (the
	// latest when height is 0), newest first.
	Blocks(ctx context.Context, height int64, limit int) ([]apiwire.BlockHeader, error)
	// Block returns block height with its txs and their results; nil
	// when the node does not have it.
	Block(ctx context.Context, height int64) (*apiwire.Block, error)
}

// Options tune a Server.
type Options struct {
	Logger *slog.Logger
	// Token, when set, is the API token that routes marked Auth require
	// (the api_token of the node's config). Without it those routes are
	// off.
	Token string
	// CORSOrigins lists the origins allowed to call the API from a
	// browser ("*" for any). Empty (the default) sends no CORS headers.
	CORSOrigins []string
	// ObserveRequest, when set, sees every request's route, status and
	// duration (the node's metrics).
	ObserveRequest func(route string, status int, d time.Duration)
	// Offers, when set, supplies the providers' list entries for
	// /v1/offers instead of decoding the registry at each height.
	Offers OfferSource
	// JobsInState, when set, lists the ids of jobs in a state, newest
	// first, below before (all when 0), at most limit, and whether older
	// ones remain; ok is false when it cannot answer (not loaded yet).
	// /v1/jobs?state= uses it instead of reading every job record on
	// its way. The handler checks each job's state itself.
	JobsInState func(state string, before uint64, limit int) (ids []uint64, more, ok bool)
}

// Server is the HTTP API.
type Server struct {
	chain Chain
	log   *slog.Logger
	opts  Options
	// BaseURL is reported in /v1/status as "api".
	BaseURL string
	mux     *http.ServeMux
	routes  []Route
	// preflightH answers CORS preflights, bounded as unrouted requests.
	preflightH http.Handler
	logs       logRelay
	svcLogs    logRelay
	offers     offerCache
}

// maxTxBody bounds a POST /v1/txs body; the ledger's own limit is lower.
// txBodyTimeout bounds the time it may take to arrive (the route waits
// far longer for the tx's block).
const (
	maxTxBody     = 2 << 20
	txBodyTimeout = 30 * time.Second
)

// The server's own time bounds (docs/bounds.md).
const (
	// ReadHeaderTimeout is how long a client has to send a request's
	// line and headers.
	ReadHeaderTimeout = 10 * time.Second
	// IdleTimeout closes a connection idle between requests.
	IdleTimeout = time.Minute
)

// New returns the API handler for chain.
func New(chain Chain, o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{chain: chain, log: o.Logger, opts: o, mux: http.NewServeMux(), svcLogs: logRelay{kind: serviceLogs}}
	for _, rt := range slices.Concat(s.apiRoutes(), s.govRoutes(), s.delegationRoutes(), s.serviceRoutes()) {
		s.add(rt)
	}
	s.mux.Handle("/", s.unrouted(s.notFound))
	s.preflightH = s.unrouted(s.preflight)
	return s
}

// ListenAndServe serves on addr until ctx ends. It returns once the
// listener is bound, serving in the background; the returned channel gets
// the server's final error after every request in flight has finished.
// Requests see ctx end, so long waits (a tx waiting for its block) stop
// at once.
func (s *Server) ListenAndServe(ctx context.Context, addr string) (net.Addr, <-chan error, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("api listen on %s: %w", addr, err)
	}
	return l.Addr(), s.Serve(ctx, l), nil
}

// Serve is ListenAndServe on a listener the caller made; it closes l. A
// node serves an *admission.Listener, which caps its connections and
// keeps some in reserve for trusted requests (internal/daemon): Serve
// wires it in, and each route admits its requests by their headers.
func (s *Server) Serve(ctx context.Context, l net.Listener) <-chan error {
	al, _ := l.(*admission.Listener)
	srv := &http.Server{
		Handler: s,
		// A client gets this long to send its request line and headers;
		// a body is bounded by its route (BodyTimeout, BodyIdle), an
		// answer by its route's Timeout or StreamWriteIdle.
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnContext:       admission.ConnContext,
		ConnState: func(c net.Conn, st http.ConnState) {
			if st == http.StateHijacked {
				// The route's deadlines were the request's: whoever
				// takes the connection over sets its own.
				c.SetDeadline(time.Time{})
			}
			if al != nil {
				al.ConnState(c, st)
			}
		},
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(l) }()
	done := make(chan error, 1)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		err := srv.Shutdown(sctx)
		if errors.Is(err, context.DeadlineExceeded) {
			// A request that outlives the grace (a client still
			// sending a body, a handler not yet at its next check of
			// ctx) does not make the node's stop fail: its
			// connection is closed under it, as a crash would.
			s.log.Warn("api: requests still running after the shutdown grace; closing their connections", "grace", shutdownGrace)
			err = srv.Close()
		}
		if serr := <-serveErr; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		done <- err
	}()
	return done
}

// shutdownGrace is how long a stopping node waits for requests in flight
// before it closes their connections.
var shutdownGrace = 5 * time.Second

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	st, err := s.chain.Status(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, 0, "node status: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, apiwire.StatusBody{Status: *st, API: s.BaseURL})
}

func parseAddr(w http.ResponseWriter, r *http.Request) (address.Address, bool) {
	a, err := address.Parse(r.PathValue("addr"))
	if err != nil {
		writeError(w, http.StatusBadRequest, ledger.ErrInvalidAddress.Code, err.Error())
		return a, false
	}
	return a, true
}

// readAccount reads the account named in the path; on failure it has
// written the error response.
func (s *Server) readAccount(w http.ResponseWriter, r *http.Request) (ledger.Account, uint64, bool) {
	a, ok := parseAddr(w, r)
	if !ok {
		return ledger.Account{}, 0, false
	}
	kv, release := s.chain.View()
	defer release()
	acct, err := ledger.GetAccount(kv, a)
	if err != nil {
		writeLedgerError(w, err)
		return acct, 0, false
	}
	return acct, ledger.Height(kv), true
}

func (s *Server) account(w http.ResponseWriter, r *http.Request) {
	acct, height, ok := s.readAccount(w, r)
	if !ok {
		return
	}
	next, err := s.chain.NextSequence(acct.Address)
	if err != nil {
		writeLedgerError(w, err)
		return
	}
	body := apiwire.AccountBody{Account: acct, NextSequence: next, Height: height}
	kv, release := s.chain.View()
	defer release()
	if p, found, err := ledger.GetProvider(kv, acct.Address); err != nil {
		writeLedgerError(w, err)
		return
	} else if found {
		body.Provider, body.Stake, body.Earned = true, p.Stake, p.Earned
	}
	for _, u := range ledger.GetUnbondings(kv, acct.Address) {
		body.Unbonding += u.Amount
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) balance(w http.ResponseWriter, r *http.Request) {
	acct, height, ok := s.readAccount(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, apiwire.BalanceBody{Address: acct.Address.String(), Balance: acct.Balance, Denom: "usync", Height: height})
}

func (s *Server) params(w http.ResponseWriter, r *http.Request) {
	kv, release := s.chain.View()
	defer release()
	p, err := ledger.GetParams(kv)
	if err != nil {
		writeLedgerError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) supply(w http.ResponseWriter, r *http.Request) {
	kv, release := s.chain.View()
	defer release()
	writeJSON(w, http.StatusOK, apiwire.SupplyBody{
		Supply: ledger.Supply(kv), Treasury: ledger.Treasury(kv), Staked: ledger.Staked(kv),
		Unbonding: ledger.UnbondingTotal(kv), Escrowed: ledger.Escrowed(kv), Height: ledger.Height(kv),
	})
}

// submitTx accepts a wire-form tx (raw bytes, or hex with Content-Type
// text/plain). With ?wait=false it returns after CheckTx; by default it
// waits until the tx is in a block (at most ?timeout=, default 30s).
func (s *Server) submitTx(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeBodyError(w, ledger.ErrTxTooLarge.Code, fmt.Sprintf("tx body (limit %d bytes)", maxTxBody), err)
		return
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") {
		body, err = hex.DecodeString(strings.TrimSpace(string(body)))
		if err != nil {
			writeError(w, http.StatusBadRequest, ledger.ErrDecode.Code, "tx body is not hex: "+err.Error())
			return
		}
	}
	if len(body) == 0 {
		writeError(w, http.StatusBadRequest, ledger.ErrDecode.Code, "empty tx body")
		return
	}
	res, err := s.chain.BroadcastTx(r.Context(), body)
	if errors.Is(err, apiwire.ErrDuplicateTx) {
		writeError(w, http.StatusConflict, ledger.ErrBadSequence.Code, err.Error())
		return
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, 0, "broadcast: "+err.Error())
		return
	}
	if res.Code != 0 {
		writeJSON(w, http.StatusUnprocessableEntity, apiwire.ErrorBody{Code: apiwire.CodeTxRejected, Message: res.Log, LedgerCode: res.Code, Tx: res})
		return
	}
	if r.URL.Query().Get("wait") == "false" {
		writeJSON(w, http.StatusAccepted, res)
		return
	}
	timeout := 30 * time.Second
	if t := r.URL.Query().Get("timeout"); t != "" {
		d, err := time.ParseDuration(t)
		if err != nil || d <= 0 || d > 5*time.Minute {
			writeError(w, http.StatusBadRequest, 0, fmt.Sprintf("timeout %q: want a duration up to 5m, e.g. 30s", t))
			return
		}
		timeout = d
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	hash, _ := hex.DecodeString(res.Hash)
	inc, err := s.chain.WaitTx(ctx, hash)
	if err != nil {
		writeJSON(w, http.StatusAccepted, res) // in the mempool, not yet in a block
		return
	}
	writeJSON(w, http.StatusOK, inc)
}

func (s *Server) getTx(w http.ResponseWriter, r *http.Request) {
	hash, err := hex.DecodeString(r.PathValue("hash"))
	if err != nil || len(hash) != 32 {
		writeError(w, http.StatusBadRequest, 0, fmt.Sprintf("tx hash %q: want 64 hex characters", r.PathValue("hash")))
		return
	}
	res, err := s.chain.GetTx(r.Context(), hash)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, 0, "tx index: "+err.Error())
		return
	}
	if res == nil {
		writeError(w, http.StatusNotFound, 0, fmt.Sprintf("tx %X is not in any block", hash))
		return
	}
	writeJSON(w, http.StatusOK, res)
}
