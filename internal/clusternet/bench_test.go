package clusternet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/gpunet/gpunet/examples/allreduce/ring"
)

// benchN is the all-reduced vector's length: 8 MiB of int64s.
const benchN = 1 << 20

// throughput holds the sub-benchmarks' MB/s, for the ratios.
var throughput sync.Map

// BenchmarkAllReduce: the example's ring all-reduce among three ranks of
// this process, over plain loopback TCP and over the private network
// (three member namespaces, WireGuard's UDP on this namespace's
// loopback; and all through the relay), in the same run. MB/s is of the
// vector all-reduced; the private network's cases also report their ratio
// to loopback (issue 30 targets ≥ 0.5), and every case its CPU time.
func BenchmarkAllReduce(b *testing.B) {
	b.Run("loopback", func(b *testing.B) {
		listen := func(int, string) (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
		benchRing(b, "loopback", nil, listen)
	})
	b.Run("wireguard", func(b *testing.B) { benchGang(b, "wireguard", false, 0) })
	// Jumbo frames (a gang in one site whose network carries 9000-byte
	// frames may set Config.MTU 8920): the same bytes in a sixth of the
	// packets, so what costs per packet shrinks and what costs per byte
	// (the cipher) stays.
	b.Run("wireguard-mtu8920", func(b *testing.B) { benchGang(b, "wireguard-mtu8920", false, 8920) })
	b.Run("wireguard-relay", func(b *testing.B) { benchGang(b, "wireguard-relay", true, 0) })
}

// benchGang runs the ring over three members' private network: WireGuard's
// UDP on this namespace's loopback, or, with relayed, no endpoints and
// every packet through a relay hub and its agents on loopback; mtu is the
// members' (0: DefaultMTU).
func benchGang(b *testing.B, name string, relayed bool, mtu int) {
	needNetns(b)
	var members []Member
	var keys []Key
	for i := range 3 {
		k, _ := NewPrivateKey()
		pub, _ := k.PublicKey()
		keys = append(keys, k)
		m := Member{Rank: i, PublicKey: pub}
		if !relayed {
			m.Endpoint = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(41820+i))
		}
		members = append(members, m)
	}
	var hr *hubRelay
	if relayed {
		hr = newHubRelay(b, 3)
	}
	nss := make([]string, 3)
	var nets []*Net
	for i := range 3 {
		c := Config{Rank: i, PrivateKey: keys[i], Members: members, ListenPort: uint16(41820 + i), MTU: mtu}
		nss[i] = addNS(b, fmt.Sprintf("gcnb%d-m%d", os.Getpid(), i))
		o := Options{MemberNS: nsPath(nss[i])}
		if hr != nil {
			o.Relay = hr.forMember(i)
		}
		n, err := Up(c, o)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { n.Close() })
		if hr != nil {
			hr.attach(i, n)
		}
		nets = append(nets, n)
	}
	listen := func(r int, _ string) (net.Listener, error) {
		return listenIn(nss[r], netip.AddrPortFrom(Address(DefaultNetwork, r), 7100).String())
	}
	benchRing(b, name, nss, listen)
	for i, n := range nets {
		if s := n.Stats(); relayed != (s.RelayRecv > 0) || relayed == (s.DirectRecv > 0) {
			b.Fatalf("member %d: %+v: the packets took the wrong path", i, s)
		}
	}
	lo, _ := throughput.Load("loopback")
	wg, _ := throughput.Load(name)
	if lo, ok := lo.(float64); ok && lo > 0 {
		b.ReportMetric(wg.(float64)/lo, "x_loopback")
	}
}

