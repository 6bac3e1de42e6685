package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/apiwire"
	"github.com/gpunet/gpunet/internal/attest"
	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/devnet"
	"github.com/gpunet/gpunet/internal/egress"
	"github.com/gpunet/gpunet/internal/jobspec"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/metricsserver"
	"github.com/gpunet/gpunet/internal/provider"
)

// parsePrices reads --price values: "AMOUNT" for every class this machine
// has, or "CLASS=AMOUNT" (repeatable, comma-separated). Amounts are per
// unit-hour (per GPU, or per CPU core), e.g. 0.8sync.
func parsePrices(specs []string) (all uint64, byClass map[string]uint64, err error) {
	byClass = map[string]uint64{}
	for _, spec := range specs {
		for _, part := range strings.Split(spec, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			class, amt, found := strings.Cut(part, "=")
			if !found {
				amt, class = class, ""
			}
			v, err := parseAmount(strings.TrimSuffix(strings.TrimSuffix(amt, "/h"), "/hour"))
			if err != nil {
				return 0, nil, fmt.Errorf("--price %q: %w (write e.g. 0.8sync, or RTX_4090=0.8sync,cpu=0.01sync; per unit-hour)", part, err)
			}
			if class == "" {
				all = v
			} else {
				byClass[class] = v
			}
		}
	}
	return all, byClass, nil
}

func providerCmd(e *env) *cobra.Command {
	c := &cobra.Command{Use: "provider", Short: "Rent out this machine: the provider agent"}
	c.AddCommand(providerStartCmd(e), providerStatusCmd(e), providerClaimCmd(e))
	return c
}

// providerClaimCmd pays out a provider's share of the emissions of the
// epochs that have ended (docs/ledger.md, Rewards). A provider's share is
// also paid by itself the next time it records verified work.
func providerClaimCmd(e *env) *cobra.Command {
	var from string
	c := &cobra.Command{
		Use:   "claim-rewards [--from KEY]",
		Short: "Pay KEY's rewards into its balance: its share of the ended epochs' rewards for work, and its delegations' rewards",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, key, err := e.signAndSend(cmd, from, 0, &ledger.MsgClaimRewards{})
			if err != nil {
				return err
			}
			out := claimResult{TxResult: res}
			out.Work = eventUint(res.Events, "rewards_claimed", "amount")
			out.Delegations = eventUint(res.Events, "rewards_claimed", "delegations")
			who := e.names().addr(key.Address)
			return e.print(out, func(w io.Writer) {
				fmt.Fprintf(w, "%s claimed %s: %s for work, %s from delegations\n", who, formatAmount(out.Work+out.Delegations), formatAmount(out.Work), formatAmount(out.Delegations))
				printTxResult(w, res)
			})
		},
	}
	c.Flags().StringVar(&from, "from", "", "the provider's or delegator's key (default: the only key in the keyring)")
	return c
}

// claimResult is claim-rewards' JSON: the tx's result and what it paid,
// for work (as a provider) and from delegations (usync).
type claimResult struct {
	*apiwire.TxResult
	Work        uint64 `json:"work"`
	Delegations uint64 `json:"delegations"`
}

// providerFlags are provider start's flags.
type providerFlags struct {
	from, stake, region string
	prices, executors   []string
	maxJobs             uint64
	bench               time.Duration
	faultWrong          float64
	faultWrongAnswers   float64
	faultSkip           bool
	faultFake           bool
	faultOverclaim      float64
	faultSilentService  bool
	faultJobArgs        []string
	allowNet            bool
	imageCache          string
	allowFetch          []string
	gangAddr            string
	metricsAddr         string
	checkpointGrace     time.Duration
	// label is --label; labelSet that it was given (--label "" removes
	// the label, no --label keeps the registered one).
	label    string
	labelSet bool
	// tee is --tee (tdx or sev-snp: attest with that TEE), teeCollateral
	// --tee-collateral.
	tee, teeCollateral string
	// teeGPUs is --tee-gpu: the NVML indexes of GPUs whose NVIDIA
	// evidence the agent sends.
	teeGPUs []int
}

