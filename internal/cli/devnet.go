package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/devnet"
	"github.com/gpunet/gpunet/internal/egress"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/validator"
)

// devnetFlags are devnet's flags.
type devnetFlags struct {
	reset     bool
	blockTime time.Duration
	hwTarget  time.Duration
	// hwOn is --hw-challenges: false gives a new chain none.
	hwOn      bool
	api       string
	nprov     int
	faulty    int
	overclaim float64
	logLevel  string
	// example is --example; exampleSet whether it was given.
	example    bool
	exampleSet bool
	registry   string
	allowFetch []string
}

func devnetCmd(e *env) *cobra.Command {
	var df devnetFlags
	c := &cobra.Command{
		Use:   "devnet",
		Short: "Run a local network (one validator, funded keys alice and bob) until interrupted",
		Long: `Run a local development network in --home until interrupted.

The first run creates the chain and the funded dev keys alice and bob in the
home's keyring, starts the providers and runs the bundled example job once;
later runs resume the chain with all its state (--example runs the example
again). It says each step of its start on stderr; the node and providers log
to HOME/logs/devnet.log (--log-level; CometBFT to HOME/logs/cometbft.log),
and what needs you (an error, a provider that cannot top up its stake) is
said on stderr too. The node keeps its loopback ports from one run to the
next, so the API and dashboard addresses stay the same (a port another
process holds meanwhile is replaced, and devnet says so); --api sets the
API's address.
Other commands with the same --home find the node by themselves.

--reset starts a new chain: it deletes the old chain, its config and logs,
the job keys and example outputs of its jobs, the providers' status, and the
devnet's own keys (alice, bob, provider-N), and lists them as it does; keys
you added (gpunet keys add) and the providers' image cache are kept.

--registry also serves an OCI registry on loopback (127.0.0.1:5000, or the
address given, or a free port if that is taken) holding the container
example's image, built from this repository (examples/gpugemm; run devnet
from a clone), and writes job specs that run it by digest to
HOME/examples/container: job.yaml on a CPU, gpu.yaml on a GPU. It serves
the services example too (examples/tinylm, a tiny language model behind
OpenAI's chat completions API) and writes the service spec that deploys it
to HOME/examples/service/tinylm.yaml.

The providers fetch URL inputs and pull images as 'provider start' does:
from public addresses only, and from the devnet's own registry
(--registry); --allow-fetch-network NET lets them use NET too (e.g.
127.0.0.1 for a registry of your own on this machine).

Governance is quick on a devnet: deposit and voting periods of 20 blocks
each (20 s at the default --block-time of 1s) and a minimum deposit of
10sync, so a proposal passes within a minute ('gpunet gov --help'). The
providers' stake is the stake that votes: vote with --from provider-N.

The market moves quickly too: an epoch is 20 blocks (20 s; an hour on
the default chain), after which each class's utilisation and price index
are updated ('gpunet query market'), and each epoch mints up to 100sync
of rewards (less what jobs paid, at most half the protocol fees paid in
it) for providers' verified work and validators ('gpunet query market'
shows the open epoch's). A preempted spot job has 10 s, not 2 minutes, to
checkpoint, and checkpoints may be taken every second.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			df.exampleSet = cmd.Flags().Changed("example")
			return e.runDevnet(cmd.Context(), &df)
		},
	}
	c.Flags().BoolVar(&df.reset, "reset", false, "start a new chain in --home: deletes the old chain and the devnet's own keys (listing what it deletes), keeps the keys you added")
	c.Flags().DurationVar(&df.blockTime, "block-time", 0, "pause after each block (default 1s; kept in the home)")
	c.Flags().DurationVar(&df.hwTarget, "hw-challenge-time", 0, "a new chain's hardware challenges take this long at the claimed throughput (default 10s), with three blocks' allowance for getting the commit on chain (default 6s); shorter ones come more often, at most one per device every 75 times this")
	c.Flags().BoolVar(&df.hwOn, "hw-challenges", true, "give a new chain's providers hardware challenges (params.hw_rate_ppm); --hw-challenges=false: none, so that nothing on the chain depends on how busy this machine is (for tests)")
	c.Flags().StringVar(&df.api, "api", "", "API listen address host:port, kept in the home (default: the home's, a free loopback port at first)")
	c.Flags().IntVar(&df.nprov, "providers", 3, "in-process providers to run (keys provider-1 … provider-N)")
	c.Flags().StringVar(&df.logLevel, "log-level", "info", "what the node and providers log to HOME/logs/devnet.log: debug, info, warn or error (errors are said on stderr too)")
	c.Flags().Float64Var(&df.overclaim, "fault-overclaim", 0, "make every provider declare this many times the throughput it measured (fault injection, to watch hardware challenges catch it)")
	c.Flags().IntVar(&df.faulty, "faulty", 0, "make the last N providers commit wrong results on every job and answer half of their services' chat completions wrongly (fault injection, to watch Proof of Sync and sampled re-execution catch them)")
	c.Flags().BoolVar(&df.example, "example", false, "run the bundled wordcount example job once the providers are up (without the flag: on a home's first run only; --example=false: never)")
	c.Flags().StringVar(&df.registry, "registry", "", "serve an OCI registry with the container and service examples' images at this loopback address (--registry alone: "+devnet.DefaultRegistry+")")
	c.Flags().Lookup("registry").NoOptDefVal = "default"
	c.Flags().StringArrayVar(&df.allowFetch, "allow-fetch-network", nil, "let the providers fetch URL inputs and images from this network although it is not public (loopback, private, this machine's own addresses), e.g. 127.0.0.1; repeatable")
	return c
}

// runDevnet is devnet: it sets the home up, runs the node and providers
// until ctx ends or the node halts, and stops them.
func (e *env) runDevnet(ctx context.Context, df *devnetFlags) error {
	if df.faulty < 0 || df.faulty > df.nprov {
		return usageError{fmt.Errorf("--faulty %d: want 0 to --providers (%d)", df.faulty, df.nprov)}
	}
	if !df.hwOn && df.hwTarget != 0 {
		return usageError{fmt.Errorf("--hw-challenge-time %s with --hw-challenges=false: a chain without hardware challenges has no challenge time (drop one of them)", df.hwTarget)}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(df.logLevel)); err != nil {
		return usageError{fmt.Errorf("--log-level %q: want debug, info, warn or error", df.logLevel)}
	}
	allowFetch, err := egress.ParseNetworks(df.allowFetch)
	if err != nil {
		return usageError{fmt.Errorf("--allow-fetch-network %w", err)}
	}
	lock, err := devnet.Lock(e.home) // before anything is written in the home
	if err != nil {
		return err
	}
	defer lock.Release()
	start := time.Now()
	text := e.output != "json"
	// A line on stderr for each step of the start, so that the wait says
	// what it is waiting for.
	progress := func(step string) {
		if text {
			fmt.Fprintf(e.stderr, "devnet [%4.1fs] %s\n", time.Since(start).Seconds(), step)
		}
	}
	var reset *devnet.ResetPlan
	if df.reset {
		if c, err := validator.LoadConfig(e.home); err == nil && c.Devnet {
			if reset, err = devnet.PlanReset(e.home); err != nil {
				return err
			}
			e.printReset(reset)
		}
	}
	created, err := devnet.Setup(e.home, devnet.Options{Reset: df.reset, BlockTime: df.blockTime, HWTarget: df.hwTarget, NoHWChallenges: !df.hwOn})
	if err != nil {
		return err
	}
	if created {
		progress(fmt.Sprintf("created a new chain in %s (funded keys %s)", e.home, strings.Join(devnet.DevKeys, ", ")))
	} else {
		progress(fmt.Sprintf("resuming the chain in %s", e.home))
	}
	c, moved, err := devnet.Configure(e.home, df.api)
	if err != nil {
		return err
	}
	for _, m := range moved {
		fmt.Fprintf(e.stderr, "devnet: %s (it stays there from now on)\n", m)
	}
	exampleSpec, err := devnet.WriteExamples(e.home)
	if err != nil {
		return err
	}
	var examples registryExamples
	var registries []netip.AddrPort
	if df.registry != "" {
		addr := df.registry
		if addr == "default" {
			addr = ""
		}
		var reg *devnet.Registry
		if examples, reg, err = e.startRegistry(ctx, addr, progress); err != nil {
			return err
		}
		defer reg.Close()
		// The providers pull from it, and from nothing else on loopback.
		ap, err := netip.ParseAddrPort(reg.Addr)
		if err != nil {
			return fmt.Errorf("--registry: its address %q: %w", reg.Addr, err)
		}
		registries = append(registries, ap)
	}
	ranID, ranOut := devnet.ExampleRan(e.home)
	runExample := df.nprov > 0 && (df.exampleSet && df.example || !df.exampleSet && ranID == 0)
	logger, logFile, err := openDevnetLog(ctx, e.home, level, e.stderr)
	if err != nil {
		return err
	}
	defer logFile.Close()
	progress(fmt.Sprintf("the node and providers log to %s (--log-level %s); errors are said here too", devnetLogFile(e.home), df.logLevel))
	n, err := devnet.Start(ctx, e.home, devnet.StartOptions{Logger: logger, Progress: progress, WarmExample: runExample,
		Providers: devnet.ProviderOptions{N: df.nprov, Faulty: df.faulty, Overclaim: df.overclaim, AllowRegistries: registries, AllowFetchNetworks: allowFetch}})
	if err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			n.Stop()
		}
	}()
	progress("ready")
	if err := e.printDevnet(n, c, created, reset, examples); err != nil {
		return err
	}
	switch {
	case runExample:
		go e.runExample(ctx, n.Daemon.APIURL, start)
	case text && df.nprov > 0 && ranID != 0:
		fmt.Fprintf(e.stdout, "The example job ran on this chain as job %d (its outputs: %s); --example runs it again, or: %s\n", ranID, ranOut, hint(fmt.Sprintf("--home %s job run %s --from alice", e.home, exampleSpec)))
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

// printReset says what a reset deletes and keeps, before it does.
func (e *env) printReset(p *devnet.ResetPlan) {
	w := e.stderr
	fmt.Fprintf(w, "devnet --reset: a new chain in %s. Deleting:\n", p.Home)
	for _, d := range p.Delete {
		fmt.Fprintf(w, "  %-28s %s\n", d.Path, d.What)
	}
	if len(p.DevKeys) > 0 {
		fmt.Fprintf(w, "  %-28s the devnet's own keys (new ones are made and funded)\n", "keys "+strings.Join(p.DevKeys, ", "))
	}
	if len(p.KeptKeys) > 0 || len(p.Kept) > 0 {
		fmt.Fprintf(w, "Keeping:\n")
	}
	if len(p.KeptKeys) > 0 {
		fmt.Fprintf(w, "  %-28s keys you added (on the new chain they start with no balance)\n", "keys "+strings.Join(p.KeptKeys, ", "))
	}
	for _, k := range p.Kept {
		fmt.Fprintf(w, "  %-28s %s\n", k.Path, k.What)
	}
}

// registryExamples are the examples the devnet's registry serves (none
// without --registry).
type registryExamples struct {
	container *devnet.ContainerExample
	service   *devnet.ServiceExample
}

// startRegistry serves the devnet's registry and publishes the container
// and service examples to it.
func (e *env) startRegistry(ctx context.Context, addr string, progress func(string)) (registryExamples, *devnet.Registry, error) {
	var ex registryExamples
	wd, err := os.Getwd()
	if err != nil {
		return ex, nil, err
	}
	repo, err := devnet.FindRepo(wd)
	if err != nil {
		return ex, nil, usageError{fmt.Errorf("--registry: %w", err)}
	}
	reg, moved, err := devnet.StartRegistry(e.home, addr)
	if err != nil {
		return ex, nil, fmt.Errorf("--registry: %w", err)
	}
	if moved != "" {
		fmt.Fprintf(e.stderr, "devnet: %s\n", moved)
	}
	progress(fmt.Sprintf("registry on %s; building the container example's image (go build ./examples/gpugemm)", reg.Addr))
	if ex.container, err = devnet.PublishExample(ctx, e.home, reg, repo); err == nil {
		progress("building the service example's image (go build ./examples/tinylm)")
		ex.service, err = devnet.PublishServiceExample(ctx, e.home, reg, repo)
	}
	if err != nil {
		reg.Close()
		return ex, nil, fmt.Errorf("--registry: %w", err)
	}
	return ex, reg, nil
}

// printDevnet writes where the devnet is and who is in it.
func (e *env) printDevnet(n *devnet.Net, c *validator.Config, created bool, reset *devnet.ResetPlan, examples registryExamples) error {
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
		k, err := kr.Lookup(name)
		if err != nil {
			return err
		}
		ks = append(ks, devKey{name, k.Address.String()})
	}
	// The validator's operator (a devnet made before it had one has none).
	var operator *devKey
	if k, err := kr.Lookup(devnet.OperatorKey); err == nil {
		operator = &devKey{k.Name, k.Address.String()}
	}
	api := n.Daemon.APIURL
	if e.output == "json" {
		ps := []devKey{}
		for _, a := range n.Providers.Agents {
			st := a.Status()
			ps = append(ps, devKey{st.Name, st.Address})
		}
		out := map[string]any{"chain_id": c.ChainID, "api": api, "dashboard": api + "/", "api_token": c.APIToken, "home": e.home, "created": created, "keys": ks, "providers": ps}
		if reset != nil {
			out["reset"] = reset
		}
		if operator != nil {
			out["validator_operator"] = operator
		}
		if examples.container != nil {
			out["container_example"] = examples.container
		}
		if examples.service != nil {
			out["service_example"] = examples.service
		}
		return json.NewEncoder(e.stdout).Encode(out)
	}
	verb := "resumed"
	if created {
		verb = "created"
	}
	fmt.Fprintf(e.stdout, "gpunet devnet %s: chain %s, home %s\n  api:        %s\n  dashboard:  %s/  (to submit jobs from it, the API token: %s)\n  funded keys:\n", verb, c.ChainID, e.home, api, api, c.APIToken)
	for _, k := range ks {
		fmt.Fprintf(e.stdout, "    %-6s %s\n", k.Name, k.Address)
	}
	if operator != nil {
		fmt.Fprintf(e.stdout, "  validator operated by key %s %s (delegate to it: %s)\n", operator.Name, operator.Address, hint("stake delegate operator 100sync --from alice"))
	}
	if len(n.Providers.Agents) > 0 {
		fmt.Fprintf(e.stdout, "  providers:\n")
	}
	for _, a := range n.Providers.Agents {
		st := a.Status()
		fmt.Fprintf(e.stdout, "    %-10s %s\n", st.Name, st.Address)
	}
	if container := examples.container; container != nil {
		fmt.Fprintf(e.stdout, "  registry:   %s, serving the container example %s\n              run it: %s\n", strings.SplitN(container.Tag, "/", 2)[0], container.Image, hint(fmt.Sprintf("--home %s job run %s --from alice", e.home, container.Spec)))
	}
	if svc := examples.service; svc != nil {
		fmt.Fprintf(e.stdout, "              and the service example %s (OpenAI model %s)\n              deploy it: %s\n", svc.Image, svc.Model, hint(fmt.Sprintf("--home %s service deploy %s --from alice", e.home, svc.Spec)))
		fmt.Fprintf(e.stdout, "              or its int8 network (OpenAI model %s, bit-exact on any GPU or CPU): %s\n", svc.Int8Model, hint(fmt.Sprintf("--home %s service deploy %s --from alice", e.home, svc.Int8Spec)))
	}
	fmt.Fprintf(e.stdout, "Try: %s\n     %s\n     %s\nPress Ctrl-C to stop.\n", hint("--home "+e.home+" offers --sort price"), hint("--home "+e.home+" tx send bob 5sync --from alice"), hint("--home "+e.home+" query balance bob"))
	return nil
}

// runExample runs the bundled example job and prints its verified output.
func (e *env) runExample(ctx context.Context, api string, devnetStart time.Time) {
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
		json.NewEncoder(e.stdout).Encode(map[string]any{"example_job": j.ID, "state": j.State, "out": res.OutDir, "output": string(res.Output), "cost": j.Cost + j.Fee, "seconds_since_start": time.Since(devnetStart).Seconds()})
		return
	}
	names := e.names()
	fmt.Fprintf(e.stdout, "Example job %d succeeded on %s in %.2fs (%.1fs after the devnet started); cost %s + %s fee; verified: %s. Its decrypted output (%s/out/counts.txt):\n%s",
		j.ID, names.addr(*j.Delivered), time.Since(start).Seconds(), time.Since(devnetStart).Seconds(), formatSync(j.Cost), formatSync(j.Fee), verdictText(j), res.OutDir, res.Output)
	printCaught(e.stdout, j, names)
	fmt.Fprintf(e.stdout, "Run it yourself: %s\n", hint(fmt.Sprintf("--home %s job run %s/examples/wordcount/job.yaml --from alice", e.home, e.home)))
}

// printCaught says, for each replica of j that the majority outvoted, that
// Proof of Sync caught it: the output printed is the majority's (a faulty
// devnet provider's, --faulty, is caught so).
func printCaught(w io.Writer, j *ledger.Job, names keyNames) {
	for _, a := range j.Assignments {
		if a.Outcome == ledger.OutcomeMinority {
			fmt.Fprintf(w, "Proof of Sync caught %s: its result differed from the majority's, so it was outvoted and slashed %s; the output above is the majority's\n", names.addr(a.Provider), formatSync(a.Slashed))
		}
	}
}
