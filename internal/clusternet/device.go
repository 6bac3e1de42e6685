package clusternet

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun"
)

// DefaultInterface is the name of a member's WireGuard interface inside
// its network namespace.
const DefaultInterface = "gpunet0"

// Options say where a member's network goes.
type Options struct {
	// MemberNS is the path of the member's network namespace (the
	// container's /proc/PID/ns/net, or /run/netns/NAME): the WireGuard
	// interface is made there, holding the member's private address and
	// a route to the gang's network, and nothing else.
	MemberNS string
	// HostNS is the path of the namespace whose UDP socket carries the
	// encrypted packets (the provider's); "": this process's.
	HostNS string
	// Interface names the interface; "": DefaultInterface.
	Interface string
	// Relay carries packets to members no direct UDP reaches; nil: direct
	// UDP only.
	Relay Relay
	Log   *slog.Logger
	// KeepAlive is WireGuard's persistent keepalive: how often an idle
	// peer of a higher rank is sent a packet, which keeps the session, NAT
	// mappings and relay paths warm and lets a direct path be noticed;
	// 0: 5 s.
	KeepAlive time.Duration
}

// Net is one member's running private network: a userspace WireGuard
// device whose TUN interface is in the member's namespace and whose UDP
// socket is in the host's.
type Net struct {
	cfg  Config
	dev  *device.Device
	bind *bind
	o    Options
}

// Up starts the member's network: it makes the TUN interface in
// o.MemberNS, gives it the member's address, and configures WireGuard with
// every other member as a peer allowed only its own address (/32). The
// namespace gets no other route, and nothing is forwarded: only members
// reach the address, and the member reaches only members.
func Up(c Config, o Options) (*Net, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	if o.Interface == "" {
		o.Interface = DefaultInterface
	}
	if len(o.Interface) >= 16 || strings.ContainsAny(o.Interface, "/ \t\n") {
		return nil, fmt.Errorf("clusternet: interface name %q: want at most 15 characters, no '/' or spaces", o.Interface)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = 5 * time.Second
	}
	var td tun.Device
	err := inNetns(o.MemberNS, func() (err error) {
		td, err = tun.CreateTUN(o.Interface, c.MTU)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("clusternet: create TUN %s in %s: %w", o.Interface, o.MemberNS, err)
	}
	addr := netip.PrefixFrom(Address(c.Network, c.Rank), c.Network.Bits())
	// Up before WireGuard starts: the TUN reports the link's state, and
	// WireGuard follows it (a link down takes the device down).
	err = inNetns(o.MemberNS, func() error {
		for _, args := range [][]string{
			{"addr", "add", addr.String(), "dev", o.Interface},
			{"link", "set", o.Interface, "mtu", strconv.Itoa(c.MTU), "up"},
		} {
			// Started from this thread, ip runs in the member's namespace.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
			cancel()
			if err != nil {
				return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
			}
		}
		return nil
	})
	if err != nil {
		td.Close()
		return nil, fmt.Errorf("clusternet: address the interface: %w", err)
	}
	b, err := newBind(c, o.HostNS, o.Relay, o.Log)
	if err != nil {
		td.Close()
		return nil, err
	}
	log := o.Log.With("rank", c.Rank)
	dev := device.NewDevice(fixedMTU{td, c.MTU}, b, &device.Logger{
		Verbosef: func(f string, a ...any) { log.Debug("wireguard: " + fmt.Sprintf(f, a...)) },
		Errorf:   func(f string, a ...any) { log.Warn("wireguard: " + fmt.Sprintf(f, a...)) },
	})
	n := &Net{cfg: c, dev: dev, bind: b, o: o}
	if err := dev.IpcSet(uapi(c, o.KeepAlive)); err != nil {
		n.Close()
		return nil, fmt.Errorf("clusternet: configure wireguard: %w", err)
	}
	if err := dev.Up(); err != nil {
		n.Close()
		return nil, fmt.Errorf("clusternet: wireguard up: %w", err)
	}
	return n, nil
}

// uapi is c as WireGuard's configuration protocol writes it: this
// member's key and port, and each other member as a peer allowed only its
// own address, reached at the endpoint rank:N (bind.ParseEndpoint).
func uapi(c Config, keepAlive time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "private_key=%s\nlisten_port=%d\nreplace_peers=true\n", c.PrivateKey.hex(), c.ListenPort)
	for _, m := range c.Members {
		if m.Rank == c.Rank {
			continue
		}
		// Only the lower rank of a pair keeps the session alive: a
		// persistent keepalive starts a handshake when there is no
		// session, and two sides whose keepalives fire together send
		// initiations that cross, each replacing the handshake the
		// other answers, again at every interval (seen over the relay,
		// whose latency is too small for WireGuard's jitter to part
		// them). The higher rank still starts one when it has data.
		ka := 0
		if c.Rank < m.Rank {
			ka = int(keepAlive / time.Second)
		}
		fmt.Fprintf(&b, "public_key=%s\nendpoint=rank:%d\npersistent_keepalive_interval=%d\nreplace_allowed_ips=true\nallowed_ip=%s/32\n",
			m.PublicKey.hex(), m.Rank, ka, Address(c.Network, m.Rank))
	}
	return b.String()
}

