package provider

import (
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/gpunet/gpunet/internal/hwinfo"
	"github.com/gpunet/gpunet/internal/ledger"
)

// gpuPool hands this machine's GPUs to jobs: the ledger says how many GPUs
// (of which classes, with how much memory) a job gets on this provider,
// the agent picks which ones, and a container job sees only those.
type gpuPool struct {
	mu   sync.Mutex
	gpus []hwinfo.GPU
	busy map[string]uint64 // device ID → job
}

func (p *gpuPool) init(gpus []hwinfo.GPU) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gpus = append([]hwinfo.GPU(nil), gpus...)
	p.busy = map[string]uint64{}
}

// gpuID names a device to the executors (the CDI device name of the oci
// executor): its UUID, or its index when NVML gave none.
func gpuID(g hwinfo.GPU) string {
	if g.UUID != "" {
		return g.UUID
	}
	return strconv.Itoa(g.Index)
}

// take reserves s.GPUCount free GPUs that fit the job (one of its models,
// at least its VRAM) for job and returns their IDs; none for a CPU job.
func (p *gpuPool) take(job uint64, s *ledger.JobSpec) ([]string, error) {
	if s.GPUCount == 0 {
		return nil, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for _, g := range p.gpus {
		id := gpuID(g)
		if _, taken := p.busy[id]; taken {
			continue
		}
		if len(s.GPUModels) > 0 && !slices.Contains(s.GPUModels, g.Class) {
			continue
		}
		if g.VRAMBytes < s.MinVRAM {
			continue
		}
		ids = append(ids, id)
		if uint64(len(ids)) == s.GPUCount {
			break
		}
	}
	if uint64(len(ids)) < s.GPUCount {
		return nil, fmt.Errorf("job %d needs %d GPUs (models %v, min VRAM %d bytes); %d of this machine's %d fit and are free", job, s.GPUCount, s.GPUModels, s.MinVRAM, len(ids), len(p.gpus))
	}
	for _, id := range ids {
		p.busy[id] = job
	}
	return ids, nil
}

// release frees the GPUs of job.
func (p *gpuPool) release(job uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, j := range p.busy {
		if j == job {
			delete(p.busy, id)
		}
	}
}
