// Package clusternet gives the members of a gang (a job placed on several
// providers at once) a private network: each member reaches the others at
// stable addresses, whatever NAT its provider sits behind, and nothing
// else reaches it (docs/clusters.md).
//
// A member's network is a userspace WireGuard device (wireguard-go):
//
//   - its TUN interface (gpunet0) is made inside the member's own network
//     namespace (the container's), holding the member's address
//     10.78.0.(rank+1)/24 and nothing else besides loopback: no default
//     route, no other interface, no forwarding;
//   - its UDP socket is made in the provider's (host's) namespace, where
//     the encrypted packets come and go;
//   - every other member is a peer allowed only its own /32, known by the
//     public key it posted; a packet from any other key, or from a member
//     for an address not its own, is dropped by WireGuard.
//
// Packets go straight over UDP to a member's Endpoint when it has one and
// answers, and over the relay (Relay: streams through the nodes that
// providers already keep a session with, internal/relay) when it has
// none, or while nothing was heard from it directly. Both paths deliver to
// one WireGuard endpoint per member, so a path can change under a live
// session.
//
// Env and WriteMembers give the member's processes torchrun's variables
// and an MPI-style members file, so that distributed programs run
// unchanged (examples/allreduce).
package clusternet
