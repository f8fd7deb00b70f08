// Package rundir owns the run dir base: the one directory under which every run of
// crackbox (jail, netjail) and arizuko makes its run dir, sockets and claims. Its
// creators share one default and one check, so whichever runs first after a reboot
// leaves the same directory.
package rundir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/crackbox/crackbox/internal/envvar"
)

// BaseEnv names the environment variable that moves the run dir base for every
// creator (jail, netjail, arizuko); tests point it at a fresh directory.
const BaseEnv = envvar.RunDir

// ErrBase means the run dir base exists in a state crackbox will not use or repair.
var ErrBase = errors.New("run dir base unusable")

// DefaultBase is $CRACKBOX_RUN_DIR, else /run/crackbox for root, else
// $XDG_RUNTIME_DIR/crackbox, else a per-user directory under the temp dir.
func DefaultBase() string {
	if d := envvar.Get(BaseEnv); d != "" {
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

// baseMode is the mode the base needs: as root QEMU runs under another uid and
// must traverse the base to reach its own run dir, so others get search (x) only.
func baseMode(euid int) os.FileMode {
	if euid == 0 {
		return 0o711
	}
	return 0o700
}

// EnsureBase creates base with the mode QEMU needs, or checks and repairs an
// existing one. Every creator of the base calls it, so whichever runs first after a
// reboot (/run is a tmpfs) leaves the same directory. It refuses a base that is not a
// directory, belongs to another user, or that others may write to: crackbox would put
// sockets and run dirs where someone else can replace them.
func EnsureBase(base string) error {
	missing, repair, err := inspectBase(base)
	if err != nil {
		return err
	}
	if missing {
		if err := os.MkdirAll(base, baseMode(os.Geteuid())); err != nil {
			return fmt.Errorf("run dir base %s: %w", base, err)
		}
		// MkdirAll applies the umask; inspect again to set the exact bits.
		if _, repair, err = inspectBase(base); err != nil {
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

// CheckBase says what EnsureBase would do with base, changing nothing:
// "" when it is fine, else what would be created or repaired; an error when it would
// refuse the base.
func CheckBase(base string) (string, error) {
	missing, repair, err := inspectBase(base)
	switch {
	case err != nil:
		return "", err
	case missing:
		return fmt.Sprintf("%s will be created with mode %04o by the first run", base, baseMode(os.Geteuid())), nil
	case repair != 0:
		return fmt.Sprintf("%s will be set to mode %04o by the next run, so QEMU can traverse it", base, repair), nil
	}
	return "", nil
}

// inspectBase reports whether base is missing, the mode to chmod it to (0: none
// needed), or why it cannot be used.
func inspectBase(base string) (missing bool, repair os.FileMode, err error) {
	if base == "" {
		return false, 0, fmt.Errorf("%w: empty path", ErrBase)
	}
	euid := os.Geteuid()
	want := baseMode(euid)
	fi, err := os.Lstat(base)
	if errors.Is(err, os.ErrNotExist) {
		return true, 0, nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("run dir base %s: %w", base, err)
	}
	fix := fmt.Sprintf("remove it (rm -rf %s) or point %s at another directory", base, BaseEnv)
	if !fi.IsDir() {
		return false, 0, fmt.Errorf("%w: %s is not a directory (a symlink?): %s", ErrBase, base, fix)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != euid {
		return false, 0, fmt.Errorf("%w: %s belongs to uid %d, not %d: %s", ErrBase, base, st.Uid, euid, fix)
	}
	mode := fi.Mode()
	if mode.Perm()&0o022 != 0 || mode&os.ModeSticky != 0 {
		return false, 0, fmt.Errorf("%w: %s is writable by others (mode %04o): %s", ErrBase, base, mode.Perm(), fix)
	}
	if mode.Perm()&want != want {
		return false, mode.Perm() | want, nil
	}
	return false, 0, nil
}
