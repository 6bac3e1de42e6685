package validator

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpunet/gpunet/internal/ledger"
)

// Where a node listens, what it tells others to dial, and whom it dials:
// chosen with the flags of `init`, `init --join` and `node` (NetOptions),
// kept in config/gpunet.yaml, and turned into CometBFT's p2p settings at
// every start (P2PPolicy).

// NetOptions are an operator's choice of addresses and peers. Apply writes
// them into a Config; the zero value changes nothing. Its errors name the
// command-line flag whose value is wrong and say what would be right.
type NetOptions struct {
	// Listen is the host the API, p2p and RPC listen on, each keeping its
	// port: an address of this machine, or 0.0.0.0 (::) for every
	// interface.
	Listen string
	// API, P2P and RPC are listen addresses (host:port), over Listen. The
	// API's port may be 0 (a free one, recorded once bound).
	API, P2P, RPC string
	// ExternalAddress is the host[:port] other nodes dial for this node's
	// p2p; the port defaults to P2P's. It is also the API's advertised
	// host when the API listens on every interface.
	ExternalAddress string
	// AdvertiseAPI is the URL other nodes and clients reach the API at.
	// Unset, it follows the API's address (or ExternalAddress's host).
	AdvertiseAPI string
	// Seeds and PersistentPeers (id@host:port), when not nil, replace the
	// config's.
	Seeds, PersistentPeers []string
	// AddrBookStrict and AllowDuplicateIP, when set, are written as they
	// are; unset, the config keeps what it has (P2PPolicy).
	AddrBookStrict, AllowDuplicateIP *bool
}

// IsZero reports whether o changes nothing.
func (o *NetOptions) IsZero() bool {
	return o.Listen == "" && o.API == "" && o.P2P == "" && o.RPC == "" && o.ExternalAddress == "" && o.AdvertiseAPI == "" &&
		o.Seeds == nil && o.PersistentPeers == nil && o.AddrBookStrict == nil && o.AllowDuplicateIP == nil
}

// Check checks o's values without a config to apply them to.
func (o *NetOptions) Check() error {
	scratch := Config{API: "127.0.0.1:26680", P2P: "127.0.0.1:26656", RPC: "127.0.0.1:26657"}
	return o.Apply(&scratch)
}

// Apply checks o and writes it into c. On error c may be half changed:
// apply to a copy.
func (o *NetOptions) Apply(c *Config) error {
	if o.IsZero() {
		return nil
	}
	// The advertised API follows the listen address unless someone set it
	// to something else.
	followAPI := c.AdvertiseAPI == "" || strings.TrimRight(c.AdvertiseAPI, "/") == "http://"+c.API
	api, ext := c.API, c.ExternalAddress
	if o.Listen != "" {
		host, err := listenHost(o.Listen)
		if err != nil {
			return fmt.Errorf("--listen %q: %w", o.Listen, err)
		}
		for _, p := range []*string{&c.API, &c.P2P, &c.RPC} {
			if _, port, err := net.SplitHostPort(*p); err == nil {
				*p = net.JoinHostPort(host, port)
			}
		}
	}
	for _, a := range []struct {
		flag, value string
		to          *string
		portZero    bool
	}{{"--api", o.API, &c.API, true}, {"--p2p", o.P2P, &c.P2P, false}, {"--rpc", o.RPC, &c.RPC, false}} {
		if a.value == "" {
			continue
		}
		if err := checkListenAddr(a.value, a.portZero); err != nil {
			return fmt.Errorf("%s %q: %w", a.flag, a.value, err)
		}
		*a.to = a.value
	}
	if o.ExternalAddress != "" {
		ext, err := externalAddr(o.ExternalAddress, c.P2P)
		if err != nil {
			return fmt.Errorf("--external-address %q: %w", o.ExternalAddress, err)
		}
		c.ExternalAddress = ext
	}
	switch {
	case o.AdvertiseAPI != "":
		u := strings.TrimRight(strings.TrimSpace(o.AdvertiseAPI), "/")
		if err := checkAdvertiseAPI(u); err != nil {
			return fmt.Errorf("--advertise-api %q: %w", o.AdvertiseAPI, err)
		}
		c.AdvertiseAPI = u
	case followAPI && (c.API != api || c.ExternalAddress != ext || c.AdvertiseAPI == ""):
		u, err := defaultAdvertiseAPI(c)
		if err != nil {
			return err
		}
		c.AdvertiseAPI = u
	}
	if o.Seeds != nil {
		peers, err := checkPeers(o.Seeds)
		if err != nil {
			return fmt.Errorf("--seeds: %w", err)
		}
		c.Seeds = peers
	}
	if o.PersistentPeers != nil {
		peers, err := checkPeers(o.PersistentPeers)
		if err != nil {
			return fmt.Errorf("--persistent-peers: %w", err)
		}
		c.PersistentPeers = peers
	}
	if o.AddrBookStrict != nil {
		v := *o.AddrBookStrict
		c.AddrBookStrict = &v
	}
	if o.AllowDuplicateIP != nil {
		v := *o.AllowDuplicateIP
		c.AllowDuplicateIP = &v
	}
	return nil
}

