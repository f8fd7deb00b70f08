//go:build race

package main

// raceFlag makes the go test this test runs reuse the race build make test already cached.
var raceFlag = []string{"-race"}
