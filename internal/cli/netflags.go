package cli

import (
	"fmt"
	"net"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpunet/gpunet/internal/validator"
)

// netFlags are the flags of init, init --join and node that choose where
// a node listens, what it tells others to dial, and whom it dials
// (validator.NetOptions); init and node write them into the home's
// config/gpunet.yaml, so that every later start uses them.
type netFlags struct {
	o             validator.NetOptions
	seeds, peers  []string
	strict, dupIP bool
	cmd           *cobra.Command
}

// netFlagNames are netFlags' flags, which also go with init --join.
var netFlagNames = []string{"listen", "api", "p2p", "rpc", "external-address", "advertise-api", "seeds", "persistent-peers", "addr-book-strict", "allow-duplicate-ip"}

// register adds the flags to c, the node command or init.
func (f *netFlags) register(c *cobra.Command, node bool) {
	f.cmd = c
	fl := c.Flags()
	listen, peers := "init: a free port each on HOST", "added to those init writes"
	if node {
		listen, peers = "each keeps its port", "replace the config's"
	}
	fl.StringVar(&f.o.Listen, "listen", "", "HOST the API, p2p and RPC listen on: an address of this machine, or 0.0.0.0 for every interface ("+listen+"; default 127.0.0.1)")
	fl.StringVar(&f.o.API, "api", "", "the API's listen address HOST:PORT (port 0: a free one)")
	fl.StringVar(&f.o.P2P, "p2p", "", "CometBFT's p2p listen address HOST:PORT (the port other nodes connect to; 26656 by convention)")
	fl.StringVar(&f.o.RPC, "rpc", "", "CometBFT's RPC listen address HOST:PORT (26657 by convention; nodes joining by state sync need it)")
	fl.StringVar(&f.o.ExternalAddress, "external-address", "", "HOST[:PORT] other nodes dial for this node's p2p, told to its peers (behind NAT, or listening on 0.0.0.0); the port defaults to the p2p port")
	fl.StringVar(&f.o.AdvertiseAPI, "advertise-api", "", "the URL other nodes and clients reach this node's API at, e.g. http://203.0.113.7:26680 (default: http://<api>, or the external address's host when the API listens on 0.0.0.0)")
	fl.StringSliceVar(&f.seeds, "seeds", nil, "NODE_ID@HOST:PORT,… of nodes asked for more peers ("+peers+")")
	fl.StringSliceVar(&f.peers, "persistent-peers", nil, "NODE_ID@HOST:PORT,… of nodes to stay connected to ("+peers+")")
	// Registered false so that help shows no default: unset, the policy
	// follows the addresses (validator.Config.P2PPolicy).
	fl.BoolVar(&f.strict, "addr-book-strict", false, "keep only public, routable addresses in the address book (CometBFT's p2p.addr_book_strict; default: true unless this node and all its peers have loopback or private addresses)")
	fl.BoolVar(&f.dupIP, "allow-duplicate-ip", false, "accept several peers from one IP address (CometBFT's p2p.allow_duplicate_ip; default: false unless this node and all its peers have loopback or private addresses)")
}

// options returns the flags' NetOptions, checked: a usage error names the
// flag whose value is wrong.
func (f *netFlags) options() (validator.NetOptions, error) {
	o := f.o
	changed := f.cmd.Flags().Changed
	if changed("seeds") {
		o.Seeds = append([]string{}, f.seeds...)
	}
	if changed("persistent-peers") {
		o.PersistentPeers = append([]string{}, f.peers...)
	}
	if changed("addr-book-strict") {
		o.AddrBookStrict = &f.strict
	}
	if changed("allow-duplicate-ip") {
		o.AllowDuplicateIP = &f.dupIP
	}
	for _, n := range []string{"listen", "api", "p2p", "rpc", "external-address", "advertise-api"} {
		if changed(n) && strings.TrimSpace(f.cmd.Flags().Lookup(n).Value.String()) == "" {
			return o, usageError{fmt.Errorf("--%s is empty", n)}
		}
	}
	if err := o.Check(); err != nil {
		return o, usageError{err}
	}
	return o, nil
}

// applyToHome writes the flags into home's config before `node` starts
// it: checked first, then each new listen address tried, so that a value
// that is wrong, or an address this machine cannot listen on, changes
// nothing.
func (f *netFlags) applyToHome(home string) error {
	o, err := f.options()
	if err != nil || o.IsZero() {
		return err
	}
	c, err := validator.LoadConfig(home)
	if err != nil {
		return err
	}
	next := *c
	if err := o.Apply(&next); err != nil {
		return usageError{err}
	}
	if err := next.Validate(); err != nil {
		return usageError{err}
	}
	for _, a := range []struct{ flag, was, now string }{{"--api", c.API, next.API}, {"--p2p", c.P2P, next.P2P}, {"--rpc", c.RPC, next.RPC}} {
		if a.now == a.was || strings.HasSuffix(a.now, ":0") {
			continue
		}
		flag := a.flag
		if !f.cmd.Flags().Changed(strings.TrimPrefix(flag, "--")) {
			flag = "--listen"
		}
		l, err := net.Listen("tcp", a.now)
		if err != nil {
			return fmt.Errorf("%s: cannot listen on %s (%w): is it an address of this machine, and is the port free? nothing written", flag, a.now, err)
		}
		l.Close()
	}
	return validator.SaveConfig(home, &next)
}
