// Package ring is a ring all-reduce of int64 vectors over TCP: the
// distributed program of the cluster example (examples/allreduce). It
// depends on nothing of gpunet's: like any distributed program it reads
// only torchrun's variables and the members file (an MPI-style hostfile,
// docs/clusters.md). Each
// of WORLD_SIZE processes holds a vector; after AllReduce every one holds
// their element-wise sum. Integer sums wrap the same way in any order, so
// the result is exactly that of one process adding the vectors (Sum).
package ring

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"

	"strconv"
	"strings"
	"time"
)

// Env is a process's place in the job, read from torchrun's variables and
// the members file.
type Env struct {
	Rank, WorldSize           int
	NodeRank                  int
	LocalRank, LocalWorldSize int
	MasterAddr                string
	MasterPort                int
	// Members are the members' addresses in node-rank order.
	Members []netip.Addr
}

// MaxWorld bounds WORLD_SIZE.
const MaxWorld = 4096

// EnvFromOS reads the environment through getenv and the members file
// (GPUNET_MEMBERS_FILE) through readFile, naming what is missing or wrong.
func EnvFromOS(getenv func(string) string, readFile func(string) ([]byte, error)) (Env, error) {
	var e Env
	ints := []struct {
		name   string
		dst    *int
		lo, hi int
	}{
		{"WORLD_SIZE", &e.WorldSize, 1, MaxWorld},
		{"RANK", &e.Rank, 0, MaxWorld - 1},
		{"NODE_RANK", &e.NodeRank, 0, MaxWorld - 1},
		{"LOCAL_WORLD_SIZE", &e.LocalWorldSize, 1, MaxWorld},
		{"LOCAL_RANK", &e.LocalRank, 0, MaxWorld - 1},
		{"MASTER_PORT", &e.MasterPort, 1, 65535},
	}
	for _, v := range ints {
		s := getenv(v.name)
		n, err := strconv.Atoi(s)
		if err != nil || n < v.lo || n > v.hi {
			return e, fmt.Errorf("%s=%.40q: want an integer from %d to %d", v.name, s, v.lo, v.hi)
		}
		*v.dst = n
	}
	e.MasterAddr = getenv("MASTER_ADDR")
	if e.Rank >= e.WorldSize || e.LocalRank >= e.LocalWorldSize {
		return e, fmt.Errorf("RANK %d of WORLD_SIZE %d, LOCAL_RANK %d of LOCAL_WORLD_SIZE %d: each must be below its size", e.Rank, e.WorldSize, e.LocalRank, e.LocalWorldSize)
	}
	if e.WorldSize%e.LocalWorldSize != 0 || e.Rank != e.NodeRank*e.LocalWorldSize+e.LocalRank {
		return e, fmt.Errorf("RANK %d is not NODE_RANK %d × LOCAL_WORLD_SIZE %d + LOCAL_RANK %d, or WORLD_SIZE %d is not a multiple of LOCAL_WORLD_SIZE", e.Rank, e.NodeRank, e.LocalWorldSize, e.LocalRank, e.WorldSize)
	}
	if e.MasterPort+e.LocalWorldSize > 65535 {
		return e, fmt.Errorf("MASTER_PORT %d: the ring uses the %d ports after it", e.MasterPort, e.LocalWorldSize)
	}
	path := getenv("GPUNET_MEMBERS_FILE")
	if path == "" {
		return e, errors.New("GPUNET_MEMBERS_FILE is not set")
	}
	data, err := readFile(path)
	if err != nil {
		return e, fmt.Errorf("members file: %w", err)
	}
	if e.Members, err = parseHostfile(data); err != nil {
		return e, fmt.Errorf("members file %s: %w", path, err)
	}
	if len(e.Members)*e.LocalWorldSize != e.WorldSize {
		return e, fmt.Errorf("members file lists %d members; WORLD_SIZE %d / LOCAL_WORLD_SIZE %d wants %d", len(e.Members), e.WorldSize, e.LocalWorldSize, e.WorldSize/e.LocalWorldSize)
	}
	if e.MasterAddr != e.Members[0].String() {
		return e, fmt.Errorf("MASTER_ADDR %.60q is not the members file's first member %s", e.MasterAddr, e.Members[0])
	}
	return e, nil
}

// parseHostfile reads the members' addresses, one per line in node-rank
// order, each the first word of its line (the rest, such as slots=N, is
// the scheduler's); empty lines and # comments are skipped.
func parseHostfile(data []byte) ([]netip.Addr, error) {
	if len(data) > 1<<20 {
		return nil, fmt.Errorf("%d bytes: at most 1 MiB", len(data))
	}
	var out []netip.Addr
	for i, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		a, err := netip.ParseAddr(f[0])
		if err != nil {
			return nil, fmt.Errorf("line %d: %.60q is not an IP address", i+1, f[0])
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, errors.New("no member listed")
	}
	return out, nil
}

// Addr is where the process of rank r listens: its member's address, at
// MASTER_PORT + 1 + its local rank.
func (e Env) Addr(r int) netip.AddrPort {
	return netip.AddrPortFrom(e.Members[r/e.LocalWorldSize], uint16(e.MasterPort+1+r%e.LocalWorldSize))
}

