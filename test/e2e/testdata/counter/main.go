// Command counter is the checkpointing job of TestCheckpointResume: it
// counts to N, folding each step into a SHA-256 chain, and keeps its state
// (the step reached and the chain so far) under $GPUNET_CHECKPOINT_DIR,
// written atomically every few steps. Started again on another provider
// from a restored checkpoint, it goes on from there; its output is the
// same however often it was interrupted. Build: GOOS=wasip1 GOARCH=wasm.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

func main() {
	n, _ := strconv.Atoi(os.Args[1])
	work, _ := strconv.Atoi(os.Args[2])
	dir := os.Getenv("GPUNET_CHECKPOINT_DIR")
	state := filepath.Join(dir, "state")
	i, acc := 0, make([]byte, 32)
	if b, err := os.ReadFile(state); err == nil {
		var h string
		if _, err := fmt.Sscanf(string(b), "%d %s", &i, &h); err == nil {
			acc, _ = hex.DecodeString(h)
			fmt.Printf("resuming at step %d (checkpoint %s)\n", i, os.Getenv("GPUNET_RESUME_SEQ"))
		}
	}
	for ; i < n; i++ {
		acc = step(acc, i, work)
		if i%50 == 49 {
			tmp := state + ".tmp"
			os.WriteFile(tmp, fmt.Appendf(nil, "%d %x\n", i+1, acc), 0o644)
			os.Rename(tmp, state)
		}
	}
	os.MkdirAll("/out", 0o755)
	os.WriteFile("/out/result.txt", fmt.Appendf(nil, "%d %x\n", n, acc), 0o644)
	fmt.Println("done")
}

// step is one step of the count; TestCheckpointResume computes the same.
func step(acc []byte, i, work int) []byte {
	for range work {
		h := sha256.Sum256(fmt.Appendf(acc, "/%d", i))
		acc = h[:]
	}
	return acc
}
