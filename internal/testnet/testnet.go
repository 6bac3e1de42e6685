// Package testnet builds a network of hosts on one Linux machine for
// tests and for trying gpunet by hand: each host (a validator, a full node,
// a provider, a consumer) is its own network namespace with its own address
// (10.77.0.X/16 on an interface gn0), and the hosts reach each other only
// through a userspace router that delays every packet by a configured delay
// plus jitter. Nothing between hosts goes over 127.0.0.1.
//
// The kernels this runs on need not have sch_netem: each host's gn0 is a
// TUN interface whose packets this process reads, holds for the link's
// delay and writes into the destination host's gn0 (see router.go). It
// needs root, the ip command (iproute2) and /dev/net/tun.
//
// Namespaces are named with a per-run prefix that carries this process's
// pid, so that parallel runs do not collide and a later run can remove
// what a killed one left behind (Sweep).
package testnet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Prefix begins the name of every namespace this package creates:
// Prefix + pid + "-" + random + "-" + host name.
const Prefix = "gnt"

// Interface is the name of each host's TUN interface.
const Interface = "gn0"

// Subnet is the hosts' network; host i (from 1) is 10.77.0.(i+1).
var Subnet = netip.MustParsePrefix("10.77.0.0/16")

// Options configure a Net. Zero fields take the defaults.
type Options struct {
	// Delay is the one-way delay of every link (a round trip takes twice
	// this); Jitter is added to it, uniform in [-Jitter, +Jitter].
	Delay, Jitter time.Duration
	// QueueLen bounds each link's queue, in packets (default 4096);
	// packets arriving at a full queue are dropped.
	QueueLen int
	// Direct names hosts whose links carry no delay, to or from any host:
	// a client that sits next to its node (a benchmark's load generator).
	Direct []string
}

// Net is a set of hosts and the router between them. Close removes
// everything it made.
type Net struct {
	prefix string
	router *router
	direct []string

	mu     sync.Mutex
	hosts  []*Host
	procs  []*exec.Cmd
	closed bool
}

// Host is one network namespace with its own address.
type Host struct {
	// Name is the host's name in the net ("node0", "provider", …).
	Name string
	// NS is the network namespace's name (ip netns).
	NS string
	// Addr is the host's address on gn0.
	Addr netip.Addr

	net *Net
}

// Check says why this machine cannot run a Net, or nil if it can.
func Check() error {
	if os.Geteuid() != 0 {
		return errors.New("testnet needs root (network namespaces and TUN devices)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("testnet needs the ip command (iproute2)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Errorf("testnet needs /dev/net/tun: %w", err)
	}
	return nil
}

// New starts an empty net. Add hosts with AddHost; Close removes them.
func New(o Options) (*Net, error) {
	if err := Check(); err != nil {
		return nil, err
	}
	if o.QueueLen == 0 {
		o.QueueLen = 4096
	}
	if o.Delay < 0 || o.Jitter < 0 || o.Jitter > o.Delay+time.Second || o.QueueLen < 1 {
		return nil, fmt.Errorf("testnet: delay %s, jitter %s, queue %d: want delay ≥ 0, jitter ≥ 0, queue ≥ 1", o.Delay, o.Jitter, o.QueueLen)
	}
	var r [3]byte
	rand.Read(r[:])
	return &Net{
		prefix: fmt.Sprintf("%s%d-%s-", Prefix, os.Getpid(), hex.EncodeToString(r[:])),
		router: newRouter(o.Delay, o.Jitter, o.QueueLen),
		direct: o.Direct,
	}, nil
}

// AddHost creates a host: a namespace with lo up and a TUN interface gn0
// holding the next address of Subnet, attached to the router.
func (n *Net) AddHost(ctx context.Context, name string) (*Host, error) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, errors.New("testnet: closed")
	}
	for _, h := range n.hosts {
		if h.Name == name {
			n.mu.Unlock()
			return nil, fmt.Errorf("testnet: host %q exists", name)
		}
	}
	i := len(n.hosts) + 2 // 10.77.0.1 is left for a gateway, should one be added
	if i > 254 {
		n.mu.Unlock()
		return nil, errors.New("testnet: at most 253 hosts")
	}
	a := Subnet.Addr().As4()
	a[3] = byte(i)
	h := &Host{Name: name, NS: n.prefix + name, Addr: netip.AddrFrom4(a), net: n}
	n.hosts = append(n.hosts, h)
	n.mu.Unlock()

	if err := ipCmd(ctx, "netns", "add", h.NS); err != nil {
		return nil, err
	}
	tun, err := openTUN(h.NS, Interface)
	if err != nil {
		return nil, err
	}
	for _, args := range [][]string{
		{"-n", h.NS, "link", "set", "lo", "up"},
		{"-n", h.NS, "addr", "add", netip.PrefixFrom(h.Addr, Subnet.Bits()).String(), "dev", Interface},
		{"-n", h.NS, "link", "set", Interface, "up"},
	} {
		if err := ipCmd(ctx, args...); err != nil {
			tun.Close()
			return nil, err
		}
	}
	n.router.attach(h.Addr, tun, slices.Contains(n.direct, name))
	return h, nil
}