func providerStartCmd(e *env) *cobra.Command {
	var pf providerFlags
	start := &cobra.Command{
		Use:   "start --from KEY",
		Short: "Detect and measure this machine, register it, stake, and serve until interrupted",
		Long: `Run the provider agent until interrupted.

It detects the machine (NVIDIA GPUs through NVML; without them it runs as a
CPU-only provider), measures int8 GEMM throughput and memory bandwidth,
registers (or updates) the provider KEY on the ledger in --region (required
the first time; later starts keep the region it registered with), with
--label as the name it shows beside its address (optional; later starts
keep it; --label "" removes it), keeps --stake bonded
(default: the ledger's minimum for this hardware), answers liveness
challenges, and on Ctrl-C marks the provider offline.

--price sets asks per unit-hour: one amount for every class ("0.8sync"), or
per class ("RTX_4090=0.8sync,cpu=0.01sync").

Jobs run in WebAssembly (always) and in containers (executor oci) when runc
is installed and can start a trial container; the agent logs what it
enforces for containers here (memory, CPU and process limits, seccomp,
rootfs, user, network, GPUs) and every fallback, or why it offers no
containers. Images are cached under HOME/provider/oci/images; registry
credentials come from Docker's config ($DOCKER_CONFIG or ~/.docker).

Jobs' URL inputs, and the images of container jobs and services, are
fetched from public addresses only: never from this machine's loopback,
private or link-local networks (the cloud's metadata service), multicast,
carrier-grade NAT or its own addresses, checked on the address dialled,
redirects included; a proxy from the environment (HTTPS_PROXY) is used
only when its address is allowed. --allow-fetch-network NET lets them come
from NET too (e.g. a data mirror or a registry on 10.0.0.0/8, or
127.0.0.1 for a registry on this machine); any job's owner can then learn
whether a URL or an image in NET serves the content they pin.

--tee tdx|sev-snp, inside a confidential guest of that kind, keeps the
provider attested on the chain so that trust: tee jobs are placed on it:
the agent asks the chain for a nonce, has the TEE make evidence that binds
the nonce and the provider's encryption key, adds the vendor collateral in
--tee-collateral DIR (files named as for gpunet attest verify --collateral)
and sends it, and renews it a day before it expires (docs/confidential.md).`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			pf.labelSet = cmd.Flags().Changed("label")
			return e.runProvider(cmd.Context(), &pf)
		},
	}
	f := start.Flags()
	f.StringVar(&pf.from, "from", "", "key of the provider (its identity on the ledger; required)")
	f.StringVar(&pf.stake, "stake", "", "stake to keep bonded, e.g. 200sync (default: the ledger's minimum)")
	f.StringVar(&pf.region, "region", "", "region of this machine, e.g. eu, us-east (required for a new provider; default: the region it registered with)")
	f.StringVar(&pf.label, "label", "", `a name shown beside this provider's address, e.g. "Acme GPUs #2": up to 40 bytes of letters, digits, spaces and -_.,'()&/#+; anyone may use any label, so the address stays what identifies it (default: the label it registered with; "" removes it)`)
	f.StringArrayVar(&pf.prices, "price", nil, "asks per unit-hour: AMOUNT or CLASS=AMOUNT[,…]")
	f.StringSliceVar(&pf.executors, "executors", nil, "sandboxes offered (default: wasm, plus oci when runc is installed)")
	f.Uint64Var(&pf.maxJobs, "max-jobs", 4, "jobs run at once")
	f.DurationVar(&pf.bench, "bench-time", 2*time.Second, "time spent measuring the machine at start")
	f.BoolVar(&pf.allowNet, "allow-network", false, "let container jobs that ask for it (network: true) use this machine's network")
	f.StringVar(&pf.imageCache, "image-cache", "128GiB", "disk kept for unpacked container images: past it, the least recently used images no job or service is running are removed")
	f.StringVar(&pf.gangAddr, "gang-address", "", "the IP address at which other providers reach this machine's UDP directly (its public address): the members of a gang (resources.nodes > 1) it runs post ADDRESS:PORT as their private network's endpoint (default: none; then a member here is reached only once it has sent to the others, so give it unless every provider of the gang has one)")
	f.StringArrayVar(&pf.allowFetch, "allow-fetch-network", nil, "let jobs' URL inputs and images be fetched from this network although it is not public (loopback, private, link-local, this machine's own addresses), e.g. 10.0.0.0/8; repeatable")
	f.Float64Var(&pf.faultWrong, "fault-wrong-outputs", 0, "FAULT INJECTION for tests and demos: commit a wrong result on this fraction of jobs (0 to 1)")
	f.Float64Var(&pf.faultWrongAnswers, "fault-wrong-answers", 0, "FAULT INJECTION for tests and demos: answer this fraction of the chat completions its service replicas serve wrongly, with receipts signed for the wrong answers (0 to 1)")
	f.BoolVar(&pf.faultSkip, "fault-skip-challenges", false, "FAULT INJECTION for tests and demos: ignore hardware challenges")
	f.BoolVar(&pf.faultFake, "fault-fake-challenges", false, "FAULT INJECTION for tests and demos: answer hardware challenges with a proof of a product never computed")
	f.Float64Var(&pf.faultOverclaim, "fault-overclaim", 0, "FAULT INJECTION for tests and demos: declare this many times the measured int8 throughput")
	f.BoolVar(&pf.faultSilentService, "fault-silent-service", false, "FAULT INJECTION for tests and demos: report service replicas ready but answer nothing that nodes send them (witnesses see it: never paid, then released)")
	f.StringArrayVar(&pf.faultJobArgs, "fault-job-args", nil, "FAULT INJECTION for tests and demos: run every job with these arguments in place of the ones its spec gives, one argument a flag (repeat it), e.g. a float job's cheating variant, or another seed to stand for another GPU's low bits")
	f.StringVar(&pf.metricsAddr, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics (host:port; default: off)")
	f.DurationVar(&pf.checkpointGrace, "checkpoint-grace", provider.DefaultCheckpointGrace, "when the agent stops (Ctrl-C), how long each running job that checkpoints has to take its last checkpoint")
	f.StringVar(&pf.tee, "tee", "", "attest this machine's TEE to the chain: tdx or sev-snp (run inside such a confidential guest; default: off)")
	f.IntSliceVar(&pf.teeGPUs, "tee-gpu", nil, "attest this NVIDIA GPU (its NVML index; repeatable) in confidential-computing mode to the chain, beside --tee's evidence or alone: its identity then comes from its certificate")
	f.StringVar(&pf.teeCollateral, "tee-collateral", "", "with --tee, the directory of vendor collateral (tcb_info.json, qe_identity.json, … or vcek.der, cert_chain.pem, crl.der)")
	start.MarkFlagRequired("from")
	return start
}

