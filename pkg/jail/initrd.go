package jail

import "github.com/crackbox/crackbox/pkg/jail/initramfs"

// ensureInitramfs builds (once) the cpio holding guest-init as /init.
var ensureInitramfs = initramfs.Ensure

// EnsureInitramfs builds (once) and returns the cached initramfs a run with a built-in
// kernel boots with, so callers (crackbox doctor) need not know how it is made.
func EnsureInitramfs(guestInit, cache string) (string, error) {
	return ensureInitramfs(guestInit, cache)
}
