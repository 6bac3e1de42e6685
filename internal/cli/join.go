package cli

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpunet/gpunet/internal/validator"
)

// syncInitFlags are init's flags for state sync: the snapshots a new
// network's nodes take, and --join, which makes a full node's home of a
// running network instead.
type syncInitFlags struct {
	snapshotInterval    int
	join, hash, moniker string
	trustHeight         int64
	trustHash           string
	witnesses           []string
}

// joinFlags are the flags that go with --join.
var joinFlags = append([]string{"join", "genesis-hash", "moniker", "trust-height", "trust-hash", "witness"}, netFlagNames...)

func (f *syncInitFlags) register(c *cobra.Command) {
	c.Flags().IntVar(&f.snapshotInterval, "snapshot-interval", 0, "take a state snapshot every N blocks, for nodes joining by state sync (default: 100 at 1s blocks, about every 4s on faster chains; -1: none)")
	c.Flags().StringVar(&f.join, "join", "", "make --home a full node of the running network whose node serves this API URL")
	c.Flags().StringVar(&f.hash, "genesis-hash", "", "with --join: the SHA-256 (hex) the network's genesis file must have")
	c.Flags().StringVar(&f.moniker, "moniker", "", "with --join: the node's name (default: full- and its node id's start)")
	c.Flags().Int64Var(&f.trustHeight, "trust-height", 0, "with --join and --trust-hash: verify state sync's header from this block of the network, learnt from someone you trust, instead of from the genesis")
	c.Flags().StringVar(&f.trustHash, "trust-hash", "", "with --join and --trust-height: the hash (hex) of the block at --trust-height")
	c.Flags().StringArrayVar(&f.witnesses, "witness", nil, "with --join: the CometBFT RPC (http://host:26657) of another node of the network, to check the join node's header against (repeatable; one besides the join node is needed unless --trust-hash is given)")
}

// apply sets a new network's options.
func (f *syncInitFlags) apply(o *validator.InitOptions) error {
	if f.hash != "" || f.moniker != "" || f.trustHeight != 0 || f.trustHash != "" || len(f.witnesses) > 0 {
		return usageError{errors.New("--genesis-hash, --moniker, --trust-height, --trust-hash and --witness go with --join URL")}
	}
	o.SnapshotInterval = f.snapshotInterval
	return nil
}

// runJoin is `gpunet init --join URL`: a full node's home.
func (f *syncInitFlags) runJoin(cmd *cobra.Command, e *env, net validator.NetOptions) error {
	var other []string
	// VisitAll with Changed: Visit on LocalNonPersistentFlags, a set built
	// after parsing, sees no flag as set.
	cmd.LocalNonPersistentFlags().VisitAll(func(fl *pflag.Flag) {
		if fl.Changed && !slices.Contains(joinFlags, fl.Name) {
			other = append(other, "--"+fl.Name)
		}
	})
	if len(other) > 0 {
		return usageError{fmt.Errorf("%v do(es) not go with --join: a joined node takes the network's settings", other)}
	}
	if (f.trustHeight != 0) != (f.trustHash != "") {
		return usageError{errors.New("--trust-height and --trust-hash go together: the height and hash of a block of the network, from someone you trust")}
	}
	res, err := validator.Join(cmd.Context(), e.home, validator.JoinOptions{URL: f.join, GenesisSHA256: f.hash, Moniker: f.moniker,
		TrustHeight: f.trustHeight, TrustHash: f.trustHash, Witnesses: f.witnesses, Net: net})
	if err != nil {
		return err
	}
	return e.print(res, func(w io.Writer) {
		fmt.Fprintf(w, "Joined chain %q as a full node in %s\n", res.ChainID, res.Home)
		fmt.Fprintf(w, "  node id:        %s\n", res.NodeID)
		fmt.Fprintf(w, "  genesis sha256: %s\n", res.GenesisSHA256)
		fmt.Fprintf(w, "  peers:          %v\n", res.Peers)
		fmt.Fprintf(w, "  listens on:     api %s, p2p %s, rpc %s\n", res.API, res.P2P, res.RPC)
		if res.ExternalAddress != "" {
			fmt.Fprintf(w, "  advertises p2p: %s\n", res.ExternalAddress)
		}
		if res.StateSync {
			fmt.Fprintf(w, "  state sync:     from a snapshot, trusting the header at height %d (%s)\n", res.TrustHeight, res.TrustHash)
			fmt.Fprintf(w, "                  verified from %s by CometBFT's light client via %v\n", res.VerifiedFrom, res.RPCServers)
		}
		for _, n := range res.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
		fmt.Fprintf(w, "Run it with:\n  gpunet node --home %s\n", res.Home)
	})
}