// runProvider is provider start: it checks the flags, sets the agent up
// in --home and runs it until ctx ends.
func (e *env) runProvider(ctx context.Context, pf *providerFlags) error {
	kr, err := e.keyring()
	if err != nil {
		return err
	}
	key, err := kr.Get(pf.from)
	if err != nil {
		return err
	}
	cl, err := e.client()
	if err != nil {
		return err
	}
	var stakeAmt uint64
	if pf.stake != "" {
		if stakeAmt, err = parseAmount(pf.stake); err != nil {
			return usageError{fmt.Errorf("--stake: %w", err)}
		}
	}
	all, byClass, err := parsePrices(pf.prices)
	if err != nil {
		return usageError{err}
	}
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	o := provider.Options{
		Key: key, Stake: stakeAmt, MaxJobs: pf.maxJobs,
		Executors: pf.executors, BenchBudget: pf.bench, AllowNetwork: pf.allowNet, Logger: logger,
		Prices: providerPrices(all, byClass), CheckpointGrace: pf.checkpointGrace,
	}
	if o.TEE, err = teeOptions(pf.tee, pf.teeCollateral, pf.teeGPUs); err != nil {
		return err
	}
	if pf.gangAddr != "" {
		a, err := netip.ParseAddr(pf.gangAddr)
		if err != nil || a.IsUnspecified() || a.IsMulticast() || a.Zone() != "" {
			return usageError{fmt.Errorf("--gang-address %q: want this machine's unicast IP address, e.g. 203.0.113.7", pf.gangAddr)}
		}
		o.GangHost = a.Unmap()
	}
	if o.AllowFetchNetworks, err = egress.ParseNetworks(pf.allowFetch); err != nil {
		return usageError{fmt.Errorf("--allow-fetch-network %w", err)}
	}
	imageCache, err := jobspec.ParseBytes(pf.imageCache)
	if err == nil && (imageCache < minImageCache || imageCache > math.MaxInt64) {
		err = fmt.Errorf("want at least %s", jobspec.Bytes(minImageCache))
	}
	if err != nil {
		return usageError{fmt.Errorf("--image-cache %s: %v", pf.imageCache, err)}
	}
	if pf.checkpointGrace <= 0 || pf.checkpointGrace > 10*time.Minute {
		return usageError{fmt.Errorf("--checkpoint-grace %s: want more than 0 and at most 10m", pf.checkpointGrace)}
	}
	if pf.faultWrong < 0 || pf.faultWrong > 1 {
		return usageError{fmt.Errorf("--fault-wrong-outputs %g: want a fraction from 0 to 1", pf.faultWrong)}
	}
	if pf.faultWrongAnswers < 0 || pf.faultWrongAnswers > 1 {
		return usageError{fmt.Errorf("--fault-wrong-answers %g: want a fraction from 0 to 1", pf.faultWrongAnswers)}
	}
	if pf.labelSet {
		if why := ledger.LabelProblem(pf.label); why != "" {
			return usageError{fmt.Errorf("--label %q: %s", pf.label, why)}
		}
	}
	if pf.faultOverclaim < 0 {
		return usageError{fmt.Errorf("--fault-overclaim %g: want a factor ≥ 1", pf.faultOverclaim)}
	}
	if len(pf.faultJobArgs) > maxFaultJobArgs {
		return usageError{fmt.Errorf("--fault-job-args given %d times: want at most %d arguments", len(pf.faultJobArgs), maxFaultJobArgs)}
	}
	if pf.faultWrong > 0 || pf.faultWrongAnswers > 0 || pf.faultSkip || pf.faultFake || pf.faultOverclaim > 1 || pf.faultSilentService || len(pf.faultJobArgs) > 0 {
		o.Faults = &provider.Faults{WrongOutputs: pf.faultWrong, WrongAnswers: pf.faultWrongAnswers, SkipChallenges: pf.faultSkip, FakeChallenges: pf.faultFake, OverclaimFactor: pf.faultOverclaim,
			SilentService: pf.faultSilentService}
		shown := fmt.Sprintf("%+v", *o.Faults)
		if args := pf.faultJobArgs; len(args) > 0 {
			o.Faults.JobArgs = func(uint64, []string) []string { return append([]string(nil), args...) }
			shown = fmt.Sprintf("%s, every job run with the arguments %q", shown, args)
		}
		fmt.Fprintf(e.stderr, "WARNING: FAULT INJECTION is on (%s): this provider misbehaves on purpose and will be slashed\n", shown)
	}
	// Last of the checks, as it asks the node: the flags are checked
	// first.
	if o.Region, err = e.providerRegion(ctx, cl, key.Address, key.Name, pf.region); err != nil {
		return err
	}
	if o.Label, err = e.providerLabel(ctx, cl, key.Address, key.Name, pf.label, pf.labelSet); err != nil {
		return err
	}
	sb, err := provider.OpenSandboxes(ctx, e.home, provider.SandboxOptions{Logger: logger, AllowNetwork: pf.allowNet, AllowFetchNetworks: o.AllowFetchNetworks, ImageCacheBytes: int64(imageCache)})
	if err != nil {
		return err
	}
	defer sb.Close()
	var no *provider.NotOfferedError
	if err := sb.Offers(pf.executors); errors.As(err, &no) {
		why := ""
		if no.Why != "" {
			why = ": " + no.Why
		}
		return usageError{fmt.Errorf("--executors %s: this machine cannot offer it%s", no.Executor, why)}
	}
	if pf.metricsAddr != "" {
		reg := metricsserver.NewRegistry()
		o.Metrics = provider.NewMetrics(reg)
		url, err := metricsserver.Serve(ctx, pf.metricsAddr, reg)
		if err != nil {
			return usageError{fmt.Errorf("--metrics %s: %w", pf.metricsAddr, err)}
		}
		fmt.Fprintf(e.stderr, "metrics: %s\n", url)
	}
	if e.output == "json" {
		json.NewEncoder(e.stdout).Encode(map[string]string{"name": key.Name, "address": key.Address.String(), "node": cl.Base()})
	} else {
		fmt.Fprintf(e.stdout, "provider %s (%s) starting against %s; Ctrl-C stops it and marks it offline\n", key.Name, key.Address, cl.Base())
	}
	return provider.NewInHome(e.home, cl, sb, o).Run(ctx)
}

