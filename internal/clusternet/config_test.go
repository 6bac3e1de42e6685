package clusternet

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func testConfig(t *testing.T, n, rank int) Config {
	t.Helper()
	var c Config
	for i := range n {
		k, err := NewPrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		pub, err := k.PublicKey()
		if err != nil {
			t.Fatal(err)
		}
		if i == rank {
			c.PrivateKey = k
		}
		c.Members = append(c.Members, Member{Rank: i, PublicKey: pub, Endpoint: netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)}), 51820)})
	}
	c.Rank = rank
	return c
}

func TestValidate(t *testing.T) {
	if err := testConfig(t, 3, 1).Validate(); err != nil {
		t.Fatalf("a good config: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no members", func(c *Config) { c.Members = nil }, "0 members"},
		{"rank out of range", func(c *Config) { c.Rank = 3 }, "rank 3"},
		{"negative rank", func(c *Config) { c.Rank = -1 }, "rank -1"},
		{"no private key", func(c *Config) { c.PrivateKey = Key{} }, "private key is missing"},
		{"wrong private key", func(c *Config) { c.PrivateKey, _ = NewPrivateKey() }, "is not this member's private key's public key"},
		{"ranks out of order", func(c *Config) { c.Members[0].Rank, c.Members[2].Rank = 2, 0 }, "rank order"},
		{"missing public key", func(c *Config) { c.Members[2].PublicKey = Key{} }, "member 2 has no public key"},
		{"duplicate key", func(c *Config) { c.Members[2].PublicKey = c.Members[0].PublicKey }, "same public key"},
		{"endpoint without port", func(c *Config) { c.Members[0].Endpoint = netip.AddrPortFrom(c.Members[0].Endpoint.Addr(), 0) }, "endpoint"},
		{"unspecified endpoint", func(c *Config) { c.Members[0].Endpoint = netip.MustParseAddrPort("0.0.0.0:1") }, "endpoint"},
		{"ipv6 network", func(c *Config) { c.Network = netip.MustParsePrefix("fd00::/64") }, "IPv4 prefix"},
		{"host bits", func(c *Config) { c.Network = netip.MustParsePrefix("10.78.0.1/24") }, "no host bits"},
		{"network too small", func(c *Config) { c.Network = netip.MustParsePrefix("10.78.0.0/30") }, "too few"},
		{"mtu too small", func(c *Config) { c.MTU = 576 }, "mtu 576"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(t, 3, 1)
			tc.edit(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestAddresses(t *testing.T) {
	c := testConfig(t, 3, 0)
	got := c.Addresses()
	want := []string{"10.78.0.1", "10.78.0.2", "10.78.0.3"}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("rank %d: %s, want %s", i, got[i], want[i])
		}
	}
	if a := Address(netip.MustParsePrefix("10.9.0.0/16"), 300); a.String() != "10.9.1.45" {
		t.Errorf("rank 300 of 10.9.0.0/16: %s, want 10.9.1.45", a)
	}
}

func TestKeyText(t *testing.T) {
	k, _ := NewPrivateKey()
	b, _ := k.MarshalText()
	var back Key
	if err := back.UnmarshalText(b); err != nil || back != k {
		t.Fatalf("round trip of %s: %s, %v", b, back, err)
	}
	for _, bad := range []string{"", "AAAA", strings.Repeat("A", 43) + "!", "not base64 at all, really not base64 at all"} {
		if _, err := ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) accepted it", bad)
		}
	}
	// X25519's known answer (RFC 7748 section 6.1, Alice).
	priv, _ := ParseKey("dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=")
	pub, _ := priv.PublicKey()
	if want := "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo="; pub.String() != want {
		t.Errorf("public key %s, want %s", pub, want)
	}
}

func TestEnv(t *testing.T) {
	c := testConfig(t, 3, 2)
	got := strings.Join(c.Env(29500, 4, 1, "/gpunet/members"), " ")
	want := "MASTER_ADDR=10.78.0.1 MASTER_PORT=29500 WORLD_SIZE=12 RANK=9 NODE_RANK=2 LOCAL_WORLD_SIZE=4 LOCAL_RANK=1 NNODES=3 GPUNET_MEMBERS_FILE=/gpunet/members"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	mf := c.WriteMembers(4)
	if string(mf) != "10.78.0.1 slots=4\n10.78.0.2 slots=4\n10.78.0.3 slots=4\n" {
		t.Errorf("members file %q", mf)
	}
	ms, err := ParseMembers(mf)
	if err != nil || len(ms) != 3 || ms[2].Addr.String() != "10.78.0.3" || ms[2].Slots != 4 {
		t.Errorf("ParseMembers: %+v, %v", ms, err)
	}
}

