package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/address"
	"github.com/gpunet/gpunet/internal/daemon"
	"github.com/gpunet/gpunet/internal/homelock"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/validator"
)

func initCmd(e *env) *cobra.Command {
	var (
		chainID    string
		validators int
		blockTime  time.Duration
		accounts   []string
		treasury   string
		hwOn       bool
		vals       validatorInitFlags
		sync       syncInitFlags
		netf       netFlags
	)
	c := &cobra.Command{
		Use:   "init",
		Short: "Write a new network's home(s): validator keys, genesis, config",
		Long: `Write a new network into --home.

With --validators 1 (the default) --home becomes one validator's home; run it
with 'gpunet node --home DIR'. With --validators N, --home gets N homes,
node0 … nodeN-1, on distinct free loopback ports, each a peer of the others;
start one 'gpunet node --home DIR/nodeI' per home.

The nodes listen on 127.0.0.1 unless --listen HOST (free ports there) or,
with one validator, --api, --p2p and --rpc HOST:PORT say otherwise;
--external-address and --advertise-api are what other machines dial,
--seeds and --persistent-peers whom the node dials. All of it goes into
config/gpunet.yaml ('gpunet node' takes the same flags to change it;
docs/network.md, "Addresses and ports").

--account ADDR=AMOUNT (repeatable) funds accounts at genesis.

With --join URL (the API of any node of a running network) --home becomes a
full node of that network instead: its chain id, genesis (checked against
--genesis-hash, the genesis file's SHA-256, when given: ask someone you
trust for it) and peers come from that node, with new keys; when the
network serves state snapshots, the node restores the latest at its first
start (state sync) rather than replaying the chain. Run it with
'gpunet node --home DIR'.

Before it writes anything, init --join verifies the header state sync will
trust with CometBFT's light client, from the genesis (its first block must
be signed by the genesis's validators) or from a header you pin with
--trust-height and --trust-hash, and checks it against the CometBFT RPC of
the join node and of other nodes (those it names, and --witness URL): it
refuses, naming the server, when one of them serves another chain. Unless
you pin a header, one RPC server besides the join node's must answer, so
the new machine needs to reach the CometBFT RPC (port 26657 by default) of
two nodes.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			netOpts, err := netf.options()
			if err != nil {
				return err
			}
			if sync.join != "" {
				return sync.runJoin(cmd, e, netOpts)
			}
			g := ledger.Genesis{Params: ledger.DefaultParams()}
			if treasury != "" {
				t, err := parseAmount(treasury)
				if err != nil {
					return usageError{fmt.Errorf("--treasury %q: %w", treasury, err)}
				}
				g.Treasury = t
			}
			for _, spec := range accounts {
				ga, err := parseGenesisAccount(e, spec)
				if err != nil {
					return usageError{fmt.Errorf("--account %q: %w", spec, err)}
				}
				g.Accounts = append(g.Accounts, ga)
			}
			opts := validator.InitOptions{ChainID: chainID, Validators: validators, Genesis: g, BlockTime: blockTime, Net: netOpts}
			if err := vals.apply(e, &opts); err != nil {
				return err
			}
			if !hwOn {
				opts.Genesis.Params.HWRatePPM = 0 // over --genesis-params
			}
			if err := sync.apply(&opts); err != nil {
				return err
			}
			homes, err := validator.Init(e.home, opts)
			if err != nil {
				return err
			}
			out := struct {
				ChainID string   `json:"chain_id"`
				Homes   []string `json:"homes"`
			}{chainID, homes}
			return e.print(out, func(w io.Writer) {
				fmt.Fprintf(w, "Initialised chain %q with %d validator(s):\n", chainID, len(homes))
				for _, h := range homes {
					fmt.Fprintf(w, "  gpunet node --home %s\n", h)
				}
			})
		},
	}
	c.Flags().StringVar(&chainID, "chain-id", "gpunet-local", "chain id")
	c.Flags().IntVar(&validators, "validators", 1, "number of validators")
	c.Flags().DurationVar(&blockTime, "block-time", time.Second, "pause after each block")
	c.Flags().StringArrayVar(&accounts, "account", nil, "genesis allocation ADDR=AMOUNT or KEYNAME=AMOUNT (repeatable)")
	c.Flags().StringVar(&treasury, "treasury", "", "the treasury's genesis balance (it pays spot audits), e.g. 100000SYNC")
	c.Flags().BoolVar(&hwOn, "hw-challenges", true, "give providers hardware challenges (params.hw_rate_ppm); --hw-challenges=false: none, whatever --genesis-params says, so that nothing on the chain depends on how busy its machines are (for tests)")
	vals.register(c)
	sync.register(c)
	netf.register(c, false)
	return c
}

func parseGenesisAccount(e *env, spec string) (ledger.GenesisAccount, error) {
	var ga ledger.GenesisAccount
	for i := len(spec) - 1; i >= 0; i-- {
		if spec[i] == '=' {
			a, err := e.resolveAddress(spec[:i])
			if err != nil {
				return ga, err
			}
			amt, err := parseAmount(spec[i+1:])
			if err != nil {
				return ga, err
			}
			return ledger.GenesisAccount{Address: a, Balance: amt}, nil
		}
	}
	return ga, fmt.Errorf("want ADDR=AMOUNT, e.g. %s=1000sync", address.Address{1}.String())
}

func nodeCmd(e *env) *cobra.Command {
	var netf netFlags
	c := &cobra.Command{
		Use:   "node",
		Short: "Run the validator of --home until interrupted",
		Long: `Run the validator of --home until interrupted.

--listen, --api, --p2p, --rpc, --external-address, --advertise-api, --seeds,
--persistent-peers, --addr-book-strict and --allow-duplicate-ip change the
home's config/gpunet.yaml before the node starts (each value checked, each
new listen address tried first), so that every later start uses them
(docs/network.md, "Addresses and ports").`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			lock, err := homelock.Acquire(e.home, "gpunet node") // before anything is written in the home
			if err != nil {
				return err
			}
			defer lock.Release()
			if err := netf.applyToHome(e.home); err != nil {
				return err
			}
			logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			d, err := daemon.Start(cmd.Context(), e.home, daemon.Options{Logger: logger})
			if err != nil {
				return err
			}
			c := d.Node.Config()
			p2p := d.Node.NodeID() + "@" + c.P2PAddress()
			strict, dupIP := c.P2PPolicy()
			if e.output == "json" {
				json.NewEncoder(e.stdout).Encode(map[string]any{"chain_id": c.ChainID, "moniker": c.Moniker, "api": d.APIURL, "dashboard": d.APIURL + "/", "home": e.home,
					"node_id": d.Node.NodeID(), "p2p": p2p, "p2p_listen": c.P2P, "rpc": c.RPC, "addr_book_strict": strict, "allow_duplicate_ip": dupIP})
			} else {
				book := "address book strict, one peer per IP"
				if !strict || dupIP {
					book = fmt.Sprintf("addr_book_strict %v, allow_duplicate_ip %v: for loopback and private networks", strict, dupIP)
				}
				rpc := c.RPC
				if rpc == "" {
					rpc = "off"
				}
				fmt.Fprintf(e.stdout, "node %s of chain %s running\n  api:       %s\n  dashboard: %s/\n  metrics:   %s/metrics\n  p2p:       %s (listening on %s; %s)\n  rpc:       %s\n  home:      %s\n  logs:      %s/logs/cometbft.log\nPress Ctrl-C to stop.\n",
					c.Moniker, c.ChainID, d.APIURL, d.APIURL, d.APIURL, p2p, c.P2P, book, rpc, e.home, e.home)
			}
			select {
			case <-cmd.Context().Done():
			case <-d.Halted():
				return haltedError(d)
			}
			fmt.Fprintln(e.stderr, "stopping…")
			return d.Stop()
		},
	}
	netf.register(c, true)
	return c
}

// haltedError stops d, whose consensus halted, and returns the error that
// `node` and `devnet` end with: it names the cause and wraps
// validator.ErrConsensusHalted, which Run maps to ExitHalted.
func haltedError(d *daemon.Daemon) error {
	err := fmt.Errorf("validator halted: %w; exiting with status %d so that a supervisor restarts it (fix the cause first if it persists)", d.Err(), ExitHalted)
	if serr := d.StopHalted(); serr != nil {
		return errors.Join(err, fmt.Errorf("stopping the halted node: %w", serr))
	}
	return err
}
