// Package daemon runs what one node process serves: the validator and, on
// top of it, the HTTP API with the blob gateway, the chain's statistics,
// /metrics and the web dashboard. `gpunet node` and `gpunet devnet` both
// use it (a devnet adds its providers).
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/admission"
	"github.com/gpunet/gpunet/internal/apiserver"
	"github.com/gpunet/gpunet/internal/blob"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/dashboard"
	"github.com/gpunet/gpunet/internal/netstats"
	"github.com/gpunet/gpunet/internal/openaigw"
	"github.com/gpunet/gpunet/internal/relay"
	"github.com/gpunet/gpunet/internal/validator"
)

// DefaultMaxBlobBytes is the largest blob a node's gateway stores unless its
// config says otherwise.
const DefaultMaxBlobBytes = 4 << 30

// Options tune Start.
type Options struct {
	Logger *slog.Logger
	// APIAddr overrides the config's API address (host:port; port 0 picks a
	// free one).
	APIAddr         string
	CheckInvariants bool
	// DisputeKey, when set, signs the service disputes the node's OpenAI
	// gateway finds (sampled re-execution, docs/ledger.md "Service
	// disputes") and sends them; without it the node logs each dispute
	// with its three receipts, for anyone to send.
	DisputeKey chainclient.Signer
}

// Daemon is a running node process.
type Daemon struct {
	Node   *validator.Node
	APIURL string
	// API is the node's HTTP API, for mounting more routes (the
	// dashboard).
	API *apiserver.Server
	// Stats follow the chain for the dashboard and the metrics.
	Stats *netstats.Stats
	// Metrics is the registry /metrics serves; in-process providers
	// register theirs here.
	Metrics *prometheus.Registry
	cancel  context.CancelFunc
	apiErr  <-chan error
	statsWG sync.WaitGroup
	dash    *dashboard.Dashboard
	hub     *relay.Hub
	gateway *openaigw.Gateway
}

