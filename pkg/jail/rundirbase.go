package jail

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// RunDirBaseEnv names the environment variable that moves the run dir base for every
// creator (jail, netjail, arizuko); tests point it at a fresh directory.
const RunDirBaseEnv = "CRACKBOX_RUN_DIR"

// ErrRunDirBase means the run dir base exists in a state crackbox will not use or repair.
var ErrRunDirBase = errors.New("run dir base unusable")

// DefaultRunDirBase is $CRACKBOX_RUN_DIR, else /run/crackbox for root, else
// $XDG_RUNTIME_DIR/crackbox, else a per-user directory under the temp dir.
func DefaultRunDirBase() string {
	if d := os.Getenv(RunDirBaseEnv); d != "" {
		return d
	}
	if os.Geteuid() == 0 {
		return "/run/crackbox"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "crackbox")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("crackbox-%d", os.Geteuid()))
}

// runDirBaseMode is the mode the base needs: as root QEMU runs under another uid and
// must traverse the base to reach its own run dir, so others get search (x) only.
func runDirBaseMode(euid int) os.FileMode {
	if euid == 0 {
		return 0o711
	}
	return 0o700
}

// EnsureRunDirBase creates base with the mode QEMU needs, or checks and repairs an
// existing one. Every creator of the base calls it, so whichever runs first after a
// reboot (/run is a tmpfs) leaves the same directory. It refuses a base that is not a
// directory, belongs to another user, or that others may write to: crackbox would put
// sockets and run dirs where someone else can replace them.
func EnsureRunDirBase(base string) error {
	if base == "" {
		return fmt.Errorf("%w: empty path", ErrRunDirBase)
	}
	euid := os.Geteuid()
	want := runDirBaseMode(euid)
	fi, err := os.Lstat(base)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(base, want); err != nil {
			return fmt.Errorf("run dir base %s: %w", base, err)
		}
		fi, err = os.Lstat(base)
	}
	if err != nil {
		return fmt.Errorf("run dir base %s: %w", base, err)
	}
	fix := fmt.Sprintf("remove it (rm -rf %s) or point %s at another directory", base, RunDirBaseEnv)
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory (a symlink?): %s", ErrRunDirBase, base, fix)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != euid {
		return fmt.Errorf("%w: %s belongs to uid %d, not %d: %s", ErrRunDirBase, base, st.Uid, euid, fix)
	}
	mode := fi.Mode()
	if mode.Perm()&0o022 != 0 || mode&os.ModeSticky != 0 {
		return fmt.Errorf("%w: %s is writable by others (mode %04o): %s", ErrRunDirBase, base, mode.Perm(), fix)
	}
	if mode.Perm()&want != want {
		// A base made by an older crackbox or by hand (say 0700 as root) locks QEMU out
		// of its sockets; adding the missing bits is all it needs.
		if err := os.Chmod(base, mode.Perm()|want); err != nil {
			return fmt.Errorf("run dir base %s: set mode %04o: %w", base, mode.Perm()|want, err)
		}
	}
	return nil
}
