package ledger

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/gpunet/gpunet/internal/address"
)

// Services: long-running container jobs with ports (docs/ledger.md,
// "Services"). A service is its own record, not a job: it has no result to
// verify and no timeout. Its owner locks a budget in escrow; each replica is
// placed on a provider like a job's (the same offers, slots and scoring),
// becomes ready when its provider says so, and from then on is paid per
// second at its agreed price until it ends. Its provider's heartbeat
// (MsgServiceHeartbeat) is what keeps it paid: a replica whose provider
// stops sending it is dropped and replaced elsewhere, paid only up to its
// last heartbeat, and the provider is treated as one that dropped a job.
// A service whose budget runs out is stopped, with a warning recorded
// params.service_budget_warning seconds before.
//
// The state machine is in service_exec.go (messages), service_place.go
// (placement) and service_billing.go (payment, deadlines, budget).

// States of a service.
const (
	ServiceActive  = "active"  // wants its replicas; some may be placed, some ready
	ServiceStopped = "stopped" // stopped by its owner or its budget; escrow refunded
	ServiceFailed  = "failed"  // gave up: its replicas kept failing (see Reason)
)

// Ports' protocols (ServicePort.Protocol).
const (
	PortHTTP = "http" // relayed as HTTP: /svc/<id>/<port>/… on every node
	PortTCP  = "tcp"  // relayed as a byte stream only (gpunet service connect)
)

// Bounds of a service spec.
const (
	MaxServiceReplicas = 16
	MaxServicePorts    = 8
	MaxServiceModels   = 16
	MaxServiceKeys     = 16
	MaxModelNameLen    = 128
)

// ServiceSpec is the on-chain spec of a service (jobspec's kind: service).
// The image, command, args, env, resources, region and network fields mean
// what they mean for an oci job (JobSpec); services run only as oci
// containers.
type ServiceSpec struct {
	Name    string            `json:"name"`
	Image   string            `json:"image"` // registry/repo@sha256:<hex>
	Command []string          `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`

	CPUMilli      uint64   `json:"cpu_milli"`
	Memory        uint64   `json:"memory"`
	Disk          uint64   `json:"disk"`
	GPUCount      uint64   `json:"gpu_count"`
	GPUModels     []string `json:"gpu_models,omitempty"`
	MinVRAM       uint64   `json:"min_vram,omitempty"`
	MinComputeCap string   `json:"min_compute_cap,omitempty"`

	// MaxPricePerHour is the ceiling per replica, usync per hour.
	MaxPricePerHour uint64 `json:"max_price_per_hour"`
	Region          string `json:"region,omitempty"`
	RegionRequired  bool   `json:"region_required,omitempty"`
	Network         bool   `json:"network,omitempty"` // outbound network (providers that allow it)
	// Trust is TrustTEE for a service whose replicas run only on providers
	// attested at their placement (tee.go), optionally of one of
	// TEEMeasurements; a replica whose provider's attestation lapses is
	// replaced (market_tee.go). Its replicas pay the TEE market's price.
	Trust           string   `json:"trust,omitempty"`
	TEEMeasurements []string `json:"tee_measurements,omitempty"`

	Ports     []ServicePort    `json:"ports"`
	Readiness ServiceReadiness `json:"readiness"`
	Replicas  uint64           `json:"replicas"` // 1 … MaxServiceReplicas; MsgScaleService changes it
	// OpenAI, when set, says the service speaks OpenAI's chat completions
	// API on one of its http ports for these models: every node's
	// /openai/v1 routes requests for them to its ready replicas.
	OpenAI *ServiceOpenAI `json:"openai,omitempty"`
}

// ServicePort is a port a service's container listens on.
type ServicePort struct {
	Port     uint64 `json:"port"`           // 1 … 65535
	Name     string `json:"name,omitempty"` // [a-z0-9-]{0,15}
	Protocol string `json:"protocol"`       // PortHTTP or PortTCP
}

// ServiceReadiness is how a provider checks that a replica serves: an HTTP
// GET of Path on Port answering 2xx (Path empty: a TCP connect), every
// IntervalSeconds, each within TimeoutSeconds. FailureThreshold failures in
// a row after it was ready make the provider give the replica back
// (MsgReleaseReplica) so that it is placed elsewhere; a replica not ready
// within StartSeconds of its placement is given back too.
type ServiceReadiness struct {
	Port             uint64 `json:"port"`
	Path             string `json:"path,omitempty"`
	IntervalSeconds  uint64 `json:"interval_seconds"`
	TimeoutSeconds   uint64 `json:"timeout_seconds"`
	FailureThreshold uint64 `json:"failure_threshold"`
	StartSeconds     uint64 `json:"start_seconds"`
}