// Connect joins the ring: it listens at Addr(Rank), dials the next rank
// (retrying until ctx ends, while the others start) and accepts the
// previous one, which says its rank first. listen and dial make the
// sockets (net.Listen and a net.Dialer's DialContext, or their
// equivalents in another namespace).
func Connect(ctx context.Context, e Env, listen func(addr string) (net.Listener, error), dial func(ctx context.Context, addr string) (net.Conn, error)) (next, prev net.Conn, err error) {
	if e.WorldSize == 1 {
		return nil, nil, nil
	}
	l, err := listen(e.Addr(e.Rank).String())
	if err != nil {
		return nil, nil, fmt.Errorf("listen: %w", err)
	}
	defer l.Close()
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	type accepted struct {
		c   net.Conn
		err error
	}
	acc := make(chan accepted, 1)
	want := (e.Rank - 1 + e.WorldSize) % e.WorldSize
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				acc <- accepted{err: err}
				return
			}
			var hello [4]byte
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadFull(c, hello[:]); err != nil || int(binary.BigEndian.Uint32(hello[:])) != want {
				c.Close() // not the previous rank: not ours
				continue
			}
			c.SetReadDeadline(time.Time{})
			acc <- accepted{c: c}
			return
		}
	}()
	to := e.Addr((e.Rank + 1) % e.WorldSize).String()
	for {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		next, err = dial(dctx, to)
		cancel()
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("dial rank %d at %s: %w (last: %v)", (e.Rank+1)%e.WorldSize, to, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	var hello [4]byte
	binary.BigEndian.PutUint32(hello[:], uint32(e.Rank))
	if _, err := next.Write(hello[:]); err != nil {
		next.Close()
		return nil, nil, err
	}
	a := <-acc
	if a.err != nil {
		next.Close()
		return nil, nil, fmt.Errorf("accept rank %d: %w", want, a.err)
	}
	return next, a.c, nil
}

// Input is rank's vector of n elements for seed: what the example sums.
func Input(seed uint64, rank, n int) []int64 {
	v := make([]int64, n)
	x := seed ^ uint64(rank)*0x9e3779b97f4a7c15
	for i := range v {
		// splitmix64
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		v[i] = int64(z ^ z>>31)
	}
	return v
}

// Sum is the one-process run: the element-wise sum of the inputs of
// ranks 0 … world-1.
func Sum(seed uint64, world, n int) []int64 {
	out := make([]int64, n)
	for r := range world {
		for i, x := range Input(seed, r, n) {
			out[i] += x
		}
	}
	return out
}

// Digest is the SHA-256 of v's elements, little-endian, in hex.
func Digest(v []int64) string {
	h := sha256.New()
	var b [8]byte
	for _, x := range v {
		binary.LittleEndian.PutUint64(b[:], uint64(x))
		h.Write(b[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// AllReduce sums v element-wise across the ring in place: next is the
// connection to rank+1, prev the one from rank-1. It is the bandwidth-
// optimal ring: a reduce-scatter then an all-gather, each of world-1
// steps moving 1/world of the vector, sending and receiving at once.
func AllReduce(next, prev net.Conn, rank, world int, v []int64) error {
	if world == 1 {
		return nil
	}
	if next == nil || prev == nil {
		return errors.New("ring: no connections")
	}
	bounds := func(c int) (int, int) { return c * len(v) / world, (c + 1) * len(v) / world }
	mod := func(x int) int { return ((x % world) + world) % world }
	maxChunk := (len(v) + world - 1) / world
	sbuf := make([]byte, 8*maxChunk)
	rbuf := make([]byte, 8*maxChunk)
	step := func(send, recv int, add bool) error {
		lo, hi := bounds(send)
		out := sbuf[:8*(hi-lo)]
		for i, x := range v[lo:hi] {
			binary.LittleEndian.PutUint64(out[8*i:], uint64(x))
		}
		errc := make(chan error, 1)
		go func() { _, err := next.Write(out); errc <- err }()
		lo, hi = bounds(recv)
		in := rbuf[:8*(hi-lo)]
		if _, err := io.ReadFull(prev, in); err != nil {
			return fmt.Errorf("ring: from rank %d: %w", mod(rank-1), err)
		}
		for i := range v[lo:hi] {
			x := int64(binary.LittleEndian.Uint64(in[8*i:]))
			if add {
				v[lo+i] += x
			} else {
				v[lo+i] = x
			}
		}
		if err := <-errc; err != nil {
			return fmt.Errorf("ring: to rank %d: %w", mod(rank+1), err)
		}
		return nil
	}
	for s := range world - 1 {
		if err := step(mod(rank-s), mod(rank-s-1), true); err != nil {
			return err
		}
	}
	for s := range world - 1 {
		if err := step(mod(rank+1-s), mod(rank-s), false); err != nil {
			return err
		}
	}
	return nil
}

// Run is one process of the example: it joins the ring from its
// environment, sums its Input with the others', and returns the result.
func Run(ctx context.Context, e Env, seed uint64, n int) ([]int64, error) {
	var lc net.ListenConfig
	var d net.Dialer
	next, prev, err := Connect(ctx, e,
		func(a string) (net.Listener, error) { return lc.Listen(ctx, "tcp", a) },
		func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) })
	if err != nil {
		return nil, err
	}
	if next != nil {
		defer next.Close()
		defer prev.Close()
	}
	v := Input(seed, e.Rank, n)
	if err := AllReduce(next, prev, e.Rank, e.WorldSize, v); err != nil {
		return nil, err
	}
	return v, nil
}