// cpuTime is this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchRing connects three ranks (listening with listen; dialling from
// nss[rank] when nss is set) and all-reduces a vector b.N times.
func benchRing(b *testing.B, name string, nss []string, listen func(rank int, addr string) (net.Listener, error)) {
	const world = 3
	ls := make([]net.Listener, world)
	for r := range world {
		l, err := listen(r, "")
		if err != nil {
			b.Fatal(err)
		}
		ls[r] = l
	}
	// Each rank dials the next one's listener, then accepts the previous.
	next := make([]net.Conn, world)
	prev := make([]net.Conn, world)
	ctx, cancel := context.WithTimeout(b.Context(), 60*time.Second)
	defer cancel()
	for r := range world {
		to := ls[(r+1)%world].Addr().String()
		var err error
		for {
			if nss != nil {
				next[r], err = dialFrom(ctx, nss[r], to)
			} else {
				next[r], err = (&net.Dialer{}).DialContext(ctx, "tcp", to)
			}
			if err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			b.Fatalf("rank %d dial %s: %v", r, to, err)
		}
		prev[(r+1)%world], err = ls[(r+1)%world].Accept()
		if err != nil {
			b.Fatal(err)
		}
	}
	for r := range world {
		ls[r].Close()
		defer next[r].Close()
		defer prev[r].Close()
	}
	vs := make([][]int64, world)
	for r := range world {
		vs[r] = ring.Input(1, r, benchN)
	}
	want := ring.Digest(ring.Sum(1, world, benchN))
	reduce := func() {
		var wg sync.WaitGroup
		errs := make([]error, world)
		for r := range world {
			wg.Add(1)
			go func() { defer wg.Done(); errs[r] = ring.AllReduce(next[r], prev[r], r, world, vs[r]) }()
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				b.Fatalf("rank %d: %v", r, err)
			}
		}
	}
	// A first all-reduce, untimed, checks the result (and warms the
	// path: WireGuard's handshakes, the relay's streams).
	reduce()
	for r := range world {
		if d := ring.Digest(vs[r]); d != want {
			b.Fatalf("rank %d: sha256 %s, want the one-process %s", r, d, want)
		}
	}
	b.SetBytes(8 * benchN)
	b.ResetTimer()
	cpu0 := cpuTime()
	for b.Loop() {
		reduce()
	}
	cpu := cpuTime() - cpu0
	b.StopTimer()
	// CPU time (user and system, all threads) per all-reduce: what the
	// path costs whatever else the machine runs.
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
	throughput.Store(name, float64(8*benchN*b.N)/b.Elapsed().Seconds()/1e6)
}

// BenchmarkPathCost: what a byte costs on each path, on this machine, in
// one run: WireGuard seals and opens every 1420-byte packet with
// ChaCha20-Poly1305 (wireguard-go uses golang.org/x/crypto's), where
// loopback TCP copies 64 KiB segments in the kernel (a memmove here).
// Their MB/s bound the private network's ratio to loopback when the CPU
// is the limit (BENCHMARKS.md).
func BenchmarkPathCost(b *testing.B) {
	key := make([]byte, chacha20poly1305.KeySize)
	aead, err := chacha20poly1305.New(key)
	if err != nil {
		b.Fatal(err)
	}
	const packet = DefaultMTU
	nonce := make([]byte, aead.NonceSize())
	plain := make([]byte, packet)
	sealed := aead.Seal(nil, nonce, plain, nil)
	// cpuRate reports MB per CPU-second (this process's user and system
	// time), which a loaded machine does not lower as it does MB/s.
	cpuRate := func(b *testing.B, bytes int, f func()) {
		b.SetBytes(int64(bytes))
		cpu0 := cpuTime()
		for b.Loop() {
			f()
		}
		b.ReportMetric(float64(bytes)*float64(b.N)/(cpuTime()-cpu0).Seconds()/1e6, "MB/cpu-s")
	}
	b.Run("seal-1420", func(b *testing.B) {
		dst := make([]byte, 0, len(sealed))
		cpuRate(b, packet, func() { aead.Seal(dst[:0], nonce, plain, nil) })
	})
	b.Run("open-1420", func(b *testing.B) {
		dst := make([]byte, 0, packet)
		cpuRate(b, packet, func() {
			if _, err := aead.Open(dst[:0], nonce, sealed, nil); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("copy-64KiB", func(b *testing.B) {
		src, dst := make([]byte, 64<<10), make([]byte, 64<<10)
		cpuRate(b, 64<<10, func() { copy(dst, src) })
	})
}
