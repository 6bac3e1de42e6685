package jobspec_test

import (
	"fmt"

	"github.com/gpunet/gpunet/internal/jobspec"
)

func ExampleParse() {
	spec, err := jobspec.Parse([]byte(`
name: wordcount
executor: wasm
module: ./wc.wasm
args: ["/in/input.txt"]
inputs:
  - {path: /in/input.txt, from: ./input.txt}
outputs: [/out]
max_price: 0.5
timeout: 10m
`), "/home/me/jobs")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(spec.Module, spec.Inputs[0].From)
	fmt.Println(spec.Resources.CPU, spec.Resources.Memory, spec.Resources.Disk)
	fmt.Println(spec.MaxPrice, uint64(spec.MaxPrice), "usync/h")
	fmt.Println(spec.Timeout, spec.Verification, spec.Tier, spec.IsDeterministic())
	// Output:
	// /home/me/jobs/wc.wasm /home/me/jobs/input.txt
	// 1 256MiB 1GiB
	// 0.5 SYNC/h 500000 usync/h
	// 10m spot on-demand true
}

// Every problem comes back at once, each with its field and position.
func ExampleErrors() {
	_, err := jobspec.Parse([]byte(`name: train
executor: oci
image: pytorch/pytorch:2.3.0
outputs: [out]
max_price: 0.5
timout: 10m
resources: {memory: 10PiB, gpu: {count: 1, models: [rtx 4090]}}
verification: full
`), "")
	fmt.Println(err)
	// Output:
	// 5 problems in the job spec:
	//   line 3, column 8: image: "pytorch/pytorch:2.3.0" is not pinned by digest; write pytorch/pytorch@sha256:<64 hex digits> so that every provider runs the same bytes (find the digest with `gpunet image digest pytorch/pytorch:2.3.0`)
	//   line 4, column 11: outputs[0]: "out" is not absolute: paths in the job's filesystem start with /, e.g. "/out"
	//   line 6, column 1: timout: unknown field "timout" in the spec; did you mean "timeout"?
	//   line 7, column 21: resources.memory: 10PiB is more than the maximum 4TiB
	//   line 8, column 15: verification: full needs a deterministic job, because replicas' outputs are compared by hash, and an oci job is not deterministic unless it says so: add deterministic: true if the same inputs always give byte-identical outputs, or use verification: spot or none
}
