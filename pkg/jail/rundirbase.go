package jail

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/crackbox/crackbox/internal/envvar"
)

// RunDirBaseEnv names the environment variable that moves the run dir base for every
// creator (jail, netjail, arizuko); tests point it at a fresh directory.
const RunDirBaseEnv = envvar.RunDir

// ErrRunDirBase means the run dir base exists in a state crackbox will not use or repair.
var ErrRunDirBase = errors.New("run dir base unusable")

// DefaultRunDirBase is $CRACKBOX_RUN_DIR, else /run/crackbox for root, else
// $XDG_RUNTIME_DIR/crackbox, else a per-user directory under the temp dir.
func DefaultRunDirBase() string {
	if d := envvar.Get(RunDirBaseEnv); d != "" {
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
	missing, repair, err := inspectRunDirBase(base)
	if err != nil {
		return err
	}
	if missing {
		if err := os.MkdirAll(base, runDirBaseMode(os.Geteuid())); err != nil {
			return fmt.Errorf("run dir base %s: %w", base, err)
		}
		// MkdirAll applies the umask; inspect again to set the exact bits.
		if _, repair, err = inspectRunDirBase(base); err != nil {
			return err
		}
	}
	if repair != 0 {
		// A base made by an older crackbox or by hand (say 0700 as root) locks QEMU out
		// of its sockets; adding the missing bits is all it needs.
		if err := os.Chmod(base, repair); err != nil {
			return fmt.Errorf("run dir base %s: set mode %04o: %w", base, repair, err)
		}
	}
	return nil
}

// CheckRunDirBase says what EnsureRunDirBase would do with base, changing nothing:
// "" when it is fine, else what would be created or repaired; an error when it would
// refuse the base.
func CheckRunDirBase(base string) (string, error) {
	missing, repair, err := inspectRunDirBase(base)
	switch {
	case err != nil:
		return "", err
	case missing:
		return fmt.Sprintf("%s will be created with mode %04o by the first run", base, runDirBaseMode(os.Geteuid())), nil
	case repair != 0:
		return fmt.Sprintf("%s will be set to mode %04o by the next run, so QEMU can traverse it", base, repair), nil
	}
	return "", nil
}

// inspectRunDirBase reports whether base is missing, the mode to chmod it to (0: none
// needed), or why it cannot be used.
func inspectRunDirBase(base string) (missing bool, repair os.FileMode, err error) {
	if base == "" {
		return false, 0, fmt.Errorf("%w: empty path", ErrRunDirBase)
	}
	euid := os.Geteuid()
	want := runDirBaseMode(euid)
	fi, err := os.Lstat(base)
	if errors.Is(err, os.ErrNotExist) {
		return true, 0, nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("run dir base %s: %w", base, err)
	}
	fix := fmt.Sprintf("remove it (rm -rf %s) or point %s at another directory", base, RunDirBaseEnv)
	if !fi.IsDir() {
		return false, 0, fmt.Errorf("%w: %s is not a directory (a symlink?): %s", ErrRunDirBase, base, fix)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != euid {
		return false, 0, fmt.Errorf("%w: %s belongs to uid %d, not %d: %s", ErrRunDirBase, base, st.Uid, euid, fix)
	}
	mode := fi.Mode()
	if mode.Perm()&0o022 != 0 || mode&os.ModeSticky != 0 {
		return false, 0, fmt.Errorf("%w: %s is writable by others (mode %04o): %s", ErrRunDirBase, base, mode.Perm(), fix)
	}
	if mode.Perm()&want != want {
		return false, mode.Perm() | want, nil
	}
	return false, 0, nil
}
