package sharefs

import (
	"fmt"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// memLimit is the heap a share server may keep live unless Config says otherwise. The
// 9p library keeps a node for every name the guest ever walked to or tried to remove
// and never frees one, and the server runs outside the run's memory limit, so a guest
// naming paths without end would grow it without end. At about 300 bytes a name, a
// guest may name some 1.5 million distinct paths in one run.
const memLimit = 512 << 20

// memCheck is how often the server looks at its heap: a guest grows it by at most a few
// MiB in that time.
const memCheck = 50 * time.Millisecond

// watchMemory ends the server once its live heap passes limit: the share closes, and
// the guest gets I/O errors from it for the rest of the run instead of the host losing
// memory. Near the limit the garbage collector runs often, so what is left is live.
func watchMemory(limit int64) {
	debug.SetMemoryLimit(limit)
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	for range time.Tick(memCheck) {
		metrics.Read(s)
		if live := s[0].Value.Uint64(); live > uint64(limit) {
			fmt.Fprintf(os.Stderr, "crackbox share server: %d MiB of memory live, past its limit of %d MiB (the guest named too many distinct paths); closing the share\n",
				live>>20, limit>>20)
			os.Exit(3)
		}
	}
}