// providerRegion is the region provider start registers name (address
// who) in: flag, the --region given; without it, the region the provider
// registered with before. A new provider has none to keep: it must say
// where the machine is, and the error lists the regions this network's
// providers use. (Guessing, say "eu" for everyone, would put machines in
// the wrong region silently, and jobs that prefer a region would pick
// them.)
func (e *env) providerRegion(ctx context.Context, cl *chainclient.Client, who address.Address, name, flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	p, err := cl.Provider(ctx, who)
	var ae *chainclient.APIError
	switch {
	case err == nil && p.Record != nil && p.Record.Region != "":
		fmt.Fprintf(e.stderr, "region: %s, as %s registered it (--region changes it)\n", p.Record.Region, name)
		return p.Record.Region, nil
	case err == nil, errors.As(err, &ae) && ae.Status == http.StatusNotFound:
		used := ""
		if offs, err := cl.Providers(ctx); err == nil {
			var rs []string
			for _, o := range offs {
				if o.Region != "" && !slices.Contains(rs, o.Region) {
					rs = append(rs, o.Region)
				}
			}
			if len(rs) > 0 {
				slices.Sort(rs)
				used = " (this network's providers are in " + strings.Join(rs, ", ") + ")"
			}
		}
		return "", usageError{fmt.Errorf("--region is required for a new provider: say where this machine is, e.g. --region eu or --region us-east%s", used)}
	}
	return "", fmt.Errorf("no --region, and %s's registration (whose region it would keep) could not be read: %w; pass --region", name, err)
}

