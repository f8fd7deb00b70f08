// Package envvar is the one list of the CRACKBOX_* environment variables crackbox
// reads besides its configuration keys (those are config.EnvNames), and the one
// library that reads them: the binaries read a variable and pass its value in, and
// a library default that must follow a variable asks Get. Crackbox's warning about
// unknown CRACKBOX_* variables knows every name here, so the warning cannot call a
// variable unknown that some library reads.
package envvar

import (
	"os"
	"slices"
)

const (
	// RunsDir is where run records live (crackbox runs).
	RunsDir = "CRACKBOX_RUNS_DIR"
	// RunDir moves the base of the per-run directories for every run.
	RunDir = "CRACKBOX_RUN_DIR"
	// StateKey holds the key that seals secrets in the proxy daemon's state file.
	StateKey = "CRACKBOX_STATE_KEY"
	// ShareServer marks crackbox's own share-server child; crackbox sets it.
	ShareServer = "CRACKBOX_SHARE_SERVER"
	// DebianKernel is the Debian kernel make test hands the fallback-kernel test.
	DebianKernel = "CRACKBOX_DEBIAN_KERNEL"
	// BenchBin is the crackbox binary make bench times.
	BenchBin = "CRACKBOX_BENCH_BIN"
)

// TestPrefix starts the variables that steer the test suite (CRACKBOX_TEST_REQUIRE),
// which crackbox itself never reads.
const TestPrefix = "CRACKBOX_TEST_"

// Names lists every variable above.
var Names = []string{RunsDir, RunDir, StateKey, ShareServer, DebianKernel, BenchBin}

// Get returns the value of name, one of Names. Any other name gives "", so a
// library cannot read a variable this list, and the warning, does not know.
func Get(name string) string {
	if !slices.Contains(Names, name) {
		return ""
	}
	return os.Getenv(name)
}
