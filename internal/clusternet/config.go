package clusternet

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
)

// KeySize is the size of a WireGuard key (Curve25519), private or public.
const KeySize = 32

// Key is a WireGuard key. Its text form is standard base64, as `wg`
// writes keys.
type Key [KeySize]byte

// String returns k in base64.
func (k Key) String() string { return base64.StdEncoding.EncodeToString(k[:]) }

// IsZero reports whether k is all zeros (no key).
func (k Key) IsZero() bool { return k == Key{} }

// hex returns k as the WireGuard UAPI writes keys.
func (k Key) hex() string { return hex.EncodeToString(k[:]) }

// MarshalText writes k in base64.
func (k Key) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a base64 key.
func (k *Key) UnmarshalText(b []byte) error {
	p, err := ParseKey(string(b))
	if err != nil {
		return err
	}
	*k = p
	return nil
}

// ParseKey reads a key in standard base64 (44 characters).
func ParseKey(s string) (Key, error) {
	var k Key
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != KeySize {
		return k, fmt.Errorf("clusternet: key %.60q is not %d bytes in standard base64", s, KeySize)
	}
	copy(k[:], b)
	return k, nil
}

// NewPrivateKey returns a fresh random private key, clamped as Curve25519
// private keys are.
func NewPrivateKey() (Key, error) {
	var k Key
	if _, err := rand.Read(k[:]); err != nil {
		return k, err
	}
	k[0] &= 248
	k[31] = (k[31] & 127) | 64
	return k, nil
}

// PublicKey returns the public key of the private key k.
func (k Key) PublicKey() (Key, error) {
	var pub Key
	priv, err := ecdh.X25519().NewPrivateKey(k[:])
	if err != nil {
		return pub, err
	}
	copy(pub[:], priv.PublicKey().Bytes())
	return pub, nil
}

// DefaultNetwork is a gang's private network unless its Config names
// another: member of rank r has 10.78.0.(r+1). It is apart from the
// testnet's 10.77.0.0/16 and from the loopback a container already has.
var DefaultNetwork = netip.MustParsePrefix("10.78.0.0/24")

// DefaultListenPort is the UDP port a member's WireGuard listens on, in the
// provider's (host's) network namespace, unless Config names another.
const DefaultListenPort = 51820

// DefaultMTU leaves room for WireGuard's 80 bytes of overhead under a
// 1500-byte underlay (IPv6 outer header, the worst case).
const DefaultMTU = 1420

// MaxMembers bounds a gang's size: every member holds a peer, a relay
// stream and a queue for each other member.
const MaxMembers = 253

// Member is what every member of a gang knows of every other: what the
// provider integration reads from the chain (each member posts its public
// key and, when it has one, the UDP endpoint others can reach it at
// directly).
type Member struct {
	// Rank is the member's node rank, 0 … n-1; its position in
	// Config.Members.
	Rank int `json:"rank"`
	// PublicKey is the member's WireGuard public key.
	PublicKey Key `json:"public_key"`
	// Endpoint is where the member's WireGuard receives UDP directly
	// (its provider's public address and port); the zero value when it
	// has none (behind NAT that no one can reach): then packets to it go
	// only through the relay.
	Endpoint netip.AddrPort `json:"endpoint,omitzero"`
}

// Config is one member's network: the agent fills it from the gang's
// record on chain (the members' keys and endpoints) and its own key.
type Config struct {
	// Rank is this member's node rank.
	Rank int `json:"rank"`
	// PrivateKey is this member's WireGuard private key, made on the
	// provider (NewPrivateKey) and never sent anywhere; its public key
	// must be Members[Rank].PublicKey.
	PrivateKey Key `json:"-"`
	// Members are all the gang's members, in rank order.
	Members []Member `json:"members"`
	// Network holds the members' addresses: rank r has the network's
	// address + 1 + r (Address). Zero: DefaultNetwork.
	Network netip.Prefix `json:"network,omitzero"`
	// ListenPort is this member's UDP port; 0: DefaultListenPort.
	ListenPort uint16 `json:"listen_port,omitempty"`
	// MTU of the member's interface; 0: DefaultMTU.
	MTU int `json:"mtu,omitempty"`
}

// withDefaults returns c with its zero fields set to the defaults.
func (c Config) withDefaults() Config {
	if !c.Network.IsValid() {
		c.Network = DefaultNetwork
	}
	if c.ListenPort == 0 {
		c.ListenPort = DefaultListenPort
	}
	if c.MTU == 0 {
		c.MTU = DefaultMTU
	}
	return c
}

// Validate says what is wrong with c, naming the field, or nil.
func (c Config) Validate() error {
	c = c.withDefaults()
	n := len(c.Members)
	if n == 0 || n > MaxMembers {
		return fmt.Errorf("clusternet: %d members: want 1 to %d", n, MaxMembers)
	}
	if !c.Network.Addr().Is4() || c.Network != c.Network.Masked() {
		return fmt.Errorf("clusternet: network %s: want an IPv4 prefix with no host bits (e.g. %s)", c.Network, DefaultNetwork)
	}
	if hosts := 1 << (32 - c.Network.Bits()); hosts < n+2 {
		return fmt.Errorf("clusternet: network %s holds %d addresses, too few for %d members and the network and broadcast addresses", c.Network, hosts, n)
	}
	if c.MTU < 1280 || c.MTU > 65535-80 {
		return fmt.Errorf("clusternet: mtu %d: want 1280 to %d", c.MTU, 65535-80)
	}
	if c.Rank < 0 || c.Rank >= n {
		return fmt.Errorf("clusternet: rank %d: want 0 to %d", c.Rank, n-1)
	}
	if c.PrivateKey.IsZero() {
		return errors.New("clusternet: private key is missing")
	}
	pub, err := c.PrivateKey.PublicKey()
	if err != nil {
		return fmt.Errorf("clusternet: private key: %w", err)
	}
	seen := make(map[Key]int, n)
	for i, m := range c.Members {
		if m.Rank != i {
			return fmt.Errorf("clusternet: members[%d] has rank %d: members must be in rank order 0 … %d", i, m.Rank, n-1)
		}
		if m.PublicKey.IsZero() {
			return fmt.Errorf("clusternet: member %d has no public key", i)
		}
		if j, dup := seen[m.PublicKey]; dup {
			return fmt.Errorf("clusternet: members %d and %d have the same public key %s", j, i, m.PublicKey)
		}
		seen[m.PublicKey] = i
		if m.Endpoint.IsValid() {
			if a := m.Endpoint.Addr(); a.IsUnspecified() || a.IsMulticast() || m.Endpoint.Port() == 0 {
				return fmt.Errorf("clusternet: member %d endpoint %s: want a unicast address and a port", i, m.Endpoint)
			}
		}
	}
	if c.Members[c.Rank].PublicKey != pub {
		return fmt.Errorf("clusternet: members[%d].public_key %s is not this member's private key's public key %s", c.Rank, c.Members[c.Rank].PublicKey, pub)
	}
	return nil
}

// Address returns the private address of the member of rank r in network
// (DefaultNetwork when network is the zero value).
func Address(network netip.Prefix, r int) netip.Addr {
	if !network.IsValid() {
		network = DefaultNetwork
	}
	a := network.Masked().Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v += uint32(r) + 1
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// Addresses returns the members' private addresses in rank order.
func (c Config) Addresses() []netip.Addr {
	c = c.withDefaults()
	out := make([]netip.Addr, len(c.Members))
	for i := range out {
		out[i] = Address(c.Network, i)
	}
	return out
}
