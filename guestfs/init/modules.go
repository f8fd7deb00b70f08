package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// modulesDir holds the kernel modules a modular kernel (Debian's cloud kernel) needs,
// with a file "order" naming them in load order. The host adds it to the initramfs only
// for such kernels; the minimal kernel has everything built in and gets none. It is not
// /lib/modules because the host view turns /lib into a symlink into /usr.
const modulesDir = "/crackbox-modules"

// loadModules loads the modules listed in modulesDir/order, in that order, then removes
// the directory so the command's root does not carry it. No directory: nothing to do.
func loadModules(log *slog.Logger) error {
	order, err := os.ReadFile(filepath.Join(modulesDir, "order"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("modules: %w", err)
	}
	n := 0
	for _, name := range strings.Fields(string(order)) {
		if name != filepath.Base(name) {
			return fmt.Errorf("modules: bad name %q in order", name)
		}
		if err := loadModule(filepath.Join(modulesDir, name)); err != nil {
			return err
		}
		n++
	}
	log.Info("modules loaded", "count", n)
	return os.RemoveAll(modulesDir)
}

func loadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("module %s: %w", path, err)
	}
	defer f.Close()
	// finit_module lets the kernel read the file itself (and check its signature).
	err = unix.FinitModule(int(f.Fd()), "", 0)
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("load module %s: %w", filepath.Base(path), err)
	}
	return nil
}