// Greet starts a handshake with every member this Net has no session
// with, at once (a keepalive, staged until the session is up). A member
// whose network comes up after the others' calls it: the others' first
// handshakes, sent before it was there, were lost, and WireGuard tries
// again only after 5 s (REKEY_TIMEOUT); its own reach members that are
// already up. Members whose networks come up together may still cross
// handshakes once; the data that follows settles them.
func (n *Net) Greet() {
	for _, m := range n.cfg.Members {
		if m.Rank == n.cfg.Rank {
			continue
		}
		if p := n.dev.LookupPeer(device.NoisePublicKey(m.PublicKey)); p != nil {
			p.SendKeepalive()
		}
	}
}

// Address is this member's private address.
func (n *Net) Address() netip.Addr { return Address(n.cfg.Network, n.cfg.Rank) }

// ServeStream serves a relay stream another member opened to this one
// (Relay.Dial at its end), until the stream or the Net closes. The
// provider's agent calls it for each such stream the relay hands it.
func (n *Net) ServeStream(c net.Conn) error { return n.bind.serveStream(c, -1) }

// ServeStreamFrom is ServeStream for a stream the relay vouches comes
// from the member of rank from (the node checked the asker's membership:
// a gang stream, relay.GangStream.From): a stream whose header claims
// another rank is refused. The relay agent hands it a gang stream itself
// (relay.AgentOptions.AcceptGang), with no splice in between.
func (n *Net) ServeStreamFrom(c net.Conn, from int) error {
	if from < 0 || from >= len(n.cfg.Members) || from == n.cfg.Rank {
		c.Close()
		return fmt.Errorf("clusternet: a relay stream from rank %d: want another member's rank, 0 to %d", from, len(n.cfg.Members)-1)
	}
	return n.bind.serveStream(c, from)
}

// StreamConn returns a connection whose other end this Net serves as a
// relay stream: what a provider's relay agent (relay.AgentOptions.Dial)
// returns for a stream to the gang's port, splicing the two. The pair is
// a Unix socket pair, so its buffers hold packets while either side is
// busy.
func (n *Net) StreamConn() (net.Conn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("clusternet: socketpair: %w", err)
	}
	var cs [2]net.Conn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "clusternet-stream")
		cs[i], err = net.FileConn(f)
		f.Close()
		if err != nil {
			if i == 1 {
				cs[0].Close()
			} else {
				unix.Close(fds[1])
			}
			return nil, fmt.Errorf("clusternet: socketpair: %w", err)
		}
	}
	go n.bind.serveStream(cs[1], -1)
	return cs[0], nil
}

// Peers returns WireGuard's view of the peers, as its configuration
// protocol writes it (keys in hex, last handshake, bytes each way): for
// diagnosis.
func (n *Net) Peers() (string, error) {
	s, err := n.dev.IpcGet()
	if err != nil {
		return "", err
	}
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "private_key=") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n"), nil
}

// Stats are counters of a Net's paths.
type Stats struct {
	// DirectRecv counts packets received straight from a member's
	// endpoint; RelaySent and RelayRecv those carried by relay streams;
	// RelayDropped those dropped at a full relay queue.
	DirectRecv, RelaySent, RelayRecv, RelayDropped uint64
}

// Stats returns the Net's counters.
func (n *Net) Stats() Stats {
	return Stats{
		DirectRecv:   n.bind.directRecv.Load(),
		RelaySent:    n.bind.relaySent.Load(),
		RelayRecv:    n.bind.relayRecv.Load(),
		RelayDropped: n.bind.relayDropped.Load(),
	}
}

// Close stops WireGuard, removes the interface and ends the relay
// streams.
func (n *Net) Close() error {
	n.dev.Close() // closes the TUN (the interface goes) and the bind
	n.bind.shutdown()
	return nil
}

// fixedMTU reports the MTU the interface was made with: the TUN's own
// MTU() asks the kernel through a socket made on whatever thread runs it,
// which is not in the member's namespace, where the interface is.
type fixedMTU struct {
	tun.Device
	mtu int
}

func (f fixedMTU) MTU() (int, error) { return f.mtu, nil }
