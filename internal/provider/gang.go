package provider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gpunet/gpunet/internal/chainclient"
	"github.com/gpunet/gpunet/internal/clusternet"
	"github.com/gpunet/gpunet/internal/ledger"
	"github.com/gpunet/gpunet/internal/sandbox"
)

// Gang members (issue 30, docs/clusters.md). A job of resources.nodes N > 1
// is placed on N providers at once, each assignment with its rank. This
// provider's member:
//
//  1. makes its WireGuard key for the assignment (derived from its own key,
//     so the same after a restart, and never stored), picks its UDP port
//     and posts both (MsgGangMember: the public key, and the endpoint
//     Options.GangHost:port when the provider has one), while it fetches
//     the job's data;
//  2. waits until every member has posted (the ledger refuses a member's
//     start before that);
//  3. makes the container's network namespace (the oci executor's
//     NewNetNS: loopback only), brings the gang's private network up in it
//     (clusternet.Up: the member's address on gpunet0, every other member
//     a peer; no other route), writes the members file and adds torchrun's
//     variables to the job's environment;
//  4. starts the job on the ledger and runs the container in that
//     namespace. When the ledger stops the gang (a member lost, late or
//     handing back) the job is no longer this provider's: syncJobs cancels
//     the run, which kills the container and closes the network.

// GangMembersFile is where a member finds the members file (an MPI
// hostfile: clusternet.Config.WriteMembers), named by GPUNET_MEMBERS_FILE.
const GangMembersFile = "/gpunet/members"

// GangMasterPort is MASTER_PORT: the rendezvous port on rank 0's private
// address (torchrun's default).
const GangMasterPort = clusternet.DefaultMasterPort

// gangWaitPoll bounds how often a member waiting for the others looks at
// the chain.
const (
	gangWaitPollMin = 25 * time.Millisecond
	gangWaitPollMax = time.Second
)

// gangMember is this provider's member of a gang: its key and port.
type gangMember struct {
	priv, pub clusternet.Key
	port      uint16
	endpoint  string // what was posted; "" for none
}

// gangKey is this provider's private network key for one assignment of a
// gang (the gang's placement, gangPlacement, and the assignment's time: a
// gang placed again in the same second is a new placement): secret
// (derived from its private key), the same after a restart, clamped as
// Curve25519 keys are.
func (a *Agent) gangKey(id, placement uint64, assignedAt int64) clusternet.Key {
	k := clusternet.Key(a.jobSecret("gpunet/gang-key/v1/"+strconv.FormatUint(placement, 10), id, assignedAt))
	k[0] &= 248
	k[31] = (k[31] & 127) | 64
	return k
}

// joinGang makes this member's key and port and posts them, unless the
// chain already has them (a restarted agent reuses the port it posted when
// it is free).
func (a *Agent) joinGang(ctx context.Context, j *ledger.Job, as *ledger.Assignment) (*gangMember, error) {
	m := &gangMember{priv: a.gangKey(j.ID, gangPlacement(j, as), as.AssignedAt)}
	var err error
	if m.pub, err = m.priv.PublicKey(); err != nil {
		return nil, err
	}
	posted := as.GangKey != nil && *as.GangKey == ledger.Hash(m.pub)
	var want uint16
	if posted && as.GangEndpoint != "" {
		if _, p, err := net.SplitHostPort(as.GangEndpoint); err == nil {
			if n, err := strconv.ParseUint(p, 10, 16); err == nil {
				want = uint16(n)
			}
		}
	}
	if m.port, err = freeUDPPort(want); err != nil {
		return nil, fmt.Errorf("gang member: a UDP port for its private network: %w", err)
	}
	if a.o.GangHost.IsValid() {
		m.endpoint = netip.AddrPortFrom(a.o.GangHost, m.port).String()
	}
	if posted && as.GangEndpoint == m.endpoint {
		return m, nil
	}
	if as.StartedAt != 0 {
		// Started already: the key is fixed; a port other than the
		// posted one is reached only once this member speaks first.
		return m, nil
	}
	msg := &ledger.MsgGangMember{JobID: j.ID, PublicKey: ledger.Hash(m.pub), Endpoint: m.endpoint}
	if _, err := a.o.Chain.SendMsg(ctx, a.o.Key, 0, msg); err != nil && !errors.Is(err, chainclient.ErrNotInBlockYet) {
		return nil, fmt.Errorf("gang member: post its key: %w", err)
	}
	a.log.Info("gang member: key and endpoint posted", "job", j.ID, "rank", as.Rank, "endpoint", m.endpoint)
	return m, nil
}

