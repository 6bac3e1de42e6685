// Package egress decides which addresses a node may connect to when a
// stranger chose the URL. A job's URL inputs are written by whoever
// submits the job and fetched by the provider that runs it: without a
// check, a URL could reach into the provider's own network (its loopback,
// its LAN, the cloud's metadata service at 169.254.169.254). A Policy
// refuses every address that is not public unicast, and the host's own
// addresses, unless its operator allowed the address's network.
//
// The check belongs on the address actually dialled, after name
// resolution (Policy.Control, for net.Dialer.Control): a name checked
// before the dial may resolve to another address when dialled (DNS
// rebinding), and a redirect dials anew. Classify also serves checks of
// literal addresses in URLs before anything is dialled. Transport makes
// an HTTP transport whose every connection is checked so, for clients
// that follow redirects or take a proxy from the environment (a
// registry's: package oci).
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"
)

// ErrRefused is matched (errors.Is) by every refusal of a Policy.
var ErrRefused = errors.New("address refused")

// RefusedError is a connection a Policy refused.
type RefusedError struct {
	Addr netip.Addr
	// Why is the address's class: what Classify says, or "this host's
	// own address".
	Why string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("address %s refused: it is %s, not a public address", e.Addr, e.Why)
}

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Address classes Classify returns.
const (
	Loopback    = "loopback"
	Private     = "private"     // RFC 1918, RFC 4193 (fc00::/7), site-local, local-use NAT64
	Shared      = "shared"      // RFC 6598 carrier-grade NAT, 100.64.0.0/10
	LinkLocal   = "link-local"  // 169.254.0.0/16 (cloud metadata services), fe80::/10
	Multicast   = "multicast"   // 224.0.0.0/4, ff00::/8
	Unspecified = "unspecified" // 0.0.0.0/8 ("this network"), ::
	Reserved    = "reserved"    // documentation, benchmarking, future use, broadcast, IETF assignments
)

// ranges are the IPv4 and IPv6 networks that are not public unicast, most
// specific first where they nest. IPv6 outside 2000::/3 is Reserved unless
// listed here.
var ranges = []struct {
	p     netip.Prefix
	class string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), Unspecified},
	{netip.MustParsePrefix("10.0.0.0/8"), Private},
	{netip.MustParsePrefix("100.64.0.0/10"), Shared},
	{netip.MustParsePrefix("127.0.0.0/8"), Loopback},
	{netip.MustParsePrefix("169.254.0.0/16"), LinkLocal},
	{netip.MustParsePrefix("172.16.0.0/12"), Private},
	{netip.MustParsePrefix("192.0.0.0/24"), Reserved},
	{netip.MustParsePrefix("192.0.2.0/24"), Reserved},
	{netip.MustParsePrefix("192.88.99.0/24"), Reserved},
	{netip.MustParsePrefix("192.168.0.0/16"), Private},
	{netip.MustParsePrefix("198.18.0.0/15"), Reserved},
	{netip.MustParsePrefix("198.51.100.0/24"), Reserved},
	{netip.MustParsePrefix("203.0.113.0/24"), Reserved},
	{netip.MustParsePrefix("224.0.0.0/4"), Multicast},
	{netip.MustParsePrefix("240.0.0.0/4"), Reserved}, // and 255.255.255.255

	{netip.MustParsePrefix("::/128"), Unspecified},
	{netip.MustParsePrefix("::1/128"), Loopback},
	{netip.MustParsePrefix("64:ff9b:1::/48"), Private},
	{netip.MustParsePrefix("100::/64"), Reserved},
	{netip.MustParsePrefix("2001:db8::/32"), Reserved},
	{netip.MustParsePrefix("2001::/23"), Reserved}, // Teredo and other IETF assignments
	{netip.MustParsePrefix("3fff::/20"), Reserved},
	{netip.MustParsePrefix("fc00::/7"), Private},
	{netip.MustParsePrefix("fe80::/10"), LinkLocal},
	{netip.MustParsePrefix("fec0::/10"), Private},
	{netip.MustParsePrefix("ff00::/8"), Multicast},
}

var (
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
	nat64          = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour      = netip.MustParsePrefix("2002::/16")
)

