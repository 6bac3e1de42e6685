package ledger

import (
	"crypto/sha256"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/gpunet/gpunet/internal/ledger/logprob"
)

// A service spec's rules. What a service shares with an oci job (the
// image, command, args and env, the resources, the price ceiling, region
// and network) is checked by JobSpec's own rules on the service's JobView;
// this file adds what only a service has: ports, readiness, replicas and
// the OpenAI declaration.

// MaxLogprobTolE9 is the widest tolerance on log-probabilities a service
// may declare (ServiceOpenAI.LogprobTolE9): 1 nat, past which a different
// model passes for the same.
const MaxLogprobTolE9 = logprob.Scale

// Bounds of a service's readiness check and ports.
const (
	MaxReadinessPathLen      = 256
	MaxReadinessInterval     = 3600  // seconds
	MaxReadinessFailures     = 100   // failure_threshold
	MaxServiceStartSeconds   = 86400 // a day to pull and start
	MaxServiceReleaseReason  = 256   // bytes of MsgReleaseReplica.Reason and MsgEvictReplica.Reason
	maxServiceHeartbeatItems = 256   // replicas one heartbeat reports
)

var (
	portNameRE  = regexp.MustCompile(`^[a-z0-9-]{0,15}$`)
	modelNameRE = regexp.MustCompile(`^[A-Za-z0-9._:/-]{1,128}$`)
)

// ValidModelName reports whether name may name a model a service serves
// (ServiceOpenAI.Models): 1 to MaxModelNameLen of A-Z a-z 0-9 . _ : / -.
func ValidModelName(name string) bool { return modelNameRE.MatchString(name) }

// ServiceKeyHash is what the chain stores of a service access key
// (Service.KeyHashes): the SHA-256 of its bytes.
func ServiceKeyHash(key string) Hash { return sha256.Sum256([]byte(key)) }

// JobView is the service as the scheduler sees a job: an oci job with the
// service's program, resources, price ceiling, region and network, placed
// on one provider per replica with no verification. Placement
// (sched.Place, through jobRequest) and the shared spec rules (Validate)
// read it.
func (s *ServiceSpec) JobView() JobSpec {
	return JobSpec{
		Name:            s.Name,
		Executor:        ExecutorOCI,
		Image:           s.Image,
		Command:         s.Command,
		Args:            s.Args,
		Env:             s.Env,
		CPUMilli:        s.CPUMilli,
		Memory:          s.Memory,
		Disk:            s.Disk,
		GPUCount:        s.GPUCount,
		GPUModels:       s.GPUModels,
		MinVRAM:         s.MinVRAM,
		MinComputeCap:   s.MinComputeCap,
		MaxPricePerHour: s.MaxPricePerHour,
		Region:          s.Region,
		RegionRequired:  s.RegionRequired,
		Network:         s.Network,
		Verification:    VerifyNone,
		Trust:           s.Trust,
		TEEMeasurements: s.TEEMeasurements,
	}
}

// Validate checks what the ledger can check of a service spec without
// state.
func (s *ServiceSpec) Validate() error {
	if !ValidJobName(s.Name) {
		return invalid("name %q: want 1-64 of a-z 0-9 . _ -, starting with a letter or digit", s.Name)
	}
	view := s.JobView()
	if err := view.validateProgram(); err != nil {
		return err
	}
	if err := view.validateResources(); err != nil {
		return err
	}
	if err := view.validatePlacement(); err != nil {
		return err
	}
	if err := view.checkTrust(); err != nil {
		return err
	}
	if s.Replicas == 0 || s.Replicas > MaxServiceReplicas {
		return invalid("replicas %d out of range [1, %d]", s.Replicas, MaxServiceReplicas)
	}
	if err := s.validatePorts(); err != nil {
		return err
	}
	if err := s.Readiness.validate(s); err != nil {
		return err
	}
	if s.OpenAI != nil {
		return s.OpenAI.validate(s)
	}
	return nil
}

func (s *ServiceSpec) validatePorts() error {
	if len(s.Ports) == 0 || len(s.Ports) > MaxServicePorts {
		return invalid("ports: want 1 to %d, got %d", MaxServicePorts, len(s.Ports))
	}
	seen := make(map[uint64]bool, len(s.Ports))
	names := make(map[string]bool, len(s.Ports))
	for i, p := range s.Ports {
		switch {
		case p.Port == 0 || p.Port > 65535:
			return invalid("ports[%d].port %d out of range [1, 65535]", i, p.Port)
		case seen[p.Port]:
			return invalid("ports[%d].port %d is declared twice", i, p.Port)
		case !portNameRE.MatchString(p.Name):
			return invalid("ports[%d].name %q: want at most 15 of a-z 0-9 -", i, p.Name)
		case p.Name != "" && names[p.Name]:
			return invalid("ports[%d].name %q is used twice", i, p.Name)
		case p.Protocol != PortHTTP && p.Protocol != PortTCP:
			return invalid("ports[%d].protocol %q: want http or tcp", i, p.Protocol)
		}
		seen[p.Port], names[p.Name] = true, true
	}
	return nil
}

