// Package relay carries traffic to the ports of service replicas
// (docs/services.md). A provider's machine is usually behind NAT, so its
// agent dials out: it holds one connection to one node (an Agent), over
// which the node opens a yamux stream per client connection. Every node
// serves /svc/{id}/{port}/… (a Hub's ServiceHandler): a request reaches the
// replica through this node's session with its provider, or, when the
// provider's agent is connected elsewhere, through the node named in the
// replica's Relay field (node to node, only to known peers, one hop at
// most).
//
// The wire:
//
//   - Agent → node: GET /v1/relay/agent, Upgrade: gpunet-relay/1, signed by
//     the provider's key (AgentSignBytes); after 101 the connection carries
//     a yamux session whose streams the node opens and the agent accepts.
//   - Each stream begins with one JSON line from the node,
//     {"service":ID,"port":P}, which the agent answers with "OK" after
//     dialling that port of its replica, or "ERR <reason>"; then raw bytes.
//   - Node → node: GET /v1/relay/tunnel?service=&provider=&port= with
//     Upgrade: gpunet-tcp, X-Gpunet-Hop: 1 and the client's key; after 101,
//     raw bytes. The receiving node checks the key against its own ledger
//     and never forwards such a request again.
//   - Client → node: Upgrade: gpunet-tcp on /svc/{id}/{port} gives a raw
//     byte tunnel to the port (DialTCP), through which a service that
//     terminates TLS itself is reached end to end.
//
// Everything a stranger can open is bounded: sessions, streams per session,
// tunnels per service, header sizes, handshake and idle times.
package relay