// P2PAddress is the host:port other nodes dial for this node's p2p:
// ExternalAddress, else P2P.
func (c *Config) P2PAddress() string {
	if c.ExternalAddress != "" {
		return c.ExternalAddress
	}
	return c.P2P
}

// P2PPolicy is how CometBFT treats its peers' addresses: addr_book_strict
// (only public, routable addresses enter the address book that peer
// exchange fills) and allow_duplicate_ip (more than one peer from one IP).
// CometBFT's defaults, strict and no duplicates, are what a node on the
// internet needs; a network on one machine (every node on 127.0.0.1) or on
// a private network needs the opposite. Unless the config sets them, a node
// whose own p2p address (P2PAddress) and every persistent peer and seed are
// loopback or private IP addresses is lax; any other node is strict (a
// node that listens on every interface without an external address, or
// names a peer by a public address or a host name, is on the internet).
func (c *Config) P2PPolicy() (addrBookStrict, allowDuplicateIP bool) {
	local := c.localNetwork()
	addrBookStrict, allowDuplicateIP = !local, local
	if c.AddrBookStrict != nil {
		addrBookStrict = *c.AddrBookStrict
	}
	if c.AllowDuplicateIP != nil {
		allowDuplicateIP = *c.AllowDuplicateIP
	}
	return addrBookStrict, allowDuplicateIP
}

// localNetwork reports whether the node's p2p address and all its peers'
// are loopback or private IP addresses.
func (c *Config) localNetwork() bool {
	addrs := []string{c.P2PAddress()}
	for _, p := range slices.Concat(c.PersistentPeers, c.Seeds) {
		_, hp, _ := strings.Cut(p, "@")
		addrs = append(addrs, hp)
	}
	for _, a := range addrs {
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			return false
		}
		ip, err := netip.ParseAddr(host)
		if err != nil || !(ip.IsLoopback() || ip.IsPrivate()) {
			return false
		}
	}
	return true
}

// listenHost checks the host given to --listen.
func listenHost(s string) (string, error) {
	h := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(s), "["), "]")
	if ip, err := netip.ParseAddr(h); err == nil {
		return ip.String(), nil
	}
	if _, _, err := net.SplitHostPort(s); err == nil {
		return "", errors.New("want a host without a port, e.g. 0.0.0.0 or 192.0.2.7 (each service keeps its port; --api, --p2p and --rpc set host:port one by one)")
	}
	if !validHostName(h) {
		return "", errors.New("want an address of this machine, 0.0.0.0 (or ::) for every interface, or a host name")
	}
	return h, nil
}

// checkListenAddr checks a listen address: host:port with a port in
// [1, 65535] (0 as well when portZero).
func checkListenAddr(s string, portZero bool) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return errors.New("want host:port, e.g. 0.0.0.0:26656 (every interface) or 192.0.2.7:26656")
	}
	if host == "" {
		return errors.New("no host: want host:port, e.g. 0.0.0.0:26656 for every interface")
	}
	if _, err := netip.ParseAddr(host); err != nil && !validHostName(host) {
		return fmt.Errorf("host %q is not an IP address or host name", host)
	}
	lo := 1
	if portZero {
		lo = 0
	}
	if p, err := strconv.Atoi(port); err != nil || p < lo || p > 65535 {
		return fmt.Errorf("port %q: want a number in [%d, 65535]", port, lo)
	}
	return nil
}

// checkDialAddr checks an address others dial: host:port, the host an IP
// address that is not unspecified (0.0.0.0, ::) or a host name.
func checkDialAddr(s string) error {
	if err := checkListenAddr(s, false); err != nil {
		return err
	}
	host, _, _ := net.SplitHostPort(s)
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		return fmt.Errorf("%s means every interface and cannot be dialled: want an address or DNS name other machines reach", host)
	}
	return nil
}

// externalAddr checks --external-address, HOST or HOST:PORT, and returns
// it as host:port, the port p2p's when not given.
func externalAddr(s, p2p string) (string, error) {
	s = strings.TrimSpace(s)
	hp := s
	if _, _, err := net.SplitHostPort(s); err != nil {
		_, port, err := net.SplitHostPort(p2p)
		if err != nil {
			return "", fmt.Errorf("no port, and none to take from the p2p address %q", p2p)
		}
		hp = net.JoinHostPort(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), port)
	}
	if err := checkDialAddr(hp); err != nil {
		return "", fmt.Errorf("%w (HOST or HOST:PORT, e.g. 203.0.113.7 or 203.0.113.7:26656: the address other nodes reach this machine's p2p port at)", err)
	}
	return hp, nil
}

