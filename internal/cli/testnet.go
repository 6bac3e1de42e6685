package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/testnet"
)

// testnetFile is where `testnet up` describes the running net, in --dir,
// for `testnet exec` to find the hosts' namespaces.
const testnetFile = "testnet.json"

// testnetInfo is what `testnet up` prints and keeps in testnetFile.
type testnetInfo struct {
	ChainID string        `json:"chain_id"`
	Dir     string        `json:"dir"`
	Delay   string        `json:"delay"`
	Jitter  string        `json:"jitter"`
	Hosts   []testnetHost `json:"hosts"`
}

type testnetHost struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Addr      string `json:"addr"`
	API       string `json:"api,omitempty"`
	Home      string `json:"home,omitempty"`
	Validator bool   `json:"validator,omitempty"`
}

func testnetCmd(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "testnet",
		Short: "Run a network of validators, full nodes and client hosts in network namespaces, with delay between them (root)",
	}
	c.AddCommand(testnetUpCmd(e), testnetExecCmd(e))
	return c
}

func testnetUpCmd(e *env) *cobra.Command {
	var (
		o      testnet.ClusterOptions
		hosts  []string
		delay  time.Duration
		jitter time.Duration
	)
	c := &cobra.Command{
		Use:   "up",
		Short: "Start a testnet and run it until Ctrl-C",
		Long: `Start a testnet: each validator (node0 …), full node (full0 …) and extra host
(--hosts) in its own network namespace with its own address 10.77.0.X, and
every packet between two hosts delayed by --delay ± --jitter (one way) by a
router in this process: a userspace netem over TUN devices, for kernels
without sch_netem. It needs root and the ip command.

The homes are written by 'gpunet init' under --dir/net and pointed at the
hosts' addresses (init encrypts the validators' operator keys with
$GPUNET_KEYRING_PASSPHRASE, which sudo drops unless told to keep it:
sudo --preserve-env=GPUNET_KEYRING_PASSPHRASE, or sudo -E); each node's
log is --dir/logs/NAME.log. It prints each host's name, namespace, address
and API, and runs until Ctrl-C, then stops the nodes and removes the
namespaces. Run commands on a host with
'gpunet testnet exec HOST -- CMD …'.`,
		Example: `  sudo --preserve-env=GPUNET_KEYRING_PASSPHRASE gpunet testnet up --validators 4 --full-nodes 1 --delay 50ms --jitter 10ms --dir /tmp/tn
  sudo gpunet testnet exec consumer --dir /tmp/tn -- gpunet status --node http://10.77.0.2:26680`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Hosts = hosts
			o.Net = testnet.Options{Delay: delay, Jitter: jitter}
			bin, err := os.Executable()
			if err != nil {
				return err
			}
			o.Bin = bin
			if o.Dir, err = filepath.Abs(o.Dir); err != nil {
				return err
			}
			if _, err := os.Stat(filepath.Join(o.Dir, "net")); err == nil {
				return usageError{fmt.Errorf("--dir %s holds a testnet already (remove it or choose another)", o.Dir)}
			}
			return e.runTestnet(cmd.Context(), o)
		},
	}
	f := c.Flags()
	f.IntVar(&o.Validators, "validators", 4, "validators, each on its own host")
	f.IntVar(&o.FullNodes, "full-nodes", 0, "full nodes, each on its own host")
	f.StringSliceVar(&hosts, "hosts", []string{"provider", "consumer"}, "more hosts, without a node")
	f.DurationVar(&delay, "delay", 0, "one-way delay between any two hosts")
	f.DurationVar(&jitter, "jitter", 0, "jitter added to the delay, uniform in ±jitter (packets keep their order)")
	f.StringVar(&o.Dir, "dir", "gpunet-testnet", "directory for the homes, the logs and testnet.json")
	f.StringVar(&o.ChainID, "chain-id", "testnet", "chain id")
	f.DurationVar(&o.BlockTime, "block-time", time.Second, "pause after each block")
	f.StringArrayVar(&o.InitArgs, "init-arg", nil, "extra argument to gpunet init, e.g. --init-arg=--account=ADDR=1000sync (repeatable)")
	return c
}

