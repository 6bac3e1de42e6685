package egress

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct{ ip, want string }{
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"2606:4700:4700::1111", ""},
		{"127.0.0.1", Loopback},
		{"127.255.0.9", Loopback},
		{"::1", Loopback},
		{"::ffff:127.0.0.1", Loopback},
		{"10.1.2.3", Private},
		{"172.16.0.1", Private},
		{"172.31.255.255", Private},
		{"172.32.0.1", ""},
		{"192.168.1.1", Private},
		{"fd00::1", Private},
		{"fc00::1", Private},
		{"100.64.0.1", Shared},
		{"100.127.255.255", Shared},
		{"100.128.0.1", ""},
		{"169.254.169.254", LinkLocal},
		{"fe80::1", LinkLocal},
		{"fe80::1%eth0", LinkLocal},
		{"224.0.0.1", Multicast},
		{"ff02::1", Multicast},
		{"0.0.0.0", Unspecified},
		{"0.1.2.3", Unspecified},
		{"::", Unspecified},
		{"255.255.255.255", Reserved},
		{"240.0.0.1", Reserved},
		{"192.0.2.1", Reserved},
		{"198.18.0.1", Reserved},
		{"2001:db8::1", Reserved},
		{"2001::1", Reserved},         // Teredo
		{"::7f00:1", Reserved},        // IPv4-compatible, deprecated
		{"64:ff9b::7f00:1", Loopback}, // NAT64 of 127.0.0.1
		{"64:ff9b::808:808", ""},      // NAT64 of 8.8.8.8
		{"2002:a00:1::1", Private},    // 6to4 of 10.0.0.1
		{"2002:808:808::1", ""},       // 6to4 of 8.8.8.8
	} {
		if got := Classify(netip.MustParseAddr(c.ip)); got != c.want {
			t.Errorf("Classify(%s) = %q, want %q", c.ip, got, c.want)
		}
	}
	if got := Classify(netip.Addr{}); got != Unspecified {
		t.Errorf("Classify(zero) = %q, want %q", got, Unspecified)
	}
}

