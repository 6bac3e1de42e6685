package validator

import (
	"context"
	"net"
	"os"
	"strings"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"
	"github.com/cometbft/cometbft/p2p"

	"github.com/gpunet/gpunet/internal/apiwire"
)

// What a joining node asks of this one (apiserver.Network): the genesis
// file and the node's addresses, peers, latest block, a header to trust
// and its snapshots.

// Genesis returns the node's genesis file, byte for byte.
func (n *Node) Genesis() ([]byte, error) {
	return os.ReadFile(n.cmt.Config().GenesisFile())
}

// NodeID is the node's p2p identity (the id in id@host:port).
func (n *Node) NodeID() string { return string(n.cmt.NodeInfo().ID()) }

// NetInfo implements apiserver.Network.
func (n *Node) NetInfo(ctx context.Context) (*apiwire.NetInfo, error) {
	info := &apiwire.NetInfo{ChainID: n.cfg.ChainID, APIURL: n.cfg.APIURL(), SnapshotInterval: n.cfg.SnapshotInterval,
		BlockTime: time.Duration(n.cfg.BlockTime).String(), Peers: []apiwire.NetPeer{}, Snapshots: []apiwire.SnapshotInfo{}}
	if ni, ok := n.cmt.NodeInfo().(p2p.DefaultNodeInfo); ok {
		info.NodeID = string(ni.DefaultNodeID)
		info.P2PAddress = info.NodeID + "@" + n.cfg.P2PAddress()
		info.RPCAddress = n.cfg.RPC
	}
	for _, p := range n.cmt.Switch().Peers().Copy() {
		ni, ok := p.NodeInfo().(p2p.DefaultNodeInfo)
		if !ok {
			continue
		}
		np := apiwire.NetPeer{NodeID: string(ni.DefaultNodeID), Moniker: ni.Moniker}
		if a := reachable(ni.ListenAddr, p.RemoteIP()); a != "" {
			np.P2PAddress = np.NodeID + "@" + a
		}
		np.RPCAddress = reachable(ni.Other.RPCAddress, p.RemoteIP())
		info.Peers = append(info.Peers, np)
	}
	bs := n.cmt.BlockStore()
	if h := bs.Height(); h > 0 {
		if m := bs.LoadBlockMeta(h); m != nil {
			info.LatestHeight, info.LatestHash = h, m.BlockID.Hash.String()
		}
	}
	info.TrustHeight, info.TrustHash = info.LatestHeight, info.LatestHash
	snaps, err := n.app.ListSnapshots(ctx, &abci.ListSnapshotsRequest{})
	if err != nil {
		return nil, err
	}
	for _, s := range snaps.Snapshots {
		info.Snapshots = append(info.Snapshots, apiwire.SnapshotInfo{Height: s.Height, Format: s.Format, Chunks: s.Chunks})
	}
	// Trust the newest snapshot's header: the light client then verifies
	// the snapshot's height from it forwards.
	for _, s := range info.Snapshots {
		if m := bs.LoadBlockMeta(int64(s.Height)); m != nil {
			info.TrustHeight, info.TrustHash = int64(s.Height), m.BlockID.Hash.String()
			break
		}
	}
	return info, nil
}

// reachable turns a listen address CometBFT reports (tcp://host:port) into
// host:port, with an unspecified host (0.0.0.0, ::) replaced by the
// address the peer's connection came from. Empty if it is not an address.
func reachable(listen string, remote net.IP) string {
	if i := strings.Index(listen, "://"); i >= 0 {
		listen = listen[i+3:]
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil || port == "" || port == "0" {
		return ""
	}
	if ip := net.ParseIP(host); (host == "" || ip != nil && ip.IsUnspecified()) && remote != nil {
		host = remote.String()
	}
	return net.JoinHostPort(host, port)
}
