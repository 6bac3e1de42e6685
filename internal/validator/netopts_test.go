package validator

import (
	"fmt"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	lt "github.com/gpunet/gpunet/internal/ledger/ledgertest"
)

var (
	idA = strings.Repeat("ab", 20)
	idB = strings.Repeat("cd", 20)
)

func loopbackConfig() Config {
	return Config{ChainID: "c", API: "127.0.0.1:8080", P2P: "127.0.0.1:26656", RPC: "127.0.0.1:26657", AdvertiseAPI: "http://127.0.0.1:8080", BlockTime: Duration(time.Second)}
}

// TestNetOptionsApply: each flag's value lands in its config key; the
// advertised API follows the API's address unless set; every bad value is
// refused with an error naming its flag.
func TestNetOptionsApply(t *testing.T) {
	yes := true
	for _, tc := range []struct {
		name string
		o    NetOptions
		want func(c *Config) bool
		err  []string // the error must say each; nil: no error
	}{
		{name: "nothing", o: NetOptions{}, want: func(c *Config) bool { return reflect.DeepEqual(*c, loopbackConfig()) }},
		{name: "listen moves every service, keeping ports", o: NetOptions{Listen: "127.0.0.2"}, want: func(c *Config) bool {
			return c.API == "127.0.0.2:8080" && c.P2P == "127.0.0.2:26656" && c.RPC == "127.0.0.2:26657" && c.AdvertiseAPI == "http://127.0.0.2:8080"
		}},
		{name: "per service over listen", o: NetOptions{Listen: "::1", P2P: "[::1]:36656"}, want: func(c *Config) bool {
			return c.API == "[::1]:8080" && c.P2P == "[::1]:36656" && c.RPC == "[::1]:26657"
		}},
		{name: "every interface with an external address", o: NetOptions{Listen: "0.0.0.0", ExternalAddress: "203.0.113.7"}, want: func(c *Config) bool {
			return c.P2P == "0.0.0.0:26656" && c.ExternalAddress == "203.0.113.7:26656" && c.AdvertiseAPI == "http://203.0.113.7:8080" && c.P2PAddress() == "203.0.113.7:26656"
		}},
		{name: "external address with its own port, a DNS name", o: NetOptions{ExternalAddress: "val1.example.org:443"}, want: func(c *Config) bool {
			return c.ExternalAddress == "val1.example.org:443" && c.AdvertiseAPI == "http://127.0.0.1:8080"
		}},
		{name: "advertised API", o: NetOptions{Listen: "0.0.0.0", AdvertiseAPI: "https://node.example.org/"}, want: func(c *Config) bool {
			return c.AdvertiseAPI == "https://node.example.org" && c.API == "0.0.0.0:8080"
		}},
		{name: "API port 0", o: NetOptions{API: "127.0.0.1:0"}, want: func(c *Config) bool { return c.API == "127.0.0.1:0" }},
		{name: "peers and seeds, cleaned", o: NetOptions{PersistentPeers: []string{idA + "@198.51.100.2:26656", " ", strings.ToUpper(idA) + "@198.51.100.2:26656", idB + "@node2.example.org:26656"}, Seeds: []string{idB + "@10.0.0.9:26656"}},
			want: func(c *Config) bool {
				return strings.Join(c.PersistentPeers, ",") == idA+"@198.51.100.2:26656,"+idB+"@node2.example.org:26656" && strings.Join(c.Seeds, ",") == idB+"@10.0.0.9:26656"
			}},
		{name: "no peers", o: NetOptions{PersistentPeers: []string{}}, want: func(c *Config) bool { return c.PersistentPeers != nil && len(c.PersistentPeers) == 0 }},
		{name: "policy set", o: NetOptions{AddrBookStrict: &yes}, want: func(c *Config) bool { return c.AddrBookStrict != nil && *c.AddrBookStrict && c.AllowDuplicateIP == nil }},

		{name: "listen with a port", o: NetOptions{Listen: "0.0.0.0:26656"}, err: []string{"--listen", "without a port"}},
		{name: "listen nonsense", o: NetOptions{Listen: "not a host"}, err: []string{"--listen", "address of this machine"}},
		{name: "p2p without port", o: NetOptions{P2P: "0.0.0.0"}, err: []string{"--p2p", "host:port"}},
		{name: "p2p port 0", o: NetOptions{P2P: "0.0.0.0:0"}, err: []string{"--p2p", "[1, 65535]"}},
		{name: "rpc without host", o: NetOptions{RPC: ":26657"}, err: []string{"--rpc", "no host"}},
		{name: "api port too big", o: NetOptions{API: "127.0.0.1:70000"}, err: []string{"--api", "[0, 65535]"}},
		{name: "external unspecified", o: NetOptions{ExternalAddress: "0.0.0.0"}, err: []string{"--external-address", "cannot be dialled"}},
		{name: "external bad port", o: NetOptions{ExternalAddress: "203.0.113.7:x"}, err: []string{"--external-address", "port"}},
		{name: "advertise not a URL", o: NetOptions{AdvertiseAPI: "203.0.113.7:8080"}, err: []string{"--advertise-api", "http(s) URL"}},
		{name: "advertise unspecified", o: NetOptions{AdvertiseAPI: "http://0.0.0.0:8080"}, err: []string{"--advertise-api", "cannot be reached"}},
		{name: "every interface, nothing to advertise", o: NetOptions{Listen: "0.0.0.0"}, err: []string{"every interface", "--advertise-api", "--external-address"}},
		{name: "peer without id", o: NetOptions{PersistentPeers: []string{"198.51.100.2:26656"}}, err: []string{"--persistent-peers", "NODE_ID@HOST:PORT"}},
		{name: "peer with a short id", o: NetOptions{PersistentPeers: []string{"abcd@198.51.100.2:26656"}}, err: []string{"--persistent-peers", "40 hex digits"}},
		{name: "peer unspecified", o: NetOptions{PersistentPeers: []string{idA + "@0.0.0.0:26656"}}, err: []string{"--persistent-peers", "cannot be dialled"}},
		{name: "seed without port", o: NetOptions{Seeds: []string{idA + "@198.51.100.2"}}, err: []string{"--seeds", "NODE_ID@HOST:PORT"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := loopbackConfig()
			err := tc.o.Apply(&c)
			if tc.err == nil {
				if err != nil {
					t.Fatal(err)
				}
				if !tc.want(&c) {
					t.Errorf("config after Apply: %+v", c)
				}
				if err := c.Validate(); err != nil {
					t.Errorf("Validate after Apply: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; config %+v", c)
			}
			for _, w := range tc.err {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestP2PPolicy: CometBFT's strict address book and one peer per IP,
// except on a network of loopback or private addresses only; the config
// overrides either.
func TestP2PPolicy(t *testing.T) {
	no, yes := false, true
	for _, tc := range []struct {
		name                string
		edit                func(c *Config)
		strict, duplicateIP bool
	}{
		{"loopback", func(c *Config) { c.PersistentPeers = []string{idA + "@127.0.0.2:26656"} }, false, true},
		{"private", func(c *Config) {
			c.P2P, c.PersistentPeers, c.Seeds = "10.77.0.2:26656", []string{idA + "@10.77.0.3:26656"}, []string{idB + "@192.168.1.4:26656"}
		}, false, true},
		{"public external address", func(c *Config) { c.ExternalAddress = "203.0.113.7:26656" }, true, false},
		{"every interface, no external address", func(c *Config) { c.P2P = "0.0.0.0:26656" }, true, false},
		{"private behind NAT, external address private", func(c *Config) { c.P2P, c.ExternalAddress = "0.0.0.0:26656", "10.0.0.5:26656" }, false, true},
		{"a public peer", func(c *Config) { c.PersistentPeers = []string{idA + "@127.0.0.2:26656", idB + "@198.51.100.2:26656"} }, true, false},
		{"a peer by DNS name", func(c *Config) { c.Seeds = []string{idA + "@seed.example.org:26656"} }, true, false},
		{"public, lax by config", func(c *Config) {
			c.ExternalAddress, c.AddrBookStrict, c.AllowDuplicateIP = "203.0.113.7:26656", &no, &yes
		}, false, true},
		{"loopback, strict by config", func(c *Config) { c.AddrBookStrict = &yes }, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := loopbackConfig()
			tc.edit(&c)
			strict, dup := c.P2PPolicy()
			if strict != tc.strict || dup != tc.duplicateIP {
				t.Errorf("P2PPolicy = strict %v, duplicate IPs %v; want %v, %v", strict, dup, tc.strict, tc.duplicateIP)
			}
			cfg := cmtConfig(t.TempDir(), &c)
			if cfg.P2P.AddrBookStrict != tc.strict || cfg.P2P.AllowDuplicateIP != tc.duplicateIP || cfg.P2P.ExternalAddress != c.ExternalAddress {
				t.Errorf("CometBFT's p2p config: strict %v, duplicate IPs %v, external %q", cfg.P2P.AddrBookStrict, cfg.P2P.AllowDuplicateIP, cfg.P2P.ExternalAddress)
			}
		})
	}
}

// TestInitNetOptions: init's homes listen on --listen's host, with free
// ports, and take the given peers besides each other; a single home takes
// its addresses as given and keeps them across a reload; what would be
// the same for several homes is refused.
func TestInitNetOptions(t *testing.T) {
	peer := idA + "@198.51.100.2:26656"
	home := t.TempDir()
	homes, err := Init(home, InitOptions{ChainID: "n", Validators: 2, Genesis: lt.Genesis(1, "alice"),
		Net: NetOptions{Listen: "127.0.0.2", PersistentPeers: []string{peer}}})
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range homes {
		c, err := LoadConfig(h)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range []string{c.API, c.P2P, c.RPC} {
			if !strings.HasPrefix(a, "127.0.0.2:") {
				t.Errorf("home %d: address %s not on --listen 127.0.0.2", i, a)
			}
		}
		if len(c.PersistentPeers) != 2 || c.PersistentPeers[0] != peer || !strings.HasSuffix(c.PersistentPeers[1], "@127.0.0.2:"+strings.Split(c.PersistentPeers[1], ":")[1]) {
			t.Errorf("home %d: peers %v, want %s and the other home", i, c.PersistentPeers, peer)
		}
		if strict, _ := c.P2PPolicy(); !strict {
			t.Errorf("home %d: a public peer, yet the address book is not strict", i)
		}
	}

	// Every interface, told what to advertise: free ports, and the
	// external address's host for the API.
	every := t.TempDir()
	if _, err := Init(every, InitOptions{ChainID: "n", Validators: 1, Genesis: lt.Genesis(1, "alice"), Net: NetOptions{Listen: "0.0.0.0", ExternalAddress: "203.0.113.7"}}); err != nil {
		t.Fatal(err)
	}
	if c, err := LoadConfig(every); err != nil || !strings.HasPrefix(c.P2P, "0.0.0.0:") || c.AdvertiseAPI != "http://203.0.113.7:"+strings.TrimPrefix(c.API, "0.0.0.0:") {
		t.Errorf("init --listen 0.0.0.0 --external-address 203.0.113.7: %+v, %v", c, err)
	}

	one := t.TempDir()
	if _, err := Init(one, InitOptions{ChainID: "n", Validators: 1, Genesis: lt.Genesis(1, "alice"),
		Net: NetOptions{API: "0.0.0.0:26680", P2P: "0.0.0.0:26656", RPC: "127.0.0.1:26657", ExternalAddress: "203.0.113.7", Seeds: []string{peer}}}); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(one)
	if err != nil {
		t.Fatal(err)
	}
	if c.API != "0.0.0.0:26680" || c.P2P != "0.0.0.0:26656" || c.RPC != "127.0.0.1:26657" || c.ExternalAddress != "203.0.113.7:26656" ||
		c.AdvertiseAPI != "http://203.0.113.7:26680" || strings.Join(c.Seeds, ",") != peer {
		t.Errorf("one validator's config: %+v", c)
	}
	if strict, dup := c.P2PPolicy(); !strict || dup {
		t.Errorf("a public node: strict %v, duplicate IPs %v", strict, dup)
	}

	for _, tc := range []struct {
		o    InitOptions
		want string
	}{
		{InitOptions{Validators: 2, Net: NetOptions{P2P: "0.0.0.0:26656"}}, "go with --validators 1"},
		{InitOptions{Validators: 1, Net: NetOptions{Listen: "203.0.113.250"}}, "--listen"},
		{InitOptions{Validators: 1, Net: NetOptions{Listen: "0.0.0.0"}}, "--advertise-api"},
		{InitOptions{Validators: 3, Net: NetOptions{Listen: "0.0.0.0"}}, "one validator's home per machine"},
		{InitOptions{Validators: 1, Net: NetOptions{PersistentPeers: []string{"nope"}}}, "--persistent-peers"},
	} {
		h := t.TempDir() + "/h"
		tc.o.ChainID, tc.o.Genesis = "n", lt.Genesis(1, "alice")
		if _, err := Init(h, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Init %+v: %v, want an error saying %q", tc.o.Net, err, tc.want)
		}
	}
}

// TestValidateNetKeys: a config whose external_address, persistent_peers
// or seeds CometBFT could not use is refused at load, naming the key.
func TestValidateNetKeys(t *testing.T) {
	for _, tc := range []struct {
		edit func(c *Config)
		want string
	}{
		{func(c *Config) { c.ExternalAddress = "0.0.0.0:26656" }, "external_address"},
		{func(c *Config) { c.ExternalAddress = "203.0.113.7" }, "external_address"},
		{func(c *Config) { c.PersistentPeers = []string{"127.0.0.2:26656"} }, "persistent_peers"},
		{func(c *Config) { c.Seeds = []string{"abcd@127.0.0.2:26656"} }, "seeds"},
	} {
		c := loopbackConfig()
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Validate %+v: %v, want an error naming %s", c, err, tc.want)
		}
	}
}

// TestFreeAddrIsOutsideTheEphemeralRange: a port chosen for a config and
// bound later must not be one the kernel hands to outgoing connections,
// or any connect() on the machine can take it first (a CI run: "bind:
// address already in use" on a port FreeAddr had just returned).
func TestFreeAddrIsOutsideTheEphemeralRange(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skip("no /proc/sys/net/ipv4/ip_local_port_range on this system")
	}
	var ephemeral int
	fmt.Sscan(string(b), &ephemeral)
	if ephemeral <= 20000 {
		t.Skipf("the ephemeral range starts at %d: no static range below it", ephemeral)
	}
	seen := map[string]bool{}
	for range 50 {
		addr, err := FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		_, p, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(p)
		if port < 20000 || port >= ephemeral {
			t.Fatalf("FreeAddr gave %s: want a port in [20000, %d)", addr, ephemeral)
		}
		seen[addr] = true
	}
	if len(seen) < 40 {
		t.Errorf("50 calls gave only %d distinct addresses: the draw is not random", len(seen))
	}
}

// TestFreeAddrClaimsItsPort: two processes drawing ports at once must not
// both get one that neither has bound yet: a port FreeAddr returned is
// claimed for a while, and not returned again meanwhile (a CI run: two
// test processes' nodes on one port, "bind: address already in use").
func TestFreeAddrClaimsItsPort(t *testing.T) {
	lo, hi := staticPortRange()
	if hi <= lo {
		t.Skip("no static port range on this system")
	}
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, p, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(p)
	if reservePort(port) {
		t.Fatalf("port %d, just returned by FreeAddr, could be claimed again", port)
	}
}