func TestParseMembersErrors(t *testing.T) {
	for in, want := range map[string]string{
		"":                              "no member",
		"# only a comment\n":            "no member",
		"10.78.0.1\nnot-an-ip\n":        "line 2",
		"10.78.0.1 slots=0\n":           "slots=N",
		"10.78.0.1 cpus=3\n":            "slots=N",
		"10.78.0.1\n10.78.0.1\n":        "also on line 1",
		strings.Repeat("x", 70000):      "at most",
		"10.78.0.1 slots=99999999999\n": "slots=N",
	} {
		if _, err := ParseMembers([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseMembers(%.30q): %v, want an error containing %q", in, err, want)
		}
	}
}

func FuzzParseMembers(f *testing.F) {
	f.Add([]byte("10.78.0.1 slots=8\n10.78.0.2 slots=8\n"))
	f.Add([]byte("# gang 7\n\nfd00::1\n10.0.0.1 slots=1 slots=2\n"))
	f.Add([]byte("10.78.0.1 slots=\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := ParseMembers(data)
		if err != nil {
			return
		}
		if len(ms) == 0 || len(ms) > MaxMembers {
			t.Fatalf("%d members accepted", len(ms))
		}
		seen := map[netip.Addr]bool{}
		for _, m := range ms {
			if !m.Addr.IsValid() || m.Slots < 1 || m.Slots > 1024 || seen[m.Addr] {
				t.Fatalf("bad member accepted: %+v", m)
			}
			seen[m.Addr] = true
		}
	})
}

// TestUAPI: every other member is a peer allowed only its /32, reached at
// rank:N; only peers of a higher rank get the persistent keepalive, so the
// two sides of a pair never start handshakes in lockstep.
func TestUAPI(t *testing.T) {
	c := testConfig(t, 3, 1).withDefaults()
	got := uapi(c, 5*time.Second)
	for _, want := range []string{
		"private_key=" + c.PrivateKey.hex() + "\nlisten_port=51820\nreplace_peers=true\n",
		"public_key=" + c.Members[0].PublicKey.hex() + "\nendpoint=rank:0\npersistent_keepalive_interval=0\nreplace_allowed_ips=true\nallowed_ip=10.78.0.1/32\n",
		"public_key=" + c.Members[2].PublicKey.hex() + "\nendpoint=rank:2\npersistent_keepalive_interval=5\nreplace_allowed_ips=true\nallowed_ip=10.78.0.3/32\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("uapi lacks\n%s\nin\n%s", want, got)
		}
	}
	if strings.Contains(got, c.Members[1].PublicKey.hex()) {
		t.Errorf("uapi makes the member its own peer:\n%s", got)
	}
}

// TestMemberJSON: members as the agent reads them (the chain's record
// rendered as JSON) round-trip, a member without an endpoint omits it, and
// a bad key or endpoint is an error naming it.
func TestMemberJSON(t *testing.T) {
	c := testConfig(t, 2, 0)
	c.Members[1].Endpoint = netip.AddrPort{}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), c.PrivateKey.String()) {
		t.Fatalf("the private key is in the JSON: %s", b)
	}
	var back Config
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	back.PrivateKey = c.PrivateKey
	if err := back.Validate(); err != nil || back.Members[0] != c.Members[0] || back.Members[1] != c.Members[1] {
		t.Errorf("round trip of %s: %+v, %v", b, back.Members, err)
	}
	for _, bad := range []string{
		`{"members":[{"rank":0,"public_key":"short"}]}`,
		`{"members":[{"rank":0,"public_key":"` + c.Members[0].PublicKey.String() + `","endpoint":"10.0.0.1"}]}`,
	} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// FuzzConfig: whatever members a record holds, Validate never panics, and
// a config it accepts has distinct keys and addresses for every rank.
func FuzzConfig(f *testing.F) {
	k, _ := ParseKey("dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=")
	f.Add([]byte(`{"rank":0,"members":[{"rank":0,"public_key":"hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=","endpoint":"192.0.2.1:51820"},{"rank":1,"public_key":"3p7bfXt9wbTTW2HC7OQ1Nz+DQ8hbeGdNrfx+FG+IK08="}]}`))
	f.Add([]byte(`{"rank":1,"network":"10.9.0.0/30","mtu":1280,"members":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c Config
		if json.Unmarshal(data, &c) != nil {
			return
		}
		c.PrivateKey = k
		if c.Validate() != nil {
			return
		}
		addrs := c.Addresses()
		seen := map[netip.Addr]bool{}
		for i, a := range addrs {
			if seen[a] || !c.withDefaults().Network.Contains(a) {
				t.Fatalf("rank %d address %s repeated or outside %s", i, a, c.withDefaults().Network)
			}
			seen[a] = true
		}
	})
}