// providerLabel is the label provider start declares for name (address
// who): flag when --label was given (set; "" removes the label), else the
// label it registered with, "" for a new provider. A registration that
// cannot be read is an error, not "no label": the agent would then
// declare none and remove the label it has.
func (e *env) providerLabel(ctx context.Context, cl *chainclient.Client, who address.Address, name, flag string, set bool) (string, error) {
	if set {
		return flag, nil
	}
	p, err := cl.Provider(ctx, who)
	switch {
	case chainclient.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("no --label, and %s's registration (whose label it would keep) could not be read: %w; pass --label (\"\" for none)", name, err)
	case p.Record != nil && p.Record.Label != "":
		fmt.Fprintf(e.stderr, "label: %s, as %s registered it (--label changes it, --label \"\" removes it)\n", labelCell(p.Record.Label), name)
		return p.Record.Label, nil
	}
	return "", nil
}

func providerStatusCmd(e *env) *cobra.Command {
	var statusFrom string
	status := &cobra.Command{
		Use:   "status [--from KEY]",
		Short: "Show what the agent detected, measured, registered and earned",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			name := statusFrom
			if name == "" {
				var err error
				if name, err = e.onlyProvider(); err != nil {
					return err
				}
			}
			st, err := provider.ReadStatus(e.home, name)
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("no agent has run as %q in %s (start one with `%s`)", name, e.home, hint("provider start --from "+name+" --region REGION"))
			}
			if err != nil {
				return err
			}
			out := struct {
				Agent provider.Status       `json:"agent"`
				Chain *apiwire.ProviderBody `json:"chain"`
				Error string                `json:"chain_error,omitempty"`
				// UnderStaked is set when the provider is online with
				// less than the minimum stake: what it lacks, and the
				// command that fixes it.
				UnderStaked *stakeFix `json:"under_staked,omitempty"`
			}{Agent: st}
			names := e.names()
			if a, err := address.Parse(st.Address); err == nil {
				if cl, err := e.client(); err != nil {
					out.Error = err.Error()
				} else if out.Chain, err = cl.Provider(cmd.Context(), a); err != nil {
					out.Error = err.Error()
				} else if out.UnderStaked, err = stakeFixOf(cmd.Context(), cl, out.Chain, names); err != nil {
					out.Error = err.Error()
				}
			}
			return e.print(out, func(w io.Writer) {
				printAgent(w, &st)
				if out.Chain == nil {
					fmt.Fprintf(w, "ledger:      unavailable (%s)\n", out.Error)
					return
				}
				printProvider(w, out.Chain)
				if out.UnderStaked != nil {
					printStakeFix(w, out.UnderStaked, names)
				}
			})
		},
	}
	status.Flags().StringVar(&statusFrom, "from", "", "the provider's key (default: the only one that ran in --home)")
	return status
}

// onlyProvider names the agent provider status means without --from: the
// only agent that has run from --home, or, in a devnet's home, the only one
// besides the devnet's own (provider-N); otherwise it says which there are.
func (e *env) onlyProvider() (string, error) {
	all := provider.StatusNames(e.home)
	var mine []string
	for _, n := range all {
		if !devnet.IsDevKey(n) {
			mine = append(mine, n)
		}
	}
	switch {
	case len(all) == 1:
		return all[0], nil
	case len(mine) == 1:
		return mine[0], nil
	case len(all) == 0:
		return "", fmt.Errorf("no provider agent has run from %s: start one with `%s`, or pass the --home it runs from", e.home, hint("provider start --from KEY --region REGION"))
	}
	return "", usageError{fmt.Errorf("%d provider agents have run from %s (%s): name one with --from KEY", len(all), e.home, strings.Join(all, ", "))}
}