// Classify returns the class of ip when it is not a public unicast
// address (Loopback, Private, …), or "" when it is. An IPv4 address
// written in IPv6 (::ffff:a.b.c.d), or embedded in a NAT64 (64:ff9b::/96)
// or 6to4 (2002::/16) address, is classified as the IPv4 address it
// reaches. The invalid zero Addr is Unspecified.
func Classify(ip netip.Addr) string {
	if !ip.IsValid() {
		return Unspecified
	}
	ip = ip.WithZone("").Unmap()
	if ip.Is6() {
		b := ip.As16()
		switch {
		case nat64.Contains(ip):
			return Classify(netip.AddrFrom4([4]byte(b[12:16])))
		case sixToFour.Contains(ip):
			return Classify(netip.AddrFrom4([4]byte(b[2:6])))
		}
	}
	for _, r := range ranges {
		if r.p.Contains(ip) {
			return r.class
		}
	}
	if ip.Is6() && !globalUnicast6.Contains(ip) {
		return Reserved
	}
	return ""
}

// EndsInNumber reports whether host, not itself an IP address, would still
// be read as an IPv4 address by a resolver: its last label is a number
// ("127.1", "2130706433", "0x7f.1", "0177.0.0.1"). No top-level domain is
// numeric, so such a host names no name; it is an address in a form that
// netip does not parse, and resolvers (inet_aton) do.
func EndsInNumber(host string) bool {
	host = strings.TrimSuffix(host, ".")
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	digits := "0123456789"
	if h, ok := strings.CutPrefix(strings.ToLower(last), "0x"); ok {
		last, digits = h, "0123456789abcdef"
		if last == "" {
			return true
		}
	}
	return strings.Trim(last, digits) == ""
}

// Policy says which addresses may be dialled. Its zero value allows public
// unicast addresses only (Classify says ""), except this host's own.
type Policy struct {
	// Allow are networks that may be dialled although they are not
	// public, or are this host's (e.g. 10.0.0.0/8 for a data server on
	// the provider's LAN).
	Allow []netip.Prefix
	// AllowEndpoints are single address:port endpoints that may be
	// dialled although their address is not public, or is this host's:
	// one server its operator vouches for (a devnet's own registry)
	// without the rest of that address's ports. Only Control sees ports;
	// Check, given an address alone, does not consult them.
	AllowEndpoints []netip.AddrPort

	// hostAddrs lists this host's addresses; nil: its interfaces'.
	hostAddrs func() ([]netip.Addr, error)
	// envProxy is the environment's proxy for a request; nil:
	// http.ProxyFromEnvironment.
	envProxy func(*http.Request) (*url.URL, error)
	// lookup resolves a proxy's name; nil: net.DefaultResolver.
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

// Check returns nil when p lets ip be dialled, and otherwise a
// *RefusedError, or an error matching ErrRefused when this host's own
// addresses cannot be listed (it then refuses, rather than guess).
func (p *Policy) Check(ip netip.Addr) error {
	ip = ip.WithZone("").Unmap()
	for _, n := range p.Allow {
		if n.Contains(ip) {
			return nil
		}
	}
	if c := Classify(ip); c != "" {
		return &RefusedError{Addr: ip, Why: c}
	}
	// A public address of this host reaches what listens on all its
	// interfaces, from the inside: not a stranger's to dial.
	list := p.hostAddrs
	if list == nil {
		list = interfaceAddrs
	}
	own, err := list()
	if err != nil {
		return fmt.Errorf("%w: cannot list this host's own addresses to refuse them: %v", ErrRefused, err)
	}
	if slices.Contains(own, ip) {
		return &RefusedError{Addr: ip, Why: "this host's own address"}
	}
	return nil
}

// Control is for net.Dialer.Control: it refuses, with an error matching
// ErrRefused, to connect to an address p does not allow. It is called
// after name resolution, for each address the dialer tries, so it sees
// the address actually dialled.
func (p *Policy) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s %q is not an IP address and port", ErrRefused, network, address)
	}
	if p.allowsEndpoint(ap) {
		return nil
	}
	return p.Check(ap.Addr())
}