// Hosts returns the hosts in the order they were added.
func (n *Net) Hosts() []*Host {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*Host(nil), n.hosts...)
}

// Host returns the host called name, or nil.
func (n *Net) Host(name string) *Host {
	for _, h := range n.Hosts() {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// Stats returns the router's counters.
func (n *Net) Stats() Stats { return n.router.stats() }

// Command returns a command running name with args inside the host's
// namespace (`ip netns exec NS name args…`). The process is killed when
// this process dies (Pdeathsig) and by Close; its process group is its own,
// so that a terminal's Ctrl-C reaches only the harness.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.NS, name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	h.net.mu.Lock()
	h.net.procs = append(h.net.procs, cmd)
	h.net.mu.Unlock()
	return cmd
}

// DialContext connects from inside the host's namespace, as a process
// running there would: its packets leave through the host's gn0 and the
// router (or its own loopback).
func (h *Host) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := inNamespace(h.NS, func() (err error) {
		c, err = (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// HTTPClient returns an HTTP client whose connections start in the host,
// for this process to reach the hosts' APIs without a route of its own.
func (h *Host) HTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: h.DialContext, MaxIdleConnsPerHost: 4}}
}

// Close kills every process started in the hosts, deletes the namespaces
// (and with them the TUN interfaces) and stops the router. It is safe to
// call more than once.
func (n *Net) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	hosts, procs := n.hosts, n.procs
	n.mu.Unlock()
	for _, c := range procs {
		if c.Process != nil {
			c.Process.Signal(syscall.SIGKILL)
		}
	}
	var errs []error
	for _, h := range hosts {
		errs = append(errs, removeNS(h.NS))
	}
	n.router.close()
	return errors.Join(errs...)
}

// removeNS kills what still runs in a namespace (a grandchild the harness
// did not start itself) and deletes it.
func removeNS(ns string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := os.Stat("/run/netns/" + ns); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if out, err := exec.CommandContext(ctx, "ip", "netns", "pids", ns).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	return ipCmd(ctx, "netns", "del", ns)
}

// Sweep removes the namespaces (and kills the processes in them) that
// earlier runs left behind: those with this package's prefix whose
// creating process is gone. It returns the names removed.
func Sweep() ([]string, error) {
	entries, err := os.ReadDir("/run/netns")
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		name := e.Name()
		rest, ok := strings.CutPrefix(name, Prefix)
		if !ok {
			continue
		}
		pidStr, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil || pidAlive(pid) {
			continue
		}
		if err := removeNS(name); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
}

func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func ipCmd(ctx context.Context, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