// printAgent writes what an agent says of itself for people.
func printAgent(w io.Writer, st *provider.Status) {
	fmt.Fprintf(w, "provider %s (%s)\n", st.Name, st.Address)
	if st.Inventory != nil {
		fmt.Fprintf(w, "detected:    %s\n", st.Inventory.Summary())
	}
	if st.Figures != nil {
		fmt.Fprintf(w, "measured:    %s int8 TOPS, %s GB/s memory bandwidth (%s)\n", sig(st.Figures.Int8TOPS), sig(st.Figures.MemBandwidthGBs), st.Figures.Device)
	}
	for _, u := range slices.Sorted(maps.Keys(st.GPUFigures)) {
		f := st.GPUFigures[u]
		fmt.Fprintf(w, "measured:    %s int8 TOPS, %s GB/s memory bandwidth (%s, kernel %s)\n", sig(f.Int8TOPS), sig(f.MemBandwidthGBs), f.Device, f.Kernel)
	}
	for _, n := range st.GPUNotes {
		fmt.Fprintf(w, "gpu:         %s\n", n)
	}
	fmt.Fprintf(w, "agent:       connected %v at %s\n", st.Connected, st.UpdatedAt.Format(time.RFC3339))
	if st.LastError != "" {
		fmt.Fprintf(w, "last error:  %s\n", st.LastError)
	}
	for _, n := range st.Sandboxes {
		fmt.Fprintf(w, "sandbox:     %s\n", n)
	}
}

func providerPrices(all uint64, byClass map[string]uint64) map[string]uint64 {
	if all != 0 {
		byClass[provider.AnyClass] = all
	}
	return byClass
}

// printProvider writes a provider's ledger record for people.
func printProvider(w io.Writer, p *apiwire.ProviderBody) {
	r := p.Record
	if r.Label != "" {
		fmt.Fprintf(w, "label:       %s (set by the provider; any provider may use any label: the address is who it is)\n", labelCell(r.Label))
	}
	fmt.Fprintf(w, "registered:  at height %d (updated %d), region %s, executors %s\n", r.RegisteredHeight, r.UpdatedHeight, r.Region, strings.Join(r.Executors, ","))
	gpus, unit := fmt.Sprintf("%d× %s (%s each)", p.Count, p.GPU, formatGiB(p.VRAM)), "GPU"
	if p.Count == 0 {
		gpus, unit = "no GPU", "core"
	}
	fmt.Fprintf(w, "offer:       %s, %d cores, %s RAM, %s disk, %s int8 TOPS, %s SYNC/h per %s\n", gpus, p.CPU, formatGiB(p.RAM), formatGiB(p.Disk), sig(p.TOPS), sig(p.Price), unit)
	fmt.Fprintf(w, "online:      %v (schedulable %v)\n", r.Online, p.Schedulable)
	fmt.Fprintf(w, "stake:       %s (minimum %s)\n", formatAmount(r.Stake), formatAmount(p.RequiredStake))
	if r.Delegated > 0 {
		fmt.Fprintf(w, "delegated:   %s (backs the minimum with the stake)\n", formatAmount(r.Delegated))
	}
	for _, u := range p.Unbonding {
		fmt.Fprintf(w, "unbonding:   %s until height %d\n", formatAmount(u.Amount), u.CompletionHeight)
	}
	fmt.Fprintf(w, "reputation:  %.3f, uptime %.1f%% (%d answered, %d missed)\n", p.Reputation, 100*p.Uptime, r.Answered, r.Missed)
	if r.Challenge != nil {
		fmt.Fprintf(w, "challenge:   open since height %d, answer by %d\n", r.Challenge.Height, r.Challenge.Deadline)
	}
	fmt.Fprintf(w, "results:     %d validated by a replica, %d outvoted, %d not revealed\n", r.Validated, r.Invalid, r.Unrevealed)
	for _, c := range r.Classes {
		fmt.Fprintf(w, "  %-10s %d in a row (spot audit rate now %s)\n", c.Class, c.Consecutive, auditRate(c.Consecutive))
	}
	printHardware(w, r)
	printAttestation(w, &p.Attestation)
	if r.Slashed > 0 {
		fmt.Fprintf(w, "slashed:     %s in all\n", formatAmount(r.Slashed))
		for _, e := range r.SlashEvents {
			fmt.Fprintf(w, "  height %d: %s, %s\n", e.Height, formatAmount(e.Amount), e.Reason)
		}
	}
	fmt.Fprintf(w, "earned:      %s\n", formatAmount(r.Earned))
}

