// Package apiserver serves a node's HTTP JSON API: chain status, accounts,
// and tx submission. It depends only on the Chain interface, which the
// validator package implements.
package apiserver

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gpunet/gpunet/internal/abciapp"
	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/validator"
)

// Chain is what the API needs from a node.
type Chain interface {
	Status(ctx context.Context) (*validator.Status, error)
	View() (ledger.KV, func())
	BroadcastTx(ctx context.Context, tx []byte) (*validator.TxResult, error)
	GetTx(ctx context.Context, hash []byte) (*validator.TxResult, error)
	WaitTx(ctx context.Context, hash []byte) (*validator.TxResult, error)
	NextSequence(addr address.Address) (uint64, error)
}

// Server is the HTTP API.
type Server struct {
	chain Chain
	log   *slog.Logger
	// BaseURL is reported in /v1/status as "api".
	BaseURL string
	mux     *http.ServeMux
	logs    logRelay
}

// maxTxBody bounds a POST /v1/txs body; the ledger's own limit is lower.
const maxTxBody = 2 << 20

// New returns the API handler for chain.
func New(chain Chain, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{chain: chain, log: log, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /v1/status", s.status)
	s.mux.HandleFunc("GET /v1/accounts/{addr}", s.account)
	s.mux.HandleFunc("GET /v1/accounts/{addr}/balance", s.balance)
	s.mux.HandleFunc("GET /v1/params", s.query("/params"))
	s.mux.HandleFunc("GET /v1/supply", s.query("/supply"))
	s.mux.HandleFunc("POST /v1/txs", s.submitTx)
	s.mux.HandleFunc("GET /v1/txs/{hash}", s.getTx)
	s.mux.HandleFunc("GET /v1/providers", s.providers)
	s.mux.HandleFunc("GET /v1/providers/{addr}", s.provider)
	s.mux.HandleFunc("GET /v1/offers", s.offersList)
	s.mux.HandleFunc("GET /v1/providers/{addr}/jobs", s.providerJobs)
	s.mux.HandleFunc("GET /v1/jobs/{id}", s.job)
	s.mux.HandleFunc("GET /v1/jobs", s.jobs)
	s.mux.HandleFunc("POST /v1/quote", s.quote)
	s.mux.HandleFunc("POST /v1/jobs/{id}/logs", s.postLog)
	s.mux.HandleFunc("GET /v1/jobs/{id}/logs", s.getLog)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, 0, fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	return s
}

// Handle mounts another handler on the API (the blob gateway, the
// dashboard), with http.ServeMux patterns.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

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
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(l) }()
	done := make(chan error, 1)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := srv.Shutdown(sctx)
		if serr := <-serveErr; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		done <- err
	}()
	return l.Addr(), done, nil
}

// ErrorBody is the JSON of every error response.
type ErrorBody struct {
	Error string `json:"error"`
	Code  uint32 `json:"code,omitempty"`
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, code uint32, msg string) {
	writeJSON(w, status, ErrorBody{Error: msg, Code: code})
}

// StatusBody is GET /v1/status.
type StatusBody struct {
	validator.Status
	API string `json:"api"`
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	st, err := s.chain.Status(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, 0, "node status: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, StatusBody{Status: *st, API: s.BaseURL})
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
		writeError(w, http.StatusInternalServerError, ledger.CodeOf(err), err.Error())
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
		writeError(w, http.StatusInternalServerError, ledger.CodeOf(err), err.Error())
		return
	}
	writeJSON(w, http.StatusOK, AccountBody{Account: acct, NextSequence: next, Height: height})
}

// AccountBody is GET /v1/accounts/{addr}.
type AccountBody struct {
	ledger.Account
	// NextSequence is the sequence the account's next tx must carry,
	// counting its txs waiting in the mempool ("sequence" counts only
	// committed ones).
	NextSequence uint64 `json:"next_sequence"`
	Height       uint64 `json:"height"`
}

// BalanceBody is GET /v1/accounts/{addr}/balance.
type BalanceBody struct {
	Address string `json:"address"`
	Balance uint64 `json:"balance"`
	Denom   string `json:"denom"`
	Height  uint64 `json:"height"`
}

func (s *Server) balance(w http.ResponseWriter, r *http.Request) {
	acct, height, ok := s.readAccount(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, BalanceBody{Address: acct.Address.String(), Balance: acct.Balance, Denom: "usync", Height: height})
}

func (s *Server) query(path string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		kv, release := s.chain.View()
		defer release()
		b, err := abciapp.QueryState(kv, path)
		if err != nil {
			writeError(w, http.StatusInternalServerError, ledger.CodeOf(err), err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(append(b, '\n'))
	}
}

// submitTx accepts a wire-form tx (raw bytes, or hex with Content-Type
// text/plain). With ?wait=false it returns after CheckTx; by default it
// waits until the tx is in a block (at most ?timeout=, default 30s).
func (s *Server) submitTx(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxTxBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, ledger.ErrTxTooLarge.Code, fmt.Sprintf("tx body: %v (limit %d bytes)", err, maxTxBody))
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
	if errors.Is(err, validator.ErrDuplicateTx) {
		writeError(w, http.StatusConflict, ledger.ErrBadSequence.Code, err.Error())
		return
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, 0, "broadcast: "+err.Error())
		return
	}
	if res.Code != 0 {
		writeJSON(w, http.StatusUnprocessableEntity, res)
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
		writeError(w, http.StatusInternalServerError, 0, err.Error())
		return
	}
	if res == nil {
		writeError(w, http.StatusNotFound, 0, fmt.Sprintf("tx %X is not in any block", hash))
		return
	}
	writeJSON(w, http.StatusOK, res)
}
