package validator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strings"

	"github.com/cometbft/cometbft/light/provider"
)

// State sync's light client needs the CometBFT RPC of two nodes (the join
// node's and another), which a node's operator may keep on loopback or
// behind a firewall: what `init --join` says when it cannot reach them.

// unreachable reports whether err says a server could not be reached
// (refused, timed out, no route, no such host), as opposed to an answer
// without the block asked for.
func unreachable(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) || errors.As(err, &dns) || errors.Is(err, provider.ErrNoResponse) ||
		errors.Is(err, context.DeadlineExceeded) || os.IsTimeout(err)
}

// unreached returns the sources that could not be reached for height.
func unreached(srcs []*source, height int64) []*source {
	var out []*source
	for _, s := range srcs {
		if a := s.answer(height); a.lb == nil && unreachable(a.err) {
			out = append(out, s)
		}
	}
	return out
}

// reachHint says which of the CometBFT RPC servers could not be reached
// and what a joining node needs; "" when there are none.
func reachHint(joinURL string, cut []*source, height int64) string {
	if len(cut) == 0 {
		return ""
	}
	var list []string
	for _, s := range cut {
		l := fmt.Sprintf("%s: %v", s, s.answer(height).err)
		if loopbackFromAfar(joinURL, s.addr) {
			l += " (a loopback address: that node's RPC listens on its own machine only)"
		}
		list = append(list, l)
	}
	return fmt.Sprintf("cannot reach the CometBFT RPC of %s. State sync needs the CometBFT RPC (port 26657 by default, rpc: in a node's config) "+
		"of two nodes of the network reachable from this machine, the join node's and another: their operators must listen on an address others reach "+
		"(gpunet node --rpc 0.0.0.0:26657) and open the port, or give --witness http://HOST:26657 of a node you can reach",
		strings.Join(list, "; "))
}

// loopbackFromAfar reports whether addr (a server's RPC) is a loopback
// address named by a join node that is not on loopback: another machine
// cannot reach it there.
func loopbackFromAfar(joinURL, addr string) bool {
	isLoopback := func(host string) bool {
		ip, err := netip.ParseAddr(host)
		return host == "localhost" || err == nil && ip.IsLoopback()
	}
	ju, err := url.Parse(joinURL)
	if err != nil || isLoopback(ju.Hostname()) {
		return false
	}
	host := addr
	if u, err := url.Parse(addr); err == nil && u.Host != "" {
		host = u.Hostname()
	} else if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	return isLoopback(host)
}
