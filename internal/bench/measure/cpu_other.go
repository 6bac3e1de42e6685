//go:build !unix

package measure

import "time"

// ProcessCPU is not measured here: it returns 0.
func ProcessCPU() time.Duration { return 0 }