func (e *env) runTestnet(ctx context.Context, o testnet.ClusterOptions) error {
	if err := testnet.Check(); err != nil {
		return err
	}
	upCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	c, err := testnet.Up(upCtx, o)
	cancel()
	if err != nil {
		return err
	}
	defer c.Close()
	info := testnetInfo{ChainID: c.ChainID, Dir: o.Dir, Delay: o.Net.Delay.String(), Jitter: o.Net.Jitter.String()}
	for _, h := range c.Hosts() {
		th := testnetHost{Name: h.Name, Namespace: h.NS, Addr: h.Addr.String()}
		if n := c.Node(h.Name); n != nil {
			th.API, th.Home, th.Validator = n.API, n.Home, n.Validator
		}
		info.Hosts = append(info.Hosts, th)
	}
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	state := filepath.Join(o.Dir, testnetFile)
	if err := os.WriteFile(state, b, 0o600); err != nil {
		return err
	}
	defer os.Remove(state)
	if e.output == "json" {
		json.NewEncoder(e.stdout).Encode(info)
	} else {
		printTestnet(e.stdout, &info)
	}
	<-ctx.Done()
	s := c.Stats()
	if e.output != "json" {
		fmt.Fprintf(e.stdout, "stopping: router forwarded %d packets, dropped %d (full queues), %d unroutable\n", s.Forwarded, s.Dropped, s.Unroutable)
	}
	return c.Close()
}

func printTestnet(w io.Writer, info *testnetInfo) {
	fmt.Fprintf(w, "testnet %q: %s ± %s one way between hosts (userspace netem); homes and logs in %s\n\n", info.ChainID, info.Delay, info.Jitter, info.Dir)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tNAMESPACE\tADDRESS\tAPI\tHOME")
	for _, h := range info.Hosts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", h.Name, h.Namespace, h.Addr, orDash(h.API), orDash(h.Home))
	}
	tw.Flush()
	var apis []string
	for _, h := range info.Hosts {
		if h.API != "" {
			apis = append(apis, h.API)
		}
	}
	fmt.Fprintf(w, "\nrun a command on a host:  gpunet testnet exec HOST --dir %s -- gpunet status --node %s\nCtrl-C stops the testnet and removes it\n", info.Dir, strings.Join(apis, ","))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func testnetExecCmd(e *env) *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "exec HOST -- COMMAND [ARG…]",
		Short: "Run a command inside a testnet host's network namespace",
		Long: `Run a command on a host of the testnet that 'gpunet testnet up --dir DIR' runs:
inside the host's network namespace (ip netns exec), so that it reaches the
other hosts at their 10.77.0.X addresses through the testnet's delay.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usageError{errors.New("testnet exec takes a host and a command: gpunet testnet exec HOST -- COMMAND [ARG…]")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := os.ReadFile(filepath.Join(dir, testnetFile))
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("no testnet runs in --dir %s (start one with `%s`)", dir, hint("testnet up --dir "+dir))
			}
			if err != nil {
				return err
			}
			var info testnetInfo
			if err := json.Unmarshal(b, &info); err != nil {
				return fmt.Errorf("%s: %w", filepath.Join(dir, testnetFile), err)
			}
			var names []string
			for _, h := range info.Hosts {
				if h.Name == args[0] {
					x := exec.CommandContext(cmd.Context(), "ip", append([]string{"netns", "exec", h.Namespace}, args[1:]...)...)
					x.Stdin, x.Stdout, x.Stderr = cmd.InOrStdin(), e.stdout, e.stderr
					if err := x.Run(); err != nil {
						return fmt.Errorf("on %s: %s: %w", h.Name, strings.Join(args[1:], " "), err)
					}
					return nil
				}
				names = append(names, h.Name)
			}
			return usageError{fmt.Errorf("host %q: the testnet in %s has %s", args[0], dir, strings.Join(names, ", "))}
		},
	}
	c.Flags().StringVar(&dir, "dir", "gpunet-testnet", "the directory given to testnet up")
	return c
}
