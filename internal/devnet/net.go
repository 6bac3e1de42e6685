package devnet

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/gpunet/gpunet/internal/daemon"
	"github.com/gpunet/gpunet/internal/provider"
	"github.com/gpunet/gpunet/internal/validator"
)

// Configure gives the devnet in home fresh loopback ports, so that several
// devnets run side by side, and an API token if it has none (a devnet made
// before tokens existed); it saves the config and returns it.
func Configure(home string) (*validator.Config, error) {
	c, err := validator.LoadConfig(home)
	if err != nil {
		return nil, err
	}
	for _, p := range []*string{&c.P2P, &c.RPC, &c.API} {
		if *p, err = validator.FreeAddr(); err != nil {
			return nil, err
		}
	}
	if c.APIToken == "" {
		if c.APIToken, err = NewAPIToken(); err != nil {
			return nil, err
		}
	}
	return c, validator.SaveConfig(home, c)
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
	d, err := daemon.Start(ctx, home, daemon.Options{Logger: o.Logger, APIAddr: o.API, CheckInvariants: true})
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
	if n.Providers, err = RunProviders(pctx, home, d.APIURL, po); err != nil {
		n.Stop()
		return nil, fmt.Errorf("start devnet providers: %w", err)
	}
	ready := o.ReadyTimeout
	if ready == 0 {
		ready = time.Minute
	}
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