// checkAdvertiseAPI checks the URL given to --advertise-api.
func checkAdvertiseAPI(u string) error {
	if !ledger.ValidDataAt(u) {
		return fmt.Errorf("want the http(s) URL other nodes and clients reach this node's API at, like http://203.0.113.7:8080 (at most %d bytes)", ledger.MaxDataAtLen)
	}
	pu, err := url.Parse(u)
	if err != nil {
		return err
	}
	host := pu.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		return fmt.Errorf("%s means every interface and cannot be reached: want this machine's address or DNS name that other machines reach", host)
	}
	return nil
}

// defaultAdvertiseAPI is the API's URL when nobody set one: http://API,
// or, when the API listens on every interface, the external address's
// host with the API's port.
func defaultAdvertiseAPI(c *Config) (string, error) {
	host, port, err := net.SplitHostPort(c.API)
	if err != nil {
		return "", fmt.Errorf("api %q: %w", c.API, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsUnspecified() {
		return "http://" + c.API, nil
	}
	if port == "0" {
		return "", fmt.Errorf("the API listens on every interface on a port yet to be picked (%s), so no URL of it can be told to other nodes and clients: give it a port (--api 0.0.0.0:26680) or --advertise-api URL", c.API)
	}
	if c.ExternalAddress == "" {
		return "", fmt.Errorf("the API listens on every interface (%s), so no address of it can be told to other nodes and clients: give --advertise-api URL (e.g. http://203.0.113.7:%s) or --external-address HOST (this machine's address others reach)", c.API, port)
	}
	ext, _, _ := net.SplitHostPort(c.ExternalAddress)
	return "http://" + net.JoinHostPort(ext, port), nil
}

// checkPeers checks --seeds or --persistent-peers (each id@host:port, the
// host one others can dial) and returns them without blanks or repeats.
func checkPeers(list []string) ([]string, error) {
	out := []string{}
	for _, p := range list {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		id, hp, ok := strings.Cut(p, "@")
		if _, err := peerAddr(p); err != nil || !ok {
			return nil, fmt.Errorf("%q: want NODE_ID@HOST:PORT, the node id 40 hex digits (what `gpunet node` prints as p2p:), e.g. %s@203.0.113.7:26656", p, strings.Repeat("ab", 20))
		}
		if err := checkDialAddr(hp); err != nil {
			return nil, fmt.Errorf("%q: %w", p, err)
		}
		if p = strings.ToLower(id) + "@" + hp; !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// validHostName reports whether s is a DNS name (letters, digits, hyphens
// and dots).
func validHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(s, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

// FreeAddrOn returns host:port on host with a port that was free a moment
// ago; the error says when host is no address of this machine.
//
// The port is written into a config and bound later, by another process
// perhaps: one the kernel hands out for outgoing connections (its ephemeral
// range) can be taken in between by any connect() on the machine, and was
// (a CI run: "listen tcp 127.0.0.1:37323: bind: address already in use").
// So the port is drawn at random from below that range, where only a
// listener asking for it by number can take it, and checked by listening;
// where the system leaves no such range, the kernel picks.
func FreeAddrOn(host string) (string, error) {
	lo, hi := staticPortRange()
	for try := 0; try < 64 && hi > lo; try++ {
		port := lo + rand.IntN(hi-lo)
		addr := net.JoinHostPort(host, strconv.Itoa(port))
		if !reservePort(port) {
			continue
		}
		if l, err := net.Listen("tcp", addr); err == nil {
			l.Close()
			return addr, nil
		}
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("cannot listen on %s (%w): is it an address of this machine?", host, err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return net.JoinHostPort(host, port), nil
}

// reservePort claims port for a while among the processes of this
// machine that choose ports here: two processes (tests run packages in
// parallel) that draw the same free port before either binds it would
// both write it into a config. A claim is a file in the temporary
// directory, created exclusively; it lapses after portClaimTTL, by when
// whoever claimed the port has bound it or given it up. false: another
// process claimed it lately.
func reservePort(port int) bool {
	dir := filepath.Join(os.TempDir(), "gpunet-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return true // no claims here: the listen check alone
	}
	path := filepath.Join(dir, strconv.Itoa(port))
	for range 2 {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
		if err == nil {
			f.Close()
			return true
		}
		if !os.IsExist(err) {
			return true // claims cannot be written here: the listen check alone
		}
		if st, err := os.Stat(path); err == nil && time.Since(st.ModTime()) < portClaimTTL {
			return false // claimed lately by another process
		}
		os.Remove(path) // a lapsed claim (or one just removed): claim it anew
	}
	return false
}

// portClaimTTL is how long a port claim holds (reservePort).
const portClaimTTL = 2 * time.Minute

// staticPortRange is [lo, hi): ports above the well-known and registered
// services most machines run (below 20000) and below the kernel's
// ephemeral range (net.ipv4.ip_local_port_range, 32768 by default).
func staticPortRange() (lo, hi int) {
	lo, hi = 20000, 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n < hi {
				hi = n
			}
		}
	}
	return lo, hi
}

// dialable is a listen address as a process on the same machine dials it:
// an unspecified host (0.0.0.0, ::) is loopback.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		if ip.Is6() {
			return net.JoinHostPort("::1", port)
		}
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}
