package clusternet

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// The environment a member's processes get, in torchrun's names, so that
// torchrun, `ray start` and MPI-style programs run unchanged.
const (
	EnvMasterAddr     = "MASTER_ADDR"      // rank 0's private address
	EnvMasterPort     = "MASTER_PORT"      // the rendezvous port on it
	EnvWorldSize      = "WORLD_SIZE"       // processes in all: members × LOCAL_WORLD_SIZE
	EnvRank           = "RANK"             // NODE_RANK × LOCAL_WORLD_SIZE + LOCAL_RANK
	EnvNodeRank       = "NODE_RANK"        // the member's rank
	EnvLocalWorldSize = "LOCAL_WORLD_SIZE" // processes per member
	EnvLocalRank      = "LOCAL_RANK"       // this process among its member's
	EnvNNodes         = "NNODES"           // members (torchrun's --nnodes)
	// EnvMembersFile names the members file (WriteMembers) inside the
	// member.
	EnvMembersFile = "GPUNET_MEMBERS_FILE"
)

// DefaultMasterPort is torchrun's default rendezvous port.
const DefaultMasterPort = 29500

// Env returns the environment of process localRank of localWorldSize on
// this member, in the form os/exec takes, with the members file at
// membersFile (a path inside the member) and rendezvous at port of rank
// 0's address.
func (c Config) Env(port uint16, localWorldSize, localRank int, membersFile string) []string {
	n := len(c.Members)
	return []string{
		EnvMasterAddr + "=" + Address(c.Network, 0).String(),
		EnvMasterPort + "=" + strconv.Itoa(int(port)),
		EnvWorldSize + "=" + strconv.Itoa(n*localWorldSize),
		EnvRank + "=" + strconv.Itoa(c.Rank*localWorldSize+localRank),
		EnvNodeRank + "=" + strconv.Itoa(c.Rank),
		EnvLocalWorldSize + "=" + strconv.Itoa(localWorldSize),
		EnvLocalRank + "=" + strconv.Itoa(localRank),
		EnvNNodes + "=" + strconv.Itoa(n),
		EnvMembersFile + "=" + membersFile,
	}
}

// Members file: one line per member in rank order, as an MPI hostfile
// writes hosts ("ADDRESS slots=N"), so that line i is node rank i. Lines
// that are empty or begin with # are ignored when read.

// MaxMembersFile bounds a members file read (ParseMembers).
const MaxMembersFile = 64 << 10

// WriteMembers returns the members file of c, with slots processes per
// member.
func (c Config) WriteMembers(slots int) []byte {
	var b bytes.Buffer
	for _, a := range c.Addresses() {
		fmt.Fprintf(&b, "%s slots=%d\n", a, slots)
	}
	return b.Bytes()
}

// MemberAddr is one line of a members file.
type MemberAddr struct {
	Addr  netip.Addr
	Slots int
}

// ParseMembers reads a members file, naming the line of what is wrong.
func ParseMembers(data []byte) ([]MemberAddr, error) {
	if len(data) > MaxMembersFile {
		return nil, fmt.Errorf("clusternet: members file of %d bytes: at most %d", len(data), MaxMembersFile)
	}
	var out []MemberAddr
	seen := map[netip.Addr]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), MaxMembersFile)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		f := strings.Fields(s)
		a, err := netip.ParseAddr(f[0])
		if err != nil {
			return nil, fmt.Errorf("clusternet: members file line %d: %.60q is not an IP address", line, f[0])
		}
		m := MemberAddr{Addr: a, Slots: 1}
		for _, kv := range f[1:] {
			v, ok := strings.CutPrefix(kv, "slots=")
			n, err := strconv.Atoi(v)
			if !ok || err != nil || n < 1 || n > 1024 {
				return nil, fmt.Errorf("clusternet: members file line %d: %.60q: want slots=N with N from 1 to 1024", line, kv)
			}
			m.Slots = n
		}
		if j, dup := seen[a]; dup {
			return nil, fmt.Errorf("clusternet: members file line %d: address %s is also on line %d", line, a, j)
		}
		seen[a] = line
		out = append(out, m)
		if len(out) > MaxMembers {
			return nil, fmt.Errorf("clusternet: members file has more than %d members", MaxMembers)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("clusternet: members file: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("clusternet: members file lists no member")
	}
	return out, nil
}