// Start starts home's validator and its API.
func Start(ctx context.Context, home string, o Options) (*Daemon, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	m := newNodeMetrics()
	// CometBFT's own metrics (cometbft_*) in a registry of their own,
	// served beside ours: their names are CometBFT's, outside the
	// conventions gpunet's registry is linted for.
	comet := prometheus.NewRegistry()
	n, err := validator.Start(ctx, home, validator.StartOptions{Logger: o.Logger, CheckInvariants: o.CheckInvariants, ObserveBlock: m.observeBlock, Metrics: comet})
	if err != nil {
		return nil, err
	}
	m.watchConsensus(n.Consensus)
	addr := n.Config().API
	if o.APIAddr != "" {
		addr = o.APIAddr
	}
	maxBlob := n.Config().MaxBlobBytes
	if maxBlob == 0 {
		maxBlob = DefaultMaxBlobBytes
	}
	blobs, err := blob.OpenStore(filepath.Join(home, "data", "blobs"), maxBlob)
	if err != nil {
		n.Stop()
		return nil, err
	}
	actx, cancel := context.WithCancel(context.Background())
	cfg := n.Config()
	nofile, err := raiseFDLimit()
	if err != nil {
		o.Logger.Warn("could not raise the open-file limit to its hard limit", "limit", nofile, "err", err)
	}
	trusted := trustPeers(actx, n.Config().PeerAPIs, o.Logger)
	lim := apiLimits(nofile, trusted)
	maxConns := lim.Max
	o.Logger.Debug("API connection caps", "open_file_limit", nofile, "max_conns", lim.Max, "reserved_for_trusted", lim.Reserve, "max_conns_per_ip", lim.PerAddr)
	stats := netstats.New(n, netstats.Options{Logger: o.Logger, Registry: m.reg})
	api := apiserver.New(n, apiserver.Options{Logger: o.Logger, Token: cfg.APIToken, CORSOrigins: cfg.CORSOrigins,
		ObserveRequest: m.observeRequest, Offers: stats.Offers, JobsInState: stats.JobsInState})
	l, err := net.Listen("tcp", addr)
	if err != nil {
		cancel()
		n.Stop()
		return nil, fmt.Errorf("api listen on %s: %w (another node or devnet on this port? pick one with --api)", addr, err)
	}
	bound := l.Addr()
	if bound.String() != cfg.API && (cfg.AdvertiseAPI == "" || canonURL(cfg.AdvertiseAPI) == "http://"+cfg.API) {
		// The API moved (port 0, --api): so does the URL it advertises.
		c := *cfg
		c.API, c.AdvertiseAPI = bound.String(), "http://"+bound.String()
		cfg = &c
	}
	peers := newPeerBook(cfg.APIURL(), cfg.ChainID, cfg.PeerAPIs, o.Logger)
	keeper := &blobKeeper{store: blobs, view: n.View, retention: cfg.Retention(), quota: blobQuota(cfg),
		allowance: blobAllowance(n.View, cfg.BlobUSyncPerGiB), perGiB: cfg.BlobUSyncPerGiB, log: o.Logger}
	gw := blob.NewGateway(blobs, blob.GatewayOptions{Logger: o.Logger, Limits: gatewayLimits(maxConns),
		Auth:  &blob.Auth{Token: cfg.APIToken, Allowance: keeper.allowance, Quota: keeper.quota},
		Fetch: &blob.FetchOptions{Sources: &dataSources{view: n.View, peers: peers}}})
	api.Mount(BlobRoutes(m.countBlobs(gw))...)
	api.Mount(peers.routes()...)
	api.Mount(dataRoutes(keeper)...)
	dir := serviceDirectory{view: n.View}
	// The consensus key signs the service witness's attestations and
	// passes (witness.go); a node without one (a remote signer) does not
	// witness.
	witnessKey, witnessErr := validator.ConsensusPrivKey(home)
	// It also signs the reports of replicas this node cannot reach
	// (replicadown.go), which the relay's failed dials start.
	var consTx sync.Mutex
	var down *downReporter
	var onDialFailed func(uint64, address.Address)
	var onSessionEnded func(address.Address)
	if witnessErr == nil {
		down = newDownReporter(witnessKey, cfg.ChainID, n, &consTx, o.Logger)
		onDialFailed, onSessionEnded = down.suspect, down.suspectProvider
	}
	hub := relay.NewHub(relay.HubOptions{Directory: dir, Self: cfg.APIURL(), IsPeer: peers.Known, Peers: peers.List, ChainID: cfg.ChainID, Log: o.Logger,
		WitnessKey: witnessKey, IsWitness: dir.IsServeWitness, OnDialFailed: onDialFailed, OnSessionEnded: onSessionEnded})
	disputes := &disputeSender{key: o.DisputeKey, log: o.Logger}
	gateway := openaigw.New(openaigw.Options{Directory: gatewayDirectory{dir, &accessCache{view: n.View}}, Dial: hub.DialReplica, Authorized: relay.Authorized, Log: o.Logger,
		Checks: &openaigw.CheckOptions{ChainID: cfg.ChainID, RatePPM: checkRate(n.View), LogprobTolMinE9: logprobTolMin(n.View), Dispute: disputes.send}})
	m.reg.MustRegister(newCheckCollector(gateway))
	api.Mount(serviceRoutes(hub, gateway)...)
	api.ForwardLogs(actx, peers.List)
	api.Mount(stats.Routes()...)
	api.Mount(MetricsRoute(prometheus.Gatherers{m.reg, comet}))
	var base atomic.Value
	base.Store("")
	dash := dashboard.New(actx, dashboard.Options{Home: home, ChainID: cfg.ChainID, Logger: o.Logger, API: func() string { return base.Load().(string) }})
	api.Mount(dash.Routes()...)
	al := admission.NewListener(l, lim)
	m.reg.MustRegister(newAdmissionCollector(al))
	apiErr := api.Serve(actx, al)
	api.BaseURL = "http://" + bound.String()
	base.Store(api.BaseURL)
	disputes.setAPI(api.BaseURL)
	if bound.String() != n.Config().API {
		// Record where the API really is so other commands in this home
		// find it.
		c := *n.Config()
		c.API, c.AdvertiseAPI = bound.String(), cfg.AdvertiseAPI
		if err := validator.SaveConfig(home, &c); err != nil {
			o.Logger.Warn("could not record the API address in the home", "err", err)
		}
	}
	d := &Daemon{Node: n, APIURL: api.BaseURL, API: api, Stats: stats, Metrics: m.reg, cancel: cancel, apiErr: apiErr, dash: dash, hub: hub, gateway: gateway}
	d.statsWG.Add(1)
	go func() {
		defer d.statsWG.Done()
		if err := stats.Run(actx); err != nil {
			o.Logger.Error("netstats stopped; the dashboard and chain metrics are not updated", "err", err)
		}
	}()
	d.statsWG.Add(1)
	go func() {
		defer d.statsWG.Done()
		keeper.run(actx)
	}()
	d.statsWG.Add(1)
	go func() {
		defer d.statsWG.Done()
		peers.learn(actx)
	}()
	if witnessErr != nil {
		o.Logger.Info("service witness off: the node cannot sign with its consensus key", "err", witnessErr)
	} else {
		w := &witness{key: witnessKey, chainID: cfg.ChainID, chain: n, log: o.Logger, probe: hub.WitnessProbe, txMu: &consTx}
		d.statsWG.Go(func() { w.run(actx) })
		if down != nil {
			down.probe = hub.ProbeDown
			d.statsWG.Go(func() { down.run(actx) })
		}
	}
	return d, nil
}

