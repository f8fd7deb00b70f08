package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/crackbox/crackbox/pkg/config"
	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/jail/install"
)

// qemuPackages are the Debian/Ubuntu packages a run needs besides crackbox itself.
var qemuPackages = []string{"qemu-system-x86", "qemu-system-common"}

// newSetupCmd builds crackbox setup.
func newSetupCmd() *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "setup",
		Short: "Install QEMU and find or build the guest kernel, from an installed crackbox",
		Long: `Make this machine ready for crackbox run without a source checkout: install QEMU
with apt-get (as root) when it is missing, then find the guest kernel (the cache,
<prefix>/lib/crackbox/vmlinux, /usr/lib/crackbox/vmlinux) or build one with the
kernel script installed in <prefix>/share/crackbox/kernel (about 5 minutes on a slow
2-core machine; it needs the linux-source-6.1 package, which it names if missing).
Ends with crackbox doctor.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := loadConfig(cmd, nil)
			if err != nil {
				return err
			}
			return setup(cmd.OutOrStdout(), cmd.ErrOrStderr(), dryRun, cfg)
		},
	}
	addConfigFlag(cmd)
	cmd.Flags().BoolVarP(&dryRun, "dry-run", "n", false, "say what would be installed or built, change nothing")
	return cmd
}

// newManPagesCmd writes a man page for every command of the tree it is in.
func newManPagesCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "man-pages DIR",
		Short:  "Write a man page for every command into DIR (make install uses it)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return doc.GenManTree(cmd.Root(), &doc.GenManHeader{Title: "CRACKBOX", Section: "1", Source: "crackbox"}, args[0])
		},
	}
}

func setup(stdout, stderr io.Writer, dryRun bool, cfg *config.Config) error {
	if _, err := install.FindQEMU(); err != nil {
		args := append([]string{"install", "-y", "--no-install-recommends"}, qemuPackages...)
		switch {
		case dryRun:
			fmt.Fprintf(stdout, "would run: apt-get %s\n", strings.Join(args, " "))
		case os.Geteuid() != 0:
			return fmt.Errorf("QEMU is missing: run `sudo crackbox setup`, or `sudo apt-get %s`", strings.Join(args, " "))
		default:
			fmt.Fprintf(stdout, "installing %s\n", strings.Join(qemuPackages, " "))
			if err := runTo(stdout, stderr, "apt-get", args...); err != nil {
				return fmt.Errorf("apt-get install: %w", err)
			}
		}
	} else {
		fmt.Fprintln(stdout, "qemu: installed")
	}
	k, err := install.FindKernel(cfg.Run.Kernel, cacheDir(cfg.Run))
	switch {
	case err == nil:
		fmt.Fprintf(stdout, "kernel: %s\n", k)
	case !errors.Is(err, jail.ErrNoKernel):
		return err
	default:
		script := kernelScript()
		if script == "" {
			return fmt.Errorf("no guest kernel and no kernel build script (share/crackbox/kernel/build.sh next to this crackbox, or guestfs/kernel/build.sh here): reinstall crackbox or set CRACKBOX_KERNEL")
		}
		if dryRun {
			fmt.Fprintf(stdout, "would build the kernel with %s\n", script)
			return nil
		}
		fmt.Fprintf(stdout, "building the guest kernel with %s (about 5 minutes)\n", script)
		if err := runTo(stderr, stderr, script); err != nil {
			return fmt.Errorf("kernel build: %w", err)
		}
	}
	if dryRun {
		return nil
	}
	if bad := doctor(stdout, cfg.Run); bad > 0 {
		return exitError{1}
	}
	return nil
}

// kernelScript finds the kernel build script: installed beside this crackbox
// (<prefix>/share/crackbox/kernel/build.sh) or in a checkout in the current directory.
func kernelScript() string {
	var cands []string
	if exe, err := os.Executable(); err == nil {
		if r, err := filepath.EvalSymlinks(exe); err == nil {
			exe = r
		}
		cands = append(cands, filepath.Join(filepath.Dir(filepath.Dir(exe)), "share", "crackbox", "kernel", "build.sh"))
	}
	cands = append(cands, filepath.Join("guestfs", "kernel", "build.sh"))
	for _, c := range cands {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			if abs, err := filepath.Abs(c); err == nil {
				return abs
			}
			return c
		}
	}
	return ""
}

func runTo(stdout, stderr io.Writer, name string, args ...string) error {
	c := exec.Command(name, args...)
	c.Stdout, c.Stderr = stdout, stderr
	c.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	return c.Run()
}
