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
//   - Agent → node: POST /v1/relay/agent/nonce; the node answers a fresh
//     random nonce (NonceAnswer), which it remembers for NonceTTL (30 s) and
//     accepts once. Then GET /v1/relay/agent, Upgrade: gpunet-relay/1,
//     with the provider's address and key, the nonce, and the provider's
//     signature over AgentSignBytes(chain ID, node URL, nonce); after 101
//     the connection carries a yamux session whose streams the node opens
//     and the agent accepts.
//   - A node's identity in the handshake is its chain ID and its
//     advertised API URL (HubOptions.Self): the agent signs for the URL it
//     is configured with and dials, and the chain it knows, never for a URL
//     or chain a node names; a node accepts only its own. A CometBFT node
//     ID is not part of it: an agent has no trusted way to learn a node's,
//     and one taken from the node's own answer would bind nothing. So a
//     handshake a node collects is worth nothing at any other node, and
//     nothing twice at the same one (the nonce).
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
//   - Gang member → gang member (gang.go): an agent opens a stream on its
//     own session, {"gang":J,"placement":A,"rank":R}; the node checks both
//     ends against job J's current placement (GangDirectory) and opens a
//     stream to rank R's agent, {"gang":J,"placement":A,"rank":R,"from":F},
//     which that agent hands to its member (AgentOptions.AcceptGang); the
//     answers are "OK" or "ERR <reason>", then raw bytes. The asker's line
//     also carries its gang pass, "pass": the provider's signature over
//     GangPassBytes (chain, its node, J, A, R, time, nonce).
//   - Gang member → gang member across nodes (gang_hop.go): when rank R's
//     agent holds its session with another node, the asker's node finds
//     which (the node it last found it at, then its peers, at most 16)
//     and opens the node-to-node tunnel there, GET
//     /v1/relay/tunnel?gang=J&placement=A&rank=R&provider=P&via=N with
//     Upgrade: gpunet-tcp, X-Gpunet-Hop: 1 and the pass in
//     X-Gpunet-Gang-Pass. That node checks the pass (P's key, its chain,
//     N a peer, within a minute, never used there before) and the request
//     against its own ledger as the asker's node did, opens the stream to
//     rank R's agent (held there; never forwarded again) and answers 101
//     once that agent said OK.
//
// Everything a stranger can open is bounded: sessions, streams per session,
// tunnels per service, gang streams per member and per gang (at each node
// of a hop) and between two nodes, gang passes remembered, handshake
// nonces outstanding (per client address and in all, each for NonceTTL),
// header sizes, handshake and idle times.
package relay
