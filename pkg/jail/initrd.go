package jail

import "github.com/crackbox/crackbox/pkg/jail/initramfs"

// ensureInitramfs builds (once) the cpio holding guest-init as /init.
var ensureInitramfs = initramfs.Ensure
