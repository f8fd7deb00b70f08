//go:build race

package sharefs

// memScale allows for the race detector's shadow memory in a memory bound: the share
// server is a re-execution of the race-built test binary.
const memScale = 5
