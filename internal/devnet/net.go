package devnet

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpunet/gpunet/internal/daemon"
	"github.com/gpunet/gpunet/internal/keys"
	"github.com/gpunet/gpunet/internal/provider"
	"github.com/gpunet/gpunet/internal/validator"
)

// Configure readies the devnet in home to start: it keeps the loopback
// ports its config holds, so that the API's address (and a bookmark of the
// dashboard) stays the same from one start to the next, and gives a new
// free port to any that another process holds now, so that several devnets
// run side by side; api, when set, is the API's address from now on. It
// gives the node an API token if it has none (a devnet made before tokens
// existed), saves the config and returns it, with a line for each address
// it had to change.
func Configure(home, api string) (*validator.Config, []string, error) {
	c, err := validator.LoadConfig(home)
	if err != nil {
		return nil, nil, err
	}
	var moved []string
	oldAPI := c.API
	if api != "" {
		c.API = api
	}
	for _, p := range []struct {
		name string
		addr *string
	}{{"p2p", &c.P2P}, {"rpc", &c.RPC}, {"api", &c.API}} {
		if p.name == "api" && api != "" {
			continue // the caller's choice: a clash is the node's error to report
		}
		if *p.addr != "" && portFree(*p.addr) {
			continue
		}
		old := *p.addr
		if *p.addr, err = validator.FreeAddr(); err != nil {
			return nil, nil, err
		}
		if old != "" {
			moved = append(moved, fmt.Sprintf("%s address %s is taken by another process; using %s", p.name, old, *p.addr))
		}
	}
	if c.API != oldAPI && strings.TrimRight(c.AdvertiseAPI, "/") == "http://"+oldAPI {
		// The advertised URL was the old address's: it follows the API
		// (the node advertises where its API really listens, port 0
		// included), or agents and peers would be sent to the old port.
		c.AdvertiseAPI = ""
	}
	if c.APIToken == "" {
		if c.APIToken, err = NewAPIToken(); err != nil {
			return nil, nil, err
		}
	}
	return c, moved, validator.SaveConfig(home, c)
}

// portFree reports whether addr (host:port, or CometBFT's tcp://host:port)
// can be listened on now.
func portFree(addr string) bool {
	l, err := net.Listen("tcp", strings.TrimPrefix(addr, "tcp://"))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// ProviderPoll is how often devnet providers look at the chain: twice a
// block, so challenges are answered in the next block or the one after.
func ProviderPoll(blockTime time.Duration) time.Duration {
	return max(50*time.Millisecond, min(blockTime/2, time.Second))
}

// StartOptions tune Start.
type StartOptions struct {
	Logger *slog.Logger
	// API is the API's listen address (host:port); empty: the config's.
	API string
	// Providers are the in-process providers to run. Their Poll defaults
	// to ProviderPoll of the chain's block time, and their Metrics are
	// the node's.
	Providers ProviderOptions
	// ReadyTimeout bounds the wait for the providers to be registered,
	// online and staked (default a minute).
	ReadyTimeout time.Duration
	// Progress, when set, is told each step of the start as it begins, in
	// words for people ("starting the node", …).
	Progress func(step string)
	// WarmExample compiles the bundled example's module into the
	// providers' cache while they come online (Providers.WarmExample), for
	// a devnet about to run the example.
	WarmExample bool
}

// Net is a running devnet: its node and its providers.
type Net struct {
	Daemon    *daemon.Daemon
	Providers *Providers
	// The providers run under a context of their own, so that every way
	// out stops them (they mark themselves offline) before the node.
	stopProviders context.CancelFunc
}

// Start starts the node of the devnet in home, then its providers, and
// waits until the providers are ready. On an error it has stopped what it
// started.
func Start(ctx context.Context, home string, o StartOptions) (*Net, error) {
	progress := func(format string, args ...any) {
		if o.Progress != nil {
			o.Progress(fmt.Sprintf(format, args...))
		}
	}
	progress("starting the node")
	// The node sends the service disputes its gateway finds with the
	// validator's operator key (funded at genesis).
	dkey, err := DisputeKey(home)
	if err != nil {
		return nil, err
	}
	d, err := daemon.Start(ctx, home, daemon.Options{Logger: o.Logger, APIAddr: o.API, CheckInvariants: true, DisputeKey: dkey})
	if err != nil {
		return nil, err
	}
	pctx, stop := context.WithCancel(ctx)
	n := &Net{Daemon: d, stopProviders: stop}
	po := o.Providers
	if po.Logger == nil {
		po.Logger = o.Logger
	}
	if po.Poll == 0 {
		po.Poll = ProviderPoll(time.Duration(d.Node.Config().BlockTime))
	}
	if po.Metrics == nil {
		po.Metrics = provider.NewMetrics(d.Metrics)
	}
	if po.N == 0 {
		n.Providers = &Providers{}
		return n, nil
	}
	if po.Progress == nil {
		po.Progress = o.Progress
	}
	progress("node up at %s (height %d); starting %d provider(s)", d.APIURL, d.Node.Height(), po.N)
	if n.Providers, err = RunProviders(pctx, home, d.APIURL, po); err != nil {
		n.Stop()
		return nil, fmt.Errorf("start devnet providers: %w", err)
	}
	ready := o.ReadyTimeout
	if ready == 0 {
		ready = time.Minute
	}
	if o.WarmExample {
		n.Providers.wg.Go(func() { n.Providers.WarmExample(pctx) }) // Wait waits for it
	}
	progress("providers registering, staking and coming online (a few blocks)")
	if err := n.Providers.WaitReady(ctx, ready); err != nil {
		n.Stop()
		return nil, err
	}
	return n, nil
}

// StopProviders stops the providers and waits for them.
func (n *Net) StopProviders() {
	n.stopProviders()
	if n.Providers != nil {
		n.Providers.Wait()
	}
}

// Stop stops the providers, then the node.
func (n *Net) Stop() error {
	n.StopProviders()
	return n.Daemon.Stop()
}

// DisputeKey is the key a devnet's node sends service disputes with: the
// operator's (OperatorKey).
func DisputeKey(home string) (*keys.Key, error) {
	kr, err := keys.Open(filepath.Join(home, "keyring"))
	if err != nil {
		return nil, err
	}
	return kr.Get(OperatorKey)
}