func (p *Policy) allowsEndpoint(ap netip.AddrPort) bool {
	ip := ap.Addr().WithZone("").Unmap()
	for _, e := range p.AllowEndpoints {
		if e.Port() == ap.Port() && e.Addr().WithZone("").Unmap() == ip {
			return true
		}
	}
	return false
}

// allowsExplicitly reports whether the operator named ip's network, or ip
// itself, in p (Allow, or an endpoint of AllowEndpoints at any port).
func (p *Policy) allowsExplicitly(ip netip.Addr) bool {
	ip = ip.WithZone("").Unmap()
	for _, n := range p.Allow {
		if n.Contains(ip) {
			return true
		}
	}
	for _, e := range p.AllowEndpoints {
		if e.Addr().WithZone("").Unmap() == ip {
			return true
		}
	}
	return false
}

// Proxy is for http.Transport.Proxy: the proxy the environment names for
// req (HTTPS_PROXY, HTTP_PROXY, NO_PROXY, as http.ProxyFromEnvironment
// reads them) when every address of the proxy's host is one the operator
// allowed explicitly (in Allow, or an endpoint's address), and otherwise
// none: the request goes direct, checked by Control. A proxy connects to
// the target itself, where Control cannot check it, so a proxy p merely
// tolerates (any public address) would carry a stranger's URL into the
// network the proxy sits in; allowing the proxy's address is the
// operator vouching for it.
func (p *Policy) Proxy(req *http.Request) (*url.URL, error) {
	env := p.envProxy
	if env == nil {
		env = http.ProxyFromEnvironment
	}
	u, err := env(req)
	if err != nil || u == nil {
		return nil, nil
	}
	host := u.Hostname()
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else {
		lookup := p.lookup
		if lookup == nil {
			lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
				return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			}
		}
		if addrs, err = lookup(req.Context(), host); err != nil {
			return nil, nil
		}
	}
	if len(addrs) == 0 {
		return nil, nil
	}
	for _, ip := range addrs {
		if !p.allowsExplicitly(ip) {
			return nil, nil
		}
	}
	return u, nil
}

// Transport returns a copy of base (nil: http.DefaultTransport's
// settings) whose every connection, redirects' included, is dialled
// through p (Control, after name resolution) and whose proxy is the one
// Proxy allows. base's own dial functions are dropped: a dialler of its
// own would connect unchecked.
func (p *Policy) Transport(base *http.Transport) *http.Transport {
	if base == nil {
		base = http.DefaultTransport.(*http.Transport)
	}
	t := base.Clone()
	t.DialTLSContext = nil
	//lint:ignore SA1019 a deprecated dialler of base's would bypass DialContext too
	t.Dial, t.DialTLS = nil, nil
	t.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: p.Control}).DialContext
	t.Proxy = p.Proxy
	return t
}

func interfaceAddrs() ([]netip.Addr, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(as))
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out, nil
}

// ParseNetworks parses networks to allow (Policy.Allow), e.g. "10.0.0.0/8",
// "fd00::/8", or a single address ("192.168.1.20", taken as /32 or
// /128). Its errors name the entry at fault and what would be right.
func ParseNetworks(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			return nil, errors.New(`"": no network given: want one like 10.0.0.0/8 or fd00::/8`)
		}
		if strings.Contains(s, "%") {
			return nil, fmt.Errorf("%q: a zone (%%…) is not allowed: write the network alone, e.g. fe80::/10", s)
		}
		var p netip.Prefix
		if a, err := netip.ParseAddr(s); err == nil {
			p = netip.PrefixFrom(a, a.BitLen())
		} else if p, err = netip.ParsePrefix(s); err != nil {
			return nil, fmt.Errorf("%q: not a network: want an address, a slash and a prefix length, e.g. 10.0.0.0/8 or fd00::/8", s)
		}
		if p.Addr().Is4In6() {
			return nil, fmt.Errorf("%q: write an IPv4 network in IPv4 form, e.g. 10.0.0.0/8", s)
		}
		if m := p.Masked(); m != p {
			return nil, fmt.Errorf("%q: the address has bits set past the /%d prefix: did you mean %s?", s, p.Bits(), m)
		}
		out = append(out, p)
	}
	return out, nil
}
