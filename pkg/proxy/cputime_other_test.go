//go:build !unix

package proxy

import "time"

// processCPU is not measured off Unix; benchmarks then report zero.
func processCPU() time.Duration { return 0 }
