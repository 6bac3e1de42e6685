package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/devnet"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/validator"
)

// devnetFlags are devnet's flags.
type devnetFlags struct {
	reset     bool
	blockTime time.Duration
	hwTarget  time.Duration
	api       string
	nprov     int
	faulty    int
	overclaim float64
	logLevel  string
	example   bool
}

func devnetCmd(e *env) *cobra.Command {
	var df devnetFlags
	c := &cobra.Command{
		Use:   "devnet",
		Short: "Run a local network (one validator, funded keys alice and bob) until interrupted",
		Long: `Run a local development network in --home until interrupted.

The first run creates the chain and the funded dev keys alice and bob in the
home's keyring; later runs resume the chain with all its state; --reset
starts afresh. Ports are free loopback ports picked at each start unless
--api is given; other commands with the same --home find the node by itself.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error { return e.runDevnet(cmd.Context(), &df) },
	}
	c.Flags().BoolVar(&df.reset, "reset", false, "delete the devnet's chain and keys in --home and start afresh")
	c.Flags().DurationVar(&df.blockTime, "block-time", 0, "pause after each block (default 1s; kept in the home)")
	c.Flags().DurationVar(&df.hwTarget, "hw-challenge-time", 0, "a new chain's hardware challenges take this long at the claimed throughput (default 10s), with three blocks' allowance for getting the commit on chain (default 12s); shorter ones come more often, at most one per device every 75 times this")
	c.Flags().StringVar(&df.api, "api", "", "API listen address host:port (default: a free loopback port)")
	c.Flags().IntVar(&df.nprov, "providers", 3, "in-process providers to run (keys provider-1 … provider-N)")
	c.Flags().StringVar(&df.logLevel, "log-level", "warn", "what the node and providers log: debug, info, warn or error")
	c.Flags().Float64Var(&df.overclaim, "fault-overclaim", 0, "make every provider declare this many times the throughput it measured (fault injection, to watch hardware challenges catch it)")
	c.Flags().IntVar(&df.faulty, "faulty", 0, "make the last N providers commit wrong results on every job (fault injection, to watch Proof of Sync catch them)")
	c.Flags().BoolVar(&df.example, "example", true, "run the bundled wordcount example job once the providers are up")
	return c
}

// runDevnet is devnet: it sets the home up, runs the node and providers
// until ctx ends or the node halts, and stops them.
func (e *env) runDevnet(ctx context.Context, df *devnetFlags) error {
	if df.faulty < 0 || df.faulty > df.nprov {
		return usageError{fmt.Errorf("--faulty %d: want 0 to --providers (%d)", df.faulty, df.nprov)}
	}
	created, err := devnet.Setup(e.home, devnet.Options{Reset: df.reset, BlockTime: df.blockTime, HWTarget: df.hwTarget})
	if err != nil {
		return err
	}
	c, err := devnet.Configure(e.home)
	if err != nil {
		return err
	}
	api := df.api
	if api == "" {
		api = c.API
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(df.logLevel)); err != nil {
		return usageError{fmt.Errorf("--log-level %q: want debug, info, warn or error", df.logLevel)}
	}
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	n, err := devnet.Start(ctx, e.home, devnet.StartOptions{Logger: logger, API: api,
		Providers: devnet.ProviderOptions{N: df.nprov, Faulty: df.faulty, Overclaim: df.overclaim}})
	if err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			n.Stop()
		}
	}()
	if err := e.printDevnet(n, c, created); err != nil {
		return err
	}
	if df.example && df.nprov > 0 {
		go e.runExample(ctx, n.Daemon.APIURL)
	}
	select {
	case <-ctx.Done():
	case <-n.Daemon.Halted():
		// The node first: a halted chain commits nothing, so the
		// providers' parting txs would only wait out their timeout.
		stopped = true
		err := haltedError(n.Daemon)
		n.StopProviders()
		return err
	}
	fmt.Fprintln(e.stderr, "stopping devnet…")
	stopped = true
	return n.Stop()
}

// printDevnet writes where the devnet is and who is in it.
func (e *env) printDevnet(n *devnet.Net, c *validator.Config, created bool) error {
	kr, err := e.keyring()
	if err != nil {
		return err
	}
	type devKey struct {
		Name    string `json:"name"`
		Address string `json:"address"`
	}
	var ks []devKey
	for _, name := range devnet.DevKeys {
		k, err := kr.Get(name)
		if err != nil {
			return err
		}
		ks = append(ks, devKey{name, k.Address.String()})
	}
	api := n.Daemon.APIURL
	if e.output == "json" {
		var ps []devKey
		for _, a := range n.Providers.Agents {
			st := a.Status()
			ps = append(ps, devKey{st.Name, st.Address})
		}
		json.NewEncoder(e.stdout).Encode(map[string]any{"chain_id": c.ChainID, "api": api, "dashboard": api + "/", "api_token": c.APIToken, "home": e.home, "created": created, "keys": ks, "providers": ps})
		return nil
	}
	verb := "resumed"
	if created {
		verb = "created"
	}
	fmt.Fprintf(e.stdout, "gpunet devnet %s: chain %s, home %s\n  api:        %s\n  dashboard:  %s/  (to submit jobs from it, the API token: %s)\n  funded keys:\n", verb, c.ChainID, e.home, api, api, c.APIToken)
	for _, k := range ks {
		fmt.Fprintf(e.stdout, "    %-6s %s\n", k.Name, k.Address)
	}
	fmt.Fprintf(e.stdout, "  providers:\n")
	for _, a := range n.Providers.Agents {
		st := a.Status()
		fmt.Fprintf(e.stdout, "    %-10s %s\n", st.Name, st.Address)
	}
	fmt.Fprintf(e.stdout, "Try: gpunet --home %s offers -o price\n     gpunet --home %s tx send bob 5sync --from alice\n     gpunet --home %s query balance bob\nPress Ctrl-C to stop.\n", e.home, e.home, e.home)
	return nil
}

// runExample runs the bundled example job and prints its verified output.
func (e *env) runExample(ctx context.Context, api string) {
	start := time.Now()
	text := e.output != "json"
	if text {
		fmt.Fprintln(e.stdout, "Running the bundled example job (examples/wordcount) on the devnet's providers:")
	}
	res, err := devnet.RunExample(ctx, e.home, api, func(j *ledger.Job) {
		if text {
			fmt.Fprintf(e.stdout, "  job %d %6.2fs  %-9s %s\n", j.ID, time.Since(start).Seconds(), j.State, j.Reason)
		}
	})
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "example job: %v\n", err)
		return
	}
	j := res.Job
	if !text {
		json.NewEncoder(e.stdout).Encode(map[string]any{"example_job": j.ID, "state": j.State, "out": res.OutDir, "output": string(res.Output), "cost": j.Cost + j.Fee})
		return
	}
	fmt.Fprintf(e.stdout, "Example job %d succeeded on %s in %.2fs; cost %s + %s fee; verified: %s. Its decrypted output (%s/out/counts.txt):\n%s",
		j.ID, j.Delivered, time.Since(start).Seconds(), formatSync(j.Cost), formatSync(j.Fee), verdictText(j), res.OutDir, res.Output)
	fmt.Fprintf(e.stdout, "Run it yourself: gpunet --home %s job run %s/examples/wordcount/job.yaml --from alice\n", e.home, e.home)
}