// printAttestation writes what a provider's TEE evidence proved, as of
// the block time the API answered at (docs/confidential.md).
func printAttestation(w io.Writer, a *apiwire.ProviderAttestation) {
	defer printAttestedGPUs(w, a.GPUs)
	if a.State == "" || a.State == apiwire.AttestNone {
		fmt.Fprintf(w, "tee:         not attested (trust: tee jobs are not placed on it)\n")
		return
	}
	expiry := time.Unix(a.Expiry, 0).UTC().Format(time.RFC3339)
	switch a.State {
	case apiwire.AttestValid:
		fmt.Fprintf(w, "tee:         attested %s, valid until %s (accepted at height %d)\n", a.Kind, expiry, a.Height)
	case apiwire.AttestExpired:
		fmt.Fprintf(w, "tee:         expired: %s evidence of height %d counted until %s; trust: tee jobs are not placed on it until it attests again\n", a.Kind, a.Height, expiry)
	case apiwire.AttestKeyChanged:
		fmt.Fprintf(w, "tee:         not valid: %s evidence of height %d is over another key than the one it declares now; it must attest again\n", a.Kind, a.Height)
	default:
		fmt.Fprintf(w, "tee:         %s (%s evidence of height %d, until %s)\n", a.State, a.Kind, a.Height, expiry)
	}
	fmt.Fprintf(w, "  measurement:  %s\n", a.Measurement)
	fmt.Fprintf(w, "  tcb status:   %s\n", orNone(a.TCBStatus, "(none given)"))
	fmt.Fprintf(w, "  attested key: %s\n", a.Key)
}

// printAttestedGPUs writes the GPUs whose NVIDIA evidence the chain
// verified: the identity from each GPU's certificate, the UUID it was
// attested under, until when.
func printAttestedGPUs(w io.Writer, gpus []apiwire.AttestedGPU) {
	for _, g := range gpus {
		state := "until"
		if g.State == apiwire.AttestExpired {
			state = "expired at"
		}
		mode := ""
		if g.Mode != "" {
			mode = ", " + g.Mode
		}
		if g.CC != "" {
			mode += ", CC " + g.CC + " (NVML's word, not signed)"
		}
		fmt.Fprintf(w, "gpu attested: %s as %s (height %d%s), %s %s\n", g.ID, g.UUID, g.Height, mode, state, time.Unix(g.Expiry, 0).UTC().Format(time.RFC3339))
	}
}

// printHardware writes a provider's hardware challenges device by device:
// the CPU and each GPU, what it claims and the ledger's ruling on it, and
// the effective throughput (the ledger's own sum, which offers and the
// scheduler use).
func printHardware(w io.Writer, r *ledger.Provider) {
	ch := r.Challenges
	busy := ""
	if ch.Busy > 0 {
		busy = fmt.Sprintf(", %d busy (a GPU job held the GPU: not a miss)", ch.Busy)
	}
	fmt.Fprintf(w, "hardware:    challenges %d passed, %d late (measured), %d missed, %d failed (slashed)%s; effective %s\n",
		ch.Passed, ch.Late, ch.Missed, ch.Failed, busy, formatTOPS(r.EffectiveGOPS()))
	if ch.MissesInARow > 0 {
		fmt.Fprintf(w, "             %d missed in a row: is the agent running? (a run of params.hw_miss_limit is slashed)\n", ch.MissesInARow)
	}
	labels := make([]string, r.Devices())
	width := 0
	for d := range labels {
		labels[d] = deviceLabel(r, uint64(d))
		width = max(width, utf8.RuneCountInString(labels[d])) // as %-*s pads
	}
	for d, l := range labels {
		fmt.Fprintf(w, "  %-*s  %s\n", width, l, deviceStanding(r, uint64(d)))
	}
	if ch.LastFailure != "" {
		fmt.Fprintf(w, "  last failure: %s\n", ch.LastFailure)
	}
	if c := r.HWChallenge; c != nil {
		on := "cpu"
		if c.Device > 0 {
			on = fmt.Sprintf("gpus[%d] %s", c.Device-1, orNone(c.DeviceUUID, "(no uuid)"))
		}
		fmt.Fprintf(w, "  open: %d×%d×%d GEMM on %s at %s, issued at height %d", c.N, c.K, c.M, on, formatTOPS(c.ClaimedGOPS), c.Height)
		if c.Root != nil {
			fmt.Fprintf(w, ", committed")
		}
		fmt.Fprintln(w)
	}
}