// freeUDPPort returns want when nothing listens on it, or a port the
// kernel picks. (WireGuard opens its own socket on it a moment later.)
func freeUDPPort(want uint16) (uint16, error) {
	if want != 0 {
		if c, err := net.ListenUDP("udp", &net.UDPAddr{Port: int(want)}); err == nil {
			c.Close()
			return want, nil
		}
	}
	c, err := net.ListenUDP("udp", &net.UDPAddr{})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return uint16(c.LocalAddr().(*net.UDPAddr).Port), nil
}

// waitGang waits until every member of gang j has posted its key, and
// returns the job as the chain then has it. It gives up when ctx ends
// (the run is cancelled when the job stops being this provider's).
func (a *Agent) waitGang(ctx context.Context, j *ledger.Job, assignedAt int64) (*ledger.Job, error) {
	placement := gangPlacement(j, assignmentOf(j, a.o.Key.Address))
	poll := min(max(a.o.Poll, gangWaitPollMin), gangWaitPollMax)
	for {
		list, err := a.o.Chain.ProviderJobs(ctx, a.o.Key.Address)
		if err == nil {
			for _, x := range list.Jobs {
				if x.ID != j.ID {
					continue
				}
				as := assignmentOf(x, a.o.Key.Address)
				if as == nil || as.AssignedAt != assignedAt || gangPlacement(x, as) != placement {
					return nil, fmt.Errorf("gang member: job %d is no longer assigned here", j.ID)
				}
				if gangPosted(x, as) {
					return x, nil
				}
			}
		} else if ctx.Err() == nil {
			a.log.Debug("gang member: reading the job", "job", j.ID, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(poll):
		}
	}
}

// gangPosted reports whether every member of as's gang of job j posted
// its key: of its replica gang, for a gang at verification full.
func gangPosted(j *ledger.Job, as *ledger.Assignment) bool {
	n := uint64(0)
	for _, x := range j.Assignments {
		if x.Gang != as.Gang {
			continue
		}
		if x.GangKey == nil {
			return false
		}
		n++
	}
	return n >= j.Spec.Nodes
}

// gangPlacement is the placement as, a member of gang j, belongs to: its
// own (ledger.Assignment.Placement) in a gang at verification full, whose
// replica gangs are replaced one by one; the job's otherwise.
func gangPlacement(j *ledger.Job, as *ledger.Assignment) uint64 {
	if as != nil && as.Placement != 0 {
		return as.Placement
	}
	return j.Attempts
}

// replicaGang is the members of as's gang of job j: all of j's for a gang
// that is not replicated, those of as's replica gang at verification full.
// The members of another replica gang are never this member's peers: each
// replica gang runs on its own private network, so that its result is its
// own.
func replicaGang(j *ledger.Job, as *ledger.Assignment) []ledger.Assignment {
	var out []ledger.Assignment
	for _, x := range j.Assignments {
		if x.Gang == as.Gang {
			out = append(out, x)
		}
	}
	return out
}

// gangConfig is this member's network configuration from the gang's
// record: every member's key and endpoint in rank order.
func (a *Agent) gangConfig(ctx context.Context, j *ledger.Job, m *gangMember) (clusternet.Config, error) {
	as := assignmentOf(j, a.o.Key.Address)
	if as == nil {
		return clusternet.Config{}, fmt.Errorf("gang member: this provider is not a member of job %d", j.ID)
	}
	gang := replicaGang(j, as)
	n := len(gang)
	c := clusternet.Config{PrivateKey: m.priv, ListenPort: m.port, Members: make([]clusternet.Member, n), Rank: -1}
	seen := make([]bool, n)
	for _, x := range gang {
		r := int(x.Rank)
		if x.Rank >= uint64(n) || seen[r] {
			return c, fmt.Errorf("gang member: job %d's ranks are not 0 to %d (rank %d)", j.ID, n-1, x.Rank)
		}
		seen[r] = true
		if x.GangKey == nil {
			return c, fmt.Errorf("gang member: rank %d of job %d has no key", r, j.ID)
		}
		mem := clusternet.Member{Rank: r, PublicKey: clusternet.Key(*x.GangKey)}
		if x.GangEndpoint != "" {
			ep, err := resolveEndpoint(ctx, x.GangEndpoint)
			if err != nil {
				// Its packets still come in; this member answers to
				// where they came from (WireGuard roams).
				a.log.Warn("gang member: another member's endpoint does not resolve; reaching it only when it speaks first", "job", j.ID, "rank", r, "endpoint", x.GangEndpoint, "err", err)
			} else {
				mem.Endpoint = ep
			}
		}
		c.Members[r] = mem
		if x.Provider == a.o.Key.Address {
			c.Rank = r
		}
	}
	if c.Rank < 0 {
		return c, fmt.Errorf("gang member: this provider is not a member of job %d", j.ID)
	}
	return c, c.Validate()
}

// resolveEndpoint reads host:port, looking a host name up (for at most 5
// seconds) to its first address.
func resolveEndpoint(ctx context.Context, s string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap, nil
	}
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		return netip.AddrPort{}, err
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil || port == 0 {
		return netip.AddrPort{}, fmt.Errorf("port %q: want 1 to 65535", p)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if len(addrs) == 0 {
		return netip.AddrPort{}, fmt.Errorf("%s has no address", host)
	}
	return netip.AddrPortFrom(addrs[0].Unmap(), uint16(port)), nil
}

// gangNet is a member's running network and the namespace it is in.
type gangNet struct {
	ns      string
	net     *clusternet.Net
	release func()
	remove  func() // from the relay's members
	relayed bool   // the relay carries what no direct path does
	env     []string
}

func (g *gangNet) close() {
	if g.remove != nil {
		g.remove()
	}
	if g.net != nil {
		g.net.Close()
	}
	if g.release != nil {
		g.release()
	}
}

// upGang makes the member's network namespace in ex, brings the gang's
// network up in it and writes the members file under root.
func (a *Agent) upGang(ex sandbox.Executor, j *ledger.Job, c clusternet.Config, root string) (*gangNet, error) {
	mk, ok := netnsMaker(ex)
	if !ok {
		return nil, fmt.Errorf("gang member: the %s executor cannot make a network namespace", ex.Name())
	}
	g := &gangNet{}
	var err error
	if g.ns, g.release, err = mk.NewNetNS(fmt.Sprintf("job-%d-%s", j.ID, a.o.Key.Address)); err != nil {
		return nil, fmt.Errorf("gang member: %w", err)
	}
	// A member with no endpoint, or none that answers, is reached
	// through the relay's gang route when the agent's link has one.
	opt := clusternet.Options{MemberNS: g.ns, Relay: a.gangRelayFor(j.ID, j.Attempts), Log: a.log.With("job", j.ID)}
	if g.net, err = clusternet.Up(c, opt); err != nil {
		g.close()
		return nil, fmt.Errorf("gang member: private network: %w", err)
	}
	g.remove = a.addGangNet(gangSlot{j.ID, j.Attempts, c.Rank}, g.net)
	g.relayed = opt.Relay != nil
	p := filepath.Join(root, filepath.FromSlash(GangMembersFile))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		g.close()
		return nil, err
	}
	if err := os.WriteFile(p, c.WriteMembers(1), 0o644); err != nil {
		g.close()
		return nil, err
	}
	g.env = c.Env(GangMasterPort, 1, 0, GangMembersFile)
	return g, nil
}

