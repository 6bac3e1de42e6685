package provider

import (
	"crypto/ed25519"
	"log/slog"

	"github.com/gpunet/gpunet/internal/relay"
)

// RelayLinkFor is the relay link NewInHome gives an agent (relaylink.go),
// for the external tests: one session with the nodes, signed with key for
// the chain status reports.
func RelayLinkFor(status chainStatus, nodes []string, key ed25519.PrivateKey, log *slog.Logger) func(ReplicaDialer) RelayLink {
	return func(dial ReplicaDialer) RelayLink {
		return &relayLink{status: status, o: relay.AgentOptions{Nodes: nodes, Key: key, Dial: dial, Log: log}}
	}
}