// deviceLabel names device d of r as the ledger numbers them: the CPU, or
// gpus[d-1] with its class and UUID.
func deviceLabel(r *ledger.Provider, d uint64) string {
	if d == 0 {
		return fmt.Sprintf("cpu (%d cores)", r.Inventory.CPUCores)
	}
	g := r.Inventory.GPUs[d-1]
	return fmt.Sprintf("gpus[%d] %s %s", d-1, g.Class, orNone(g.UUID, "(no uuid)"))
}

// deviceStanding is device d's claim, the ruling on it, and what the
// ledger counts for it.
func deviceStanding(r *ledger.Provider, d uint64) string {
	claim, ruling := r.DeviceClaim(d), r.DeviceRuling(d)
	var st string
	switch {
	case claim == 0:
		st = "claims nothing, never challenged"
	case !ruling.Proven:
		st = fmt.Sprintf("claims %s, not yet challenged", formatTOPS(claim))
	case ruling.ProvenGOPS >= claim:
		st = fmt.Sprintf("claims %s, proven %s", formatTOPS(claim), formatTOPS(claim))
	default:
		st = fmt.Sprintf("claims %s, proven only %s", formatTOPS(claim), formatTOPS(ruling.ProvenGOPS))
	}
	if ruling.Busy > 0 {
		st += fmt.Sprintf(" (%d busy in a row: rechecked when its GPU work ends)", ruling.Busy)
	}
	return fmt.Sprintf("%s; counts %s", st, formatTOPS(r.DeviceGOPS(d)))
}

// formatTOPS writes an int8 figure in GOPS as TOPS.
func formatTOPS(gops uint64) string { return sig(float64(gops)/1e3) + " TOPS" }

func orNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

// auditRate is the chance a spot job of a provider with this record is
// audited, with the default parameters.
func auditRate(consecutive uint64) string {
	return fmt.Sprintf("%.1f%%", float64(ledger.AuditRatePPM(consecutive, ledger.DefaultParams()))/1e4)
}

// teeOptions are the agent's attestation options from --tee and
// --tee-collateral.
func teeOptions(kind, dir string, gpus []int) (provider.TEEOptions, error) {
	var gp []provider.GPUProducer
	for _, i := range gpus {
		if i < 0 || slices.Contains(gp, provider.GPUProducer(attest.GPUProducer{Index: i})) {
			return provider.TEEOptions{}, usageError{fmt.Errorf("--tee-gpu %d: want each GPU's NVML index once", i)}
		}
		gp = append(gp, attest.GPUProducer{Index: i})
	}
	if kind == "" {
		if dir != "" {
			return provider.TEEOptions{}, usageError{fmt.Errorf("--tee-collateral needs --tee tdx or --tee sev-snp")}
		}
		return provider.TEEOptions{GPUs: gp}, nil
	}
	k, err := attest.ParseKind(kind)
	if err != nil {
		return provider.TEEOptions{}, usageError{fmt.Errorf("--tee: %v", err)}
	}
	o := provider.TEEOptions{CollateralDir: dir, GPUs: gp}
	switch k {
	case attest.KindTDX:
		o.Producer = attest.TDXProducer{}
	case attest.KindSEVSNP:
		o.Producer = attest.SNPProducer{}
	default:
		return provider.TEEOptions{}, usageError{fmt.Errorf("--tee %s: want tdx or sev-snp (NVIDIA GPUs: --tee-gpu INDEX)", k)}
	}
	if dir != "" {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return provider.TEEOptions{}, usageError{fmt.Errorf("--tee-collateral %s: not a directory", dir)}
		}
	}
	return o, nil
}

// minImageCache is the least --image-cache: a bound smaller than a usual
// image would evict every image after each job.
const minImageCache = 1 << 30

// maxFaultJobArgs bounds --fault-job-args: a test's arguments, not a
// workload's.
const maxFaultJobArgs = 64