// Blob uploads: an upload must deliver some of its body every
// blobUploadIdle and all of it within blobUploadTimeout (4 GiB at 200
// KB/s); the gateway also cuts one below 4 KiB/s after 30 s.
const (
	blobUploadTimeout = 6 * time.Hour
	blobUploadIdle    = 30 * time.Second
)

// BlobRoutes documents and mounts the blob gateway (internal/blob) on the
// API. The gateway bounds bodies by the store's limit and uploads by its
// progress deadline and caps, and streams, so no route time limit applies
// to the request; its body is bounded as an upload (blobUploadTimeout,
// blobUploadIdle). Uploads need an upload ticket or the API token
// (docs/blobs.md).
func BlobRoutes(gw http.Handler) []apiserver.Route {
	hash := map[string]string{"hash": "the blob's name: sha256:<64 hex>"}
	return []apiserver.Route{
		{Method: "PUT", Path: "/v1/blobs", ID: "putBlob", Tag: "blobs", Summary: "Store a blob (ciphertext); 201, or 200 when already stored",
			BodyType: "application/octet-stream", Resp: blob.PutResponse{}, Status: http.StatusCreated, MaxBody: -1, Timeout: -1,
			BodyTimeout: blobUploadTimeout, BodyIdle: blobUploadIdle,
			Errors: []int{401, 403, 408, 413, 429, 503, 507}, Handler: gw},
		{Method: "PUT", Path: "/v1/blobs/{hash}", ID: "putBlobNamed", Tag: "blobs", Summary: "Store a blob, failing with 422 unless the body hashes to {hash}",
			PathParams: hash, BodyType: "application/octet-stream", Resp: blob.PutResponse{}, Status: http.StatusCreated, MaxBody: -1, Timeout: -1,
			BodyTimeout: blobUploadTimeout, BodyIdle: blobUploadIdle,
			Errors: []int{400, 401, 403, 408, 413, 422, 429, 503, 507}, Handler: gw},
		{Method: "GET", Path: "/v1/blobs/{hash}", ID: "getBlob", Tag: "blobs", Summary: "A blob, with Content-Length, ETag and X-Content-SHA256 (HEAD: the headers only)",
			PathParams: hash, RespType: "application/octet-stream", MaxBody: -1, Timeout: -1, Errors: []int{400, 404}, Handler: gw,
			Query: []apiserver.Param{{Name: "job", Type: "integer", Desc: "the job that references the blob: a node that lacks it fetches it from the node the job names (data_at), then from the nodes it knows"}}},
	}
}

// Stop stops the API and the validator.
func (d *Daemon) Stop() error {
	d.cancel()
	// Hijacked connections (agents' sessions, tunnels) are not the
	// server's to wait for: close them first.
	d.hub.Close()
	apiErr := <-d.apiErr
	d.gateway.Close()
	d.statsWG.Wait()
	d.dash.Wait()
	return errors.Join(apiErr, d.Node.Stop())
}