// ServiceOpenAI declares the models a service serves on Port with OpenAI's
// API (POST /v1/chat/completions, GET /v1/models). Exact is the owner's
// statement that the models' deterministic answers are bit-exact on any
// hardware (integer kernels, such as int8 matrix products, or integer CPU
// code): only then may a replica outvoted on one be disputed and slashed
// (MsgServiceDispute); a float model's honest replicas can differ where
// two tokens are nearly tied.
type ServiceOpenAI struct {
	Port   uint64   `json:"port"`
	Models []string `json:"models"`
	Exact  bool     `json:"exact,omitempty" rec:"since=8"`
	// LogprobTolE9 is the owner's tolerance on log-probabilities, in
	// parts per 10^9 of a nat (0: none declared): a replica whose answer
	// two others' log-probabilities judge different beyond it can be
	// disputed and slashed (service_dispute.go, internal/ledger/logprob).
	LogprobTolE9 uint64 `json:"logprob_tol_e9,omitempty" rec:"since=8"`
}

// Service is a service's record.
type Service struct {
	ID          uint64          `json:"id"`
	Owner       address.Address `json:"owner"`
	Spec        ServiceSpec     `json:"spec"`
	ConsumerKey string          `json:"consumer_key"` // age recipient: replicas' logs are sealed to it
	State       string          `json:"state"`
	// Reason is a sentence saying why, in records written before issue
	// 28; the ledger writes none now (Wait says it). The API fills it in
	// with Wait rendered (internal/jobtext).
	Reason   string `json:"reason,omitempty"`
	WaitCode string `json:"wait_code,omitempty"` // why a replica waits for a provider (Quote codes)
	// Wait says why the service waits for replicas, or why it ended
	// (wait.go); nil: nothing to say.
	Wait *Wait `json:"wait,omitempty"`

	// Access: who may send traffic. Public: anyone; otherwise a request
	// must carry a key whose SHA-256 is in KeyHashes (the keys themselves
	// never touch the chain).
	Public    bool   `json:"public"`
	KeyHashes []Hash `json:"key_hashes,omitempty"`

	Budget uint64 `json:"budget"` // usync locked in all: deploy and top-ups
	Escrow uint64 `json:"escrow"` // usync still locked
	Cost   uint64 `json:"cost"`   // usync paid to providers
	Fee    uint64 `json:"fee"`    // usync paid to the treasury
	Refund uint64 `json:"refund"` // usync returned at the end

	CreatedAt int64  `json:"created_at"`
	Height    uint64 `json:"height"`
	StoppedAt int64  `json:"stopped_at,omitempty"`
	// BudgetWarnedAt is when the ledger warned that the budget is running
	// out (0: not yet, or topped up since); RunsOutAt is when, at the
	// replicas' current rate (0: nothing is being paid).
	BudgetWarnedAt int64 `json:"budget_warned_at,omitempty"`
	RunsOutAt      int64 `json:"runs_out_at,omitempty"`

	Replicas   []Replica         `json:"replicas"`           // placed now
	Ended      []ReplicaEnd      `json:"ended,omitempty"`    // the last MaxEndedReplicas that ended, oldest first
	Placements uint64            `json:"placements"`         // replicas placed so far
	Failures   uint64            `json:"failures"`           // replicas ended by failure since one was last ready for params.service_stable_seconds
	Excluded   []address.Address `json:"excluded,omitempty"` // providers not to place on again (released, dropped or evicted a replica); the last MaxExcluded
	Deadline   int64             `json:"deadline,omitempty"` // next block time the ledger must look at it (service_billing.go)
}