// prepareGang is a gang member's part of a run from the posted keys to a
// running network: it waits for every member's key, then brings the
// network up. A network that cannot come up hands the job back, which
// stops the gang (it is placed again).
func (a *Agent) prepareGang(ctx context.Context, ex sandbox.Executor, j *ledger.Job, as *ledger.Assignment, m *gangMember, root string) (*gangNet, error) {
	log := a.log.With("job", j.ID, "rank", as.Rank)
	log.Info("gang member: waiting for every member's key")
	cur, err := a.waitGang(ctx, j, as.AssignedAt)
	if err != nil {
		return nil, err
	}
	c, err := a.gangConfig(ctx, cur, m)
	if err == nil {
		var g *gangNet
		if g, err = a.upGang(ex, j, c, root); err == nil {
			// The members whose networks came up before this one's lost
			// their first handshakes to it: greet them now rather than
			// leave them to WireGuard's retry 5 s later.
			g.net.Greet()
			log.Info("gang member: private network up", "address", g.net.Address(), "members", len(c.Members), "relay", g.relayed)
			return g, nil
		}
	}
	if ctx.Err() != nil {
		return nil, err
	}
	reason := truncateText("gang member's network could not come up: "+err.Error(), ledger.MaxReleaseLen)
	if _, rerr := a.o.Chain.SendMsg(ctx, a.o.Key, 0, &ledger.MsgReleaseJob{JobID: j.ID, Reason: reason}); rerr != nil && !errors.Is(rerr, chainclient.ErrNotInBlockYet) {
		log.Error("gang member: handing the job back", "err", rerr)
	}
	return nil, err
}

// netnsMaker finds the ability to make network namespaces in ex or in
// the executor it wraps (the metrics' counting wrapper).
func netnsMaker(ex sandbox.Executor) (sandbox.NetNSMaker, bool) {
	for ex != nil {
		if mk, ok := ex.(sandbox.NetNSMaker); ok {
			return mk, true
		}
		u, ok := ex.(interface{ Unwrap() sandbox.Executor })
		if !ok {
			return nil, false
		}
		ex = u.Unwrap()
	}
	return nil, false
}
