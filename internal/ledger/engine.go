package ledger

import (
	"crypto/sha256"
	"encoding/binary"
	"regexp"

	"github.com/gpunet/gpunet/internal/ledger/sched"
)

// Wasm engines. Two wasm engines (wasmtime and wazero, two versions of one,
// one on two CPU architectures) may legitimately give a module different
// bits: NaN payloads, for one. So a provider declares the engine it runs
// wasm jobs on (ProviderInfo.WasmEngine), and the replicas of a wasm job
// whose results are compared all run on the engine its first placement
// chose: a network moving from one engine to another sees no false
// disagreements on the way. Jobs whose results are not compared, and oci
// jobs, run on any engine.
//
// The scheduler's index holds an engine as engineID, a fixed-size id, so
// that matching one is an integer compare; the planner (package sched,
// asked through sched.EngineNeed) chooses the engine of a job's first
// placement. Two engine strings with one id (a 2^-64 chance) would count
// as one engine; a provider gains nothing by crafting one, since it can
// declare any engine string it likes anyway.

// MaxWasmEngineLen is the longest engine string a provider may declare.
const MaxWasmEngineLen = 128

var wasmEngineRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._,+=:@/-]{0,127}$`)

// ValidWasmEngine reports whether engine may name a wasm engine: 1 to
// MaxWasmEngineLen of A-Z a-z 0-9 . _ , + = : @ / -, starting with a letter
// or digit, e.g. wazero-1.12.0/linux-amd64/wasi-gpunet-1.
func ValidWasmEngine(engine string) bool { return wasmEngineRE.MatchString(engine) }

// engineID is the scheduler's name for engine: the first 8 bytes of its
// SHA-256, big-endian; 0 for no engine (and never for one).
func engineID(engine string) uint64 {
	if engine == "" {
		return 0
	}
	h := sha256.Sum256([]byte(engine))
	return max(binary.BigEndian.Uint64(h[:8]), 1)
}

// SharesEngine reports whether every replica of a job of this spec must
// run on one wasm engine: a wasm job whose results are compared.
func (s *JobSpec) SharesEngine() bool { return s.Executor == ExecutorWASM && s.Checked() }

// PinnedEngine is the wasm engine that every further replica of j must
// run on: that of its replicas, for a job whose replicas share one
// (SharesEngine), once it has one; "" before it is placed, and for any
// other job.
func (j *Job) PinnedEngine() string {
	if !j.Spec.SharesEngine() {
		return ""
	}
	for _, a := range j.Assignments {
		if a.WasmEngine != "" {
			return a.WasmEngine
		}
	}
	return ""
}

// engineNeedOf is what placing the replicas j waits for asks of engines,
// and the engine they are pinned to ("" for none), for its reason.
func engineNeedOf(j *Job) (sched.EngineNeed, string) {
	if !j.Spec.SharesEngine() {
		return sched.EngineNeed{}, ""
	}
	if e := j.PinnedEngine(); e != "" {
		return sched.EngineNeed{Shared: true, Pinned: engineID(e)}, e
	}
	return sched.EngineNeed{Shared: true, Group: int(j.Replicas) - len(j.Assignments)}, ""
}