// Replica is one placed replica of a service.
type Replica struct {
	Provider     address.Address `json:"provider"`
	PricePerHour uint64          `json:"price_per_hour"` // agreed at placement, usync per hour
	Class        string          `json:"class"`
	AssignedAt   int64           `json:"assigned_at"`
	// ReadyAt is when its provider first reported it ready: it is paid
	// from then. 0: starting.
	ReadyAt int64 `json:"ready_at,omitempty"`
	// Ready is the provider's last report; Relay is the API URL of the
	// node its agent's relay connection is on, through which every node
	// reaches it.
	Ready       bool   `json:"ready"`
	Relay       string `json:"relay,omitempty"`
	HeartbeatAt int64  `json:"heartbeat_at,omitempty"`
	PaidUntil   int64  `json:"paid_until,omitempty"` // settled up to (paid when it was ready, skipped when not)
	// ReadySeconds is how many seconds it has been paid for: Paid is
	// price_per_hour × ReadySeconds / 3600, rounded down (less only when
	// the budget ran out), so that paying in many steps never drifts.
	ReadySeconds uint64 `json:"ready_seconds,omitempty"`
	Paid         uint64 `json:"paid"` // usync paid to its provider
	// Serve tallies the witnesses' attestations of the periods still open
	// to them (service_serve.go), oldest first: at most
	// serveAttestWindow+1 periods, each with at most
	// params.service_serve_witnesses witnesses. ServedPeriod is the last
	// period paid on the witnesses' word (0: none yet).
	Serve        []ServeTally `json:"serve,omitempty"`
	ServedPeriod uint64       `json:"served_period,omitempty"`
	// Down are the validators that reported it unreachable in the last
	// replicaDownWindow blocks (service_down.go), each once, in the
	// order they came.
	Down []DownReport `json:"down,omitempty"`
}

// ServeTally is who attested that a replica served in one period
// (service_serve.go), and whether that period was paid.
type ServeTally struct {
	Period    uint64        `json:"period"`
	Witnesses []ConsAddress `json:"witnesses"`
	Paid      bool          `json:"paid,omitempty"`
}

// ReplicaEnd is a replica that ended, for the service's history.
type ReplicaEnd struct {
	Provider   address.Address `json:"provider"`
	AssignedAt int64           `json:"assigned_at"`
	ReadyAt    int64           `json:"ready_at,omitempty"`
	EndedAt    int64           `json:"ended_at"`
	// PricePerHour and ReadySeconds are what it was paid for: Paid is
	// PricePerHour × ReadySeconds / 3600 rounded down, less only when the
	// budget ran out.
	PricePerHour uint64 `json:"price_per_hour"`
	ReadySeconds uint64 `json:"ready_seconds,omitempty"`
	Paid         uint64 `json:"paid"`
	// Why is a sentence in records written before issue 28 (the API
	// fills it in from Code); Code says why it ended (End* codes), Text
	// what its provider or owner said, Seconds the readiness window it
	// missed (EndNotReady).
	Why     string `json:"why"`
	Slashed uint64 `json:"slashed,omitempty"`
	Code    string `json:"code,omitempty"`
	Text    string `json:"text,omitempty"`
	Seconds uint64 `json:"seconds,omitempty"`
}

// Bounds of a service record's lists.
const (
	MaxEndedReplicas = 32
	MaxExcluded      = 32
)

// Done reports whether the service has ended.
func (s *Service) Done() bool { return s.State != ServiceActive }

// ServesModel reports whether the service declares model.
func (s *Service) ServesModel(model string) bool {
	return s.Spec.OpenAI != nil && slices.Contains(s.Spec.OpenAI.Models, model)
}

// Port returns the spec's port p, or nil.
func (s *ServiceSpec) Port(p uint64) *ServicePort {
	for i := range s.Ports {
		if s.Ports[i].Port == p {
			return &s.Ports[i]
		}
	}
	return nil
}

func serviceKey(id uint64) []byte { return u64(slices.Clone(prefixService), id) }

// GetService reads a service; ok is false if there is none with that id.
func GetService(kv KV, id uint64) (*Service, bool, error) {
	b := kv.Get(serviceKey(id))
	if b == nil {
		return nil, false, nil
	}
	s := &Service{}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, false, fmt.Errorf("service %d: corrupt record: %w: %w", id, err, ErrInternal)
	}
	return s, true, nil
}

// ServicesOf calls fn with the id of each service of owner, newest first,
// until fn returns false.
func ServicesOf(kv KV, owner address.Address, fn func(id uint64) bool) {
	newestFirst(kv, append(slices.Clone(prefixServiceOwner), owner[:]...), fn)
}