func TestEndsInNumber(t *testing.T) {
	for host, want := range map[string]bool{
		"127.1": true, "2130706433": true, "0x7f000001": true, "0x7f.1": true, "0177.0.0.1": true, "example.com.1": true, "1.2.3.4.": true,
		"example.com": false, "localhost": false, "1.example": false, "0xz": false, "": false, "example.": false,
	} {
		if got := EndsInNumber(host); got != want {
			t.Errorf("EndsInNumber(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestPolicyCheck(t *testing.T) {
	own := netip.MustParseAddr("203.0.114.7")
	p := &Policy{hostAddrs: func() ([]netip.Addr, error) { return []netip.Addr{own, netip.MustParseAddr("127.0.0.1")}, nil }}
	for _, c := range []struct {
		ip  string
		why string // "" when allowed
	}{
		{"8.8.8.8", ""},
		{"127.0.0.1", Loopback},
		{"::ffff:10.0.0.1", Private},
		{"203.0.114.7", "this host's own address"},
	} {
		err := p.Check(netip.MustParseAddr(c.ip))
		var re *RefusedError
		switch {
		case c.why == "" && err != nil:
			t.Errorf("%s: refused: %v", c.ip, err)
		case c.why != "" && (!errors.As(err, &re) || re.Why != c.why || !errors.Is(err, ErrRefused)):
			t.Errorf("%s: %v, want it refused as %s", c.ip, err, c.why)
		}
	}
	// Allowed networks pass, even this host's own address.
	p.Allow = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("203.0.114.7/32")}
	for _, ip := range []string{"10.9.9.9", "::ffff:10.0.0.1", "203.0.114.7"} {
		if err := p.Check(netip.MustParseAddr(ip)); err != nil {
			t.Errorf("%s in an allowed network: %v", ip, err)
		}
	}
	if err := p.Check(netip.MustParseAddr("192.168.0.1")); !errors.Is(err, ErrRefused) {
		t.Errorf("192.168.0.1 outside the allowed networks: %v", err)
	}
	// Without the host's addresses, it refuses rather than guess.
	p.hostAddrs = func() ([]netip.Addr, error) { return nil, errors.New("no netlink") }
	if err := p.Check(netip.MustParseAddr("8.8.8.8")); !errors.Is(err, ErrRefused) {
		t.Errorf("host addresses unknown: %v, want a refusal", err)
	}
}

// TestControlRefusesAfterResolution: a dialer with Policy.Control does
// not connect to a loopback listener, whether named by address or by a
// name that resolves to it; with the network allowed it does.
func TestControlRefusesAfterResolution(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan struct{}, 8)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	dial := func(p *Policy, host string) error {
		d := &net.Dialer{Timeout: 5 * time.Second, Control: p.Control}
		c, err := d.DialContext(context.Background(), "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err == nil {
			c.Close()
		}
		return err
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		if err := dial(&Policy{}, host); !errors.Is(err, ErrRefused) {
			t.Errorf("dial %s: %v, want refused", host, err)
		}
	}
	select {
	case <-accepted:
		t.Fatal("a refused dial reached the listener")
	case <-time.After(50 * time.Millisecond):
	}
	if err := dial(&Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, "localhost"); err != nil {
		t.Fatalf("dial with 127.0.0.0/8 allowed: %v", err)
	}
	<-accepted
}

func TestParseNetworks(t *testing.T) {
	got, err := ParseNetworks([]string{"10.0.0.0/8", " fd00::/8 ", "192.168.1.20", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "fd00::/8", "192.168.1.20/32", "::1/128"}
	for i := range want {
		if i >= len(got) || got[i].String() != want[i] {
			t.Fatalf("ParseNetworks = %v, want %v", got, want)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"10.0.0.1/8", "did you mean 10.0.0.0/8"},
		{"10.0.0.0/33", "prefix length"},
		{"lan", "e.g. 10.0.0.0/8"},
		{"", "no network given"},
		{"fe80::%eth0/10", "zone"},
		{"::ffff:10.0.0.0/104", "IPv4 form"},
	} {
		_, err := ParseNetworks([]string{c.in})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseNetworks(%q): %v, want an error saying %q", c.in, err, c.want)
		}
	}
}

// TestControlAllowsOneEndpoint: an endpoint allowed by address and port
// lets that port be dialled, and no other port of its address.
func TestControlAllowsOneEndpoint(t *testing.T) {
	p := &Policy{AllowEndpoints: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:5000")}}
	for _, c := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:5000", true},
		{"[::ffff:127.0.0.1]:5000", true},
		{"127.0.0.1:5001", false},
		{"127.0.0.2:5000", false},
		{"[::1]:5000", false},
	} {
		err := p.Control("tcp", c.addr, nil)
		if c.ok != (err == nil) || err != nil && !errors.Is(err, ErrRefused) {
			t.Errorf("Control(%s) = %v, want allowed %v", c.addr, err, c.ok)
		}
	}
}

// TestProxyOnlyWhenAllowed: the environment's proxy is used only when the
// operator allowed its address explicitly; a proxy at an address the
// policy merely tolerates (a public one), or one whose name does not
// resolve, is not used: the request goes direct, through Control.
func TestProxyOnlyWhenAllowed(t *testing.T) {
	req, _ := http.NewRequest(http.MethodGet, "https://registry.example.com/v2/", nil)
	env := func(proxy string) func(*http.Request) (*url.URL, error) {
		return func(*http.Request) (*url.URL, error) {
			if proxy == "" {
				return nil, nil
			}
			return url.Parse(proxy)
		}
	}
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "proxy.lan":
			return []netip.Addr{netip.MustParseAddr("10.0.0.3")}, nil
		case "split.lan": // one address allowed, one not
			return []netip.Addr{netip.MustParseAddr("10.0.0.3"), netip.MustParseAddr("8.8.8.8")}, nil
		}
		return nil, errors.New("no such host")
	}
	lan := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, c := range []struct {
		proxy string
		allow []netip.Prefix
		ends  []netip.AddrPort
		used  bool
	}{
		{"", lan, nil, false},
		{"http://10.0.0.3:3128", nil, nil, false},
		{"http://10.0.0.3:3128", lan, nil, true},
		{"http://8.8.8.8:3128", nil, nil, false}, // public, but not vouched for
		{"http://8.8.8.8:3128", []netip.Prefix{netip.MustParsePrefix("8.8.8.8/32")}, nil, true},
		{"http://proxy.lan:3128", lan, nil, true},
		{"http://proxy.lan:3128", nil, nil, false},
		{"http://split.lan:3128", lan, nil, false},
		{"http://nowhere.lan:3128", lan, nil, false},
		{"http://127.0.0.1:3128", nil, []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:3128")}, true},
	} {
		p := &Policy{Allow: c.allow, AllowEndpoints: c.ends, envProxy: env(c.proxy), lookup: lookup}
		u, err := p.Proxy(req)
		if err != nil || (u != nil) != c.used || u != nil && u.String() != c.proxy {
			t.Errorf("proxy %q, allowed %v %v: Proxy = %v, %v; want used %v", c.proxy, c.allow, c.ends, u, err, c.used)
		}
	}
}

// TestTransportChecksRedirects: a client on Policy.Transport does not
// follow a redirect from an allowed server to one it does not allow, and
// that server sees no connection.
func TestTransportChecksRedirects(t *testing.T) {
	var hits atomic.Int32
	inner := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("inner")) }))
	inner.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			hits.Add(1)
		}
	}
	inner.Start()
	defer inner.Close()
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no second loopback address: %v", err)
	}
	outer := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.RedirectHandler(inner.URL+"/x", http.StatusFound)}}
	outer.Start()
	defer outer.Close()
	p := &Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}, envProxy: func(*http.Request) (*url.URL, error) { return nil, nil }}
	c := &http.Client{Transport: p.Transport(nil)}
	resp, err := c.Get(outer.URL + "/start")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("followed a redirect to %s: %s", inner.URL, resp.Status)
	}
	if !errors.Is(err, ErrRefused) {
		t.Errorf("redirect: %v, want a refusal", err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server redirected to got %d connections", n)
	}
	// Allowed as an endpoint, it is reached.
	p.AllowEndpoints = []netip.AddrPort{netip.MustParseAddrPort(inner.Listener.Addr().String())}
	c = &http.Client{Transport: p.Transport(nil)}
	resp, err = c.Get(outer.URL + "/start")
	if err != nil {
		t.Fatalf("redirect to an allowed endpoint: %v", err)
	}
	resp.Body.Close()
	if n := hits.Load(); n == 0 {
		t.Error("the allowed endpoint got no connection")
	}
}