func (r *ServiceReadiness) validate(s *ServiceSpec) error {
	switch {
	case s.Port(r.Port) == nil:
		return invalid("readiness.port %d is not one of the declared ports", r.Port)
	case r.Path != "" && (!strings.HasPrefix(r.Path, "/") || len(r.Path) > MaxReadinessPathLen || !utf8.ValidString(r.Path) || strings.ContainsAny(r.Path, " \t\r\n\x00?#")):
		return invalid("readiness.path %q: want an absolute URL path of at most %d bytes, without spaces, query or fragment (empty: a TCP connect)", r.Path, MaxReadinessPathLen)
	case r.Path != "" && s.Port(r.Port).Protocol != PortHTTP:
		return invalid("readiness.path is an HTTP check, but port %d is tcp: drop the path for a TCP connect", r.Port)
	case r.IntervalSeconds == 0 || r.IntervalSeconds > MaxReadinessInterval:
		return invalid("readiness.interval %ds out of range [1s, %ds]", r.IntervalSeconds, MaxReadinessInterval)
	case r.TimeoutSeconds == 0 || r.TimeoutSeconds > r.IntervalSeconds:
		return invalid("readiness.timeout %ds out of range [1s, the interval %ds]", r.TimeoutSeconds, r.IntervalSeconds)
	case r.FailureThreshold == 0 || r.FailureThreshold > MaxReadinessFailures:
		return invalid("readiness.failure_threshold %d out of range [1, %d]", r.FailureThreshold, MaxReadinessFailures)
	case r.StartSeconds == 0 || r.StartSeconds > MaxServiceStartSeconds:
		return invalid("readiness.start %ds out of range [1s, %ds]", r.StartSeconds, MaxServiceStartSeconds)
	}
	return nil
}

func (a *ServiceOpenAI) validate(s *ServiceSpec) error {
	p := s.Port(a.Port)
	switch {
	case p == nil:
		return invalid("openai.port %d is not one of the declared ports", a.Port)
	case p.Protocol != PortHTTP:
		return invalid("openai.port %d is tcp: the OpenAI API needs an http port", a.Port)
	case len(a.Models) == 0 || len(a.Models) > MaxServiceModels:
		return invalid("openai.models: want 1 to %d, got %d", MaxServiceModels, len(a.Models))
	case a.LogprobTolE9 > MaxLogprobTolE9:
		return invalid("openai.logprob_tol_e9 %d is more than %d (a tolerance of 1 nat)", a.LogprobTolE9, uint64(MaxLogprobTolE9))
	case a.LogprobTolE9 != 0 && a.Exact:
		return invalid("openai.exact and openai.logprob_tol_e9 are exclusive: answers bit-exact everywhere need no tolerance")
	}
	seen := make(map[string]bool, len(a.Models))
	for i, m := range a.Models {
		if !ValidModelName(m) {
			return invalid("openai.models[%d] %q: want 1 to %d of A-Z a-z 0-9 . _ : / -", i, m, MaxModelNameLen)
		}
		if seen[m] {
			return invalid("openai.models[%d] %q is listed twice", i, m)
		}
		seen[m] = true
	}
	return nil
}

// checkKeyHashes checks an access list: a private service needs at least
// one key, and no list holds more than MaxServiceKeys or one twice.
func checkKeyHashes(public bool, hashes []Hash) error {
	if !public && len(hashes) == 0 {
		return invalid("key_hashes is empty: a private service needs at least one access key (or make it public)")
	}
	if len(hashes) > MaxServiceKeys {
		return invalid("key_hashes: at most %d keys, got %d", MaxServiceKeys, len(hashes))
	}
	seen := make(map[Hash]bool, len(hashes))
	for i, h := range hashes {
		if h == (Hash{}) {
			return invalid("key_hashes[%d] is zero", i)
		}
		if seen[h] {
			return invalid("key_hashes[%d] is listed twice", i)
		}
		seen[h] = true
	}
	return nil
}