// ServicesOfProvider lists the ids of the active services with a replica on
// provider.
func ServicesOfProvider(kv KV, provider address.Address) []uint64 {
	p := append(slices.Clone(prefixServiceProv), provider[:]...)
	var ids []uint64
	kv.Iterate(p, prefixEnd(p), func(k, _ []byte) bool {
		ids = append(ids, binary.BigEndian.Uint64(k[len(p):]))
		return true
	})
	return ids
}

// ServicesForModel lists the ids of the active services that declare model,
// in id order.
func ServicesForModel(kv KV, model string) []uint64 {
	p := append(append(slices.Clone(prefixServiceModel), model...), 0)
	var ids []uint64
	kv.Iterate(p, prefixEnd(p), func(k, _ []byte) bool {
		ids = append(ids, binary.BigEndian.Uint64(k[len(p):]))
		return true
	})
	return ids
}

// ActiveServices calls fn with each active service's id, in id order, until
// fn returns false.
func ActiveServices(kv KV, fn func(id uint64) bool) {
	kv.Iterate(prefixServiceActive, prefixEnd(prefixServiceActive), func(k, _ []byte) bool {
		return fn(binary.BigEndian.Uint64(k[len(prefixServiceActive):]))
	})
}

func serviceOwnerKey(a address.Address, id uint64) []byte {
	return u64(append(slices.Clone(prefixServiceOwner), a[:]...), id)
}

func serviceProvKey(a address.Address, id uint64) []byte {
	return u64(append(slices.Clone(prefixServiceProv), a[:]...), id)
}

func serviceDueKey(at int64, id uint64) []byte {
	return u64(u64(slices.Clone(prefixServiceDue), uint64(max(at, 0))), id)
}

func serviceQueueKey(id uint64) []byte  { return u64(slices.Clone(prefixServiceQueue), id) }
func serviceActiveKey(id uint64) []byte { return u64(slices.Clone(prefixServiceActive), id) }

func serviceModelKey(model string, id uint64) []byte {
	return u64(append(append(slices.Clone(prefixServiceModel), model...), 0), id)
}

// wantsReplicas reports whether the service waits for the scheduler.
func (s *Service) wantsReplicas() bool {
	return !s.Done() && uint64(len(s.Replicas)) < s.Spec.Replicas
}

// replica returns the index of provider's replica, or -1.
func (s *Service) replica(provider address.Address) int {
	return slices.IndexFunc(s.Replicas, func(r Replica) bool { return r.Provider == provider })
}

func mustService(kv KV, id uint64) (*Service, error) {
	s, ok, err := GetService(kv, id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("no service %d: %w", id, ErrUnknownService)
	}
	return s, nil
}

// setMarker writes or deletes a marker key, touching the store only when
// that changes it.
func setMarker(o *Overlay, k []byte, on bool) {
	switch has := o.Get(k) != nil; {
	case on && !has:
		o.Set(k, []byte{1})
	case !on && has:
		o.Delete(k)
	}
}

// setService stores s and keeps its derived keys in step: the deadline
// index (moved from oldDeadline), the queue, the active and model
// indexes. (The owner index is written once, at deploy; the provider
// index where a replica is placed or ends.) An active service that waits
// for no replica keeps no WaitCode and no Reason.
func setService(o *Overlay, s *Service, oldDeadline int64) {
	active := !s.Done()
	if !s.wantsReplicas() {
		s.WaitCode = ""
		if active {
			s.setWait(nil) // an active service's Wait says why it waits for replicas
		}
	}
	if !active {
		s.Deadline = 0
	}
	if oldDeadline != 0 && oldDeadline != s.Deadline {
		setMarker(o, serviceDueKey(oldDeadline, s.ID), false)
	}
	if s.Deadline != 0 {
		setMarker(o, serviceDueKey(s.Deadline, s.ID), true)
	}
	setMarker(o, serviceQueueKey(s.ID), s.wantsReplicas())
	setMarker(o, serviceActiveKey(s.ID), active)
	if s.Spec.OpenAI != nil {
		for _, m := range s.Spec.OpenAI.Models {
			setMarker(o, serviceModelKey(m, s.ID), active)
		}
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("service %d: %v", s.ID, err)) // a record of plain fields always encodes
	}
	o.Set(serviceKey(s.ID), b)
}

func serviceEvent(typ string, s *Service, more ...Attr) Event {
	return Event{Type: typ, Attrs: append([]Attr{{"service", strconv.FormatUint(s.ID, 10)}}, more...)}
}
