package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
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
