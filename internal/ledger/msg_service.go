package ledger

import (
	"unicode/utf8"

	"github.com/gpunet/gpunet/internal/address"
)

// The messages of a service's life (service.go): from its owner (deploy,
// top up, scale, access, evict, stop) and from its providers (heartbeat,
// release). Their handlers are in service_exec.go.

// Message types of services.
const (
	MsgTypeDeployService    MsgType = 50
	MsgTypeTopUpService     MsgType = 51
	MsgTypeScaleService     MsgType = 52
	MsgTypeStopService      MsgType = 53
	MsgTypeSetServiceAccess MsgType = 54
	MsgTypeServiceHeartbeat MsgType = 55
	MsgTypeReleaseReplica   MsgType = 56
	MsgTypeEvictReplica     MsgType = 57
)

// MsgDeployService creates a service and locks Budget usync of the sender's
// balance in its escrow. KeyHashes are the SHA-256 of the access keys
// (Service.KeyHashes); Public opens it to anyone.
type MsgDeployService struct {
	Spec        ServiceSpec `json:"spec"`
	Budget      uint64      `json:"budget"`
	ConsumerKey string      `json:"consumer_key"`
	Public      bool        `json:"public,omitempty"`
	KeyHashes   []Hash      `json:"key_hashes,omitempty"`
}

// MsgTopUpService adds Amount usync of the sender's balance to a service's
// escrow (anyone may pay for a service; only its owner gets the refund).
type MsgTopUpService struct {
	ServiceID uint64 `json:"service_id"`
	Amount    uint64 `json:"amount"`
}

// MsgScaleService sets how many replicas the owner's service wants.
type MsgScaleService struct {
	ServiceID uint64 `json:"service_id"`
	Replicas  uint64 `json:"replicas"`
}

// MsgStopService stops the owner's service: its replicas are paid to now,
// the rest of its escrow is refunded.
type MsgStopService struct {
	ServiceID uint64 `json:"service_id"`
}

// MsgSetServiceAccess replaces who may reach the owner's service.
type MsgSetServiceAccess struct {
	ServiceID uint64 `json:"service_id"`
	Public    bool   `json:"public"`
	KeyHashes []Hash `json:"key_hashes,omitempty"`
}

// ReplicaStatus is a provider's report on its replica of one service.
type ReplicaStatus struct {
	ServiceID uint64 `json:"service_id"`
	Ready     bool   `json:"ready"`
	// Relay is the API URL of the node the agent's relay connection is on
	// (that node's advertised API address).
	Relay string `json:"relay"`
}

// MsgServiceHeartbeat is a provider's report on all its replicas, sent
// every params.service_heartbeat_interval: each listed replica is paid up
// to this block; the first ready report starts its payment.
type MsgServiceHeartbeat struct {
	Replicas []ReplicaStatus `json:"replicas"`
}

// MsgReleaseReplica is a provider giving back its replica of a service
// (it failed its readiness check, or the provider is leaving). It is paid
// to now and not slashed; the service places a replica elsewhere.
type MsgReleaseReplica struct {
	ServiceID uint64 `json:"service_id"`
	Reason    string `json:"reason"`
}

// MsgEvictReplica is the owner ending one replica (it does not answer,
// say): its provider is paid to now and not placed on again for this
// service; a replica is placed elsewhere.
type MsgEvictReplica struct {
	ServiceID uint64          `json:"service_id"`
	Provider  address.Address `json:"provider"`
	Reason    string          `json:"reason,omitempty"`
}

// Type implements Msg.
func (*MsgDeployService) Type() MsgType { return MsgTypeDeployService }

// Type implements Msg.
func (*MsgTopUpService) Type() MsgType { return MsgTypeTopUpService }

// Type implements Msg.
func (*MsgScaleService) Type() MsgType { return MsgTypeScaleService }

// Type implements Msg.
func (*MsgStopService) Type() MsgType { return MsgTypeStopService }

// Type implements Msg.
func (*MsgSetServiceAccess) Type() MsgType { return MsgTypeSetServiceAccess }

// Type implements Msg.
func (*MsgServiceHeartbeat) Type() MsgType { return MsgTypeServiceHeartbeat }

// Type implements Msg.
func (*MsgReleaseReplica) Type() MsgType { return MsgTypeReleaseReplica }

// Type implements Msg.
func (*MsgEvictReplica) Type() MsgType { return MsgTypeEvictReplica }

// ValidateBasic implements Msg.
func (m *MsgDeployService) ValidateBasic() error {
	if err := m.Spec.Validate(); err != nil {
		return err
	}
	if m.Budget == 0 {
		return invalid("budget is 0: a service pays its replicas from the budget it locks")
	}
	if hrp, key, err := address.DecodeBech32(m.ConsumerKey); err != nil || hrp != "age" || len(key) != 32 {
		return invalid("consumer_key %q is not an age X25519 recipient (age1…)", m.ConsumerKey)
	}
	return checkKeyHashes(m.Public, m.KeyHashes)
}

// ValidateBasic implements Msg.
func (m *MsgTopUpService) ValidateBasic() error {
	if m.Amount == 0 {
		return invalid("amount is 0")
	}
	return nil
}

// ValidateBasic implements Msg.
func (m *MsgScaleService) ValidateBasic() error {
	if m.Replicas == 0 || m.Replicas > MaxServiceReplicas {
		return invalid("replicas %d out of range [1, %d] (stop the service to end all its replicas)", m.Replicas, MaxServiceReplicas)
	}
	return nil
}

// ValidateBasic implements Msg.
func (m *MsgStopService) ValidateBasic() error { return nil }

// ValidateBasic implements Msg.
func (m *MsgSetServiceAccess) ValidateBasic() error { return checkKeyHashes(m.Public, m.KeyHashes) }

// ValidateBasic implements Msg.
func (m *MsgServiceHeartbeat) ValidateBasic() error {
	if len(m.Replicas) == 0 || len(m.Replicas) > maxServiceHeartbeatItems {
		return invalid("replicas: want 1 to %d reports, got %d", maxServiceHeartbeatItems, len(m.Replicas))
	}
	seen := make(map[uint64]bool, len(m.Replicas))
	for i, r := range m.Replicas {
		if seen[r.ServiceID] {
			return invalid("replicas[%d]: service %d is reported twice", i, r.ServiceID)
		}
		seen[r.ServiceID] = true
		if err := checkDataAt("relay", r.Relay); err != nil {
			return err
		}
	}
	return nil
}

// ValidateBasic implements Msg.
func (m *MsgReleaseReplica) ValidateBasic() error { return checkEndReason(m.Reason) }

// ValidateBasic implements Msg.
func (m *MsgEvictReplica) ValidateBasic() error {
	if m.Provider.IsZero() {
		return invalid("provider is empty")
	}
	return checkEndReason(m.Reason)
}

func checkEndReason(r string) error {
	if len(r) > MaxServiceReleaseReason || !utf8.ValidString(r) {
		return invalid("reason: want at most %d bytes of text", MaxServiceReleaseReason)
	}
	return nil
}
