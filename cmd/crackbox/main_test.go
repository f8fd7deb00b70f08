package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes the crackbox binary the tests built once for the whole process.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}
