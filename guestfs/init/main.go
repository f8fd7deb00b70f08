// Command guest-init is PID 1 in every crackbox guest. It mounts the kernel
// filesystems, finds the control channel, and hands the session to pkg/jail/guest, which
// receives the RunSpec and runs the one command; guest-init builds the root and the
// network for it (Prepare), then syncs and reboots, which ends QEMU (-no-reboot).
//
// It trusts nothing but the host's control messages: the kernel command line only
// says which channel to use.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/crackbox/crackbox/pkg/jail/guest"
)

func main() {
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "guest-init: runs only as PID 1 inside a crackbox guest")
		os.Exit(2)
	}
	// Go starts the command with vfork, and the forking thread keeps its scheduler slot
	// until the child's execve returns. An execve that reads a file from a share served
	// over the control session (pkg/jail/sharefs) waits for this process to relay that share,
	// so a second slot must be free to do it, even on one vCPU.
	if runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
	// The kernel opened /dev/console as our stdio: log there, never into the command's
	// streams. crackbox.debug only raises verbosity.
	level := new(slog.LevelVar)
	log := slog.New(uptimeHandler{slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})})
	defer func() {
		if r := recover(); r != nil {
			log.Error("guest-init panic", "err", r)
		}
		poweroff(log)
	}()
	if err := baseMounts(); err != nil {
		log.Error("mount", "err", err)
		return
	}
	if err := loadModules(log); err != nil {
		log.Error("modules", "err", err)
		return
	}
	cmdline := readCmdline()
	if strings.Contains(" "+cmdline+" ", " crackbox.debug ") {
		level.Set(slog.LevelDebug)
	}
	log.Info("guest-init start")
	reaper := guest.StartReaper()
	loDone := make(chan error, 1)
	go func() { loDone <- linkUp("lo") }()

	mode := ctlMode(cmdline)
	if mode == "none" {
		return
	}
	rw, err := openControl(mode, log)
	if err != nil {
		log.Error("control channel", "err", err)
		return
	}
	log.Info("control connected")
	b := &builder{log: log, loDone: loDone, swap: swapDisk()}
	// The host snapshots a guest once this line is on the console: from here guest-init
	// only waits for the RunSpec, and holds nothing that belongs to a run.
	log.Info(readyMarker)
	exit, err := guest.Serve(context.Background(), rw, guest.Config{
		Prepare:    b.prepare,
		BeforeExit: b.beforeExit,
		Reaper:     reaper,
		Log:        log,
	})
	log.Info("session done", "code", exit.Code, "signal", exit.Signal, "error", exit.Error, "err", err)
}

// poweroff ends the VM. The kernel cmdline has reboot=t and QEMU runs with -no-reboot,
// so a restart makes QEMU exit at once; power-off is the fallback.
func poweroff(log *slog.Logger) {
	// Wait until the serial port has sent what was logged: the reboot stops it mid-line,
	// and the last line is the one that says why the guest stopped.
	_ = unix.IoctlSetInt(int(os.Stderr.Fd()), unix.TCSBRK, 1)
	unix.Sync()
	if err := unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART); err != nil {
		log.Error("reboot", "err", err)
	}
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	for {
		time.Sleep(time.Hour)
	}
}

// uptimeHandler stamps each line with the guest's uptime, the clock boot timings are
// read against (the wall clock is whatever the RTC said).
type uptimeHandler struct{ slog.Handler }

func (h uptimeHandler) Handle(ctx context.Context, r slog.Record) error {
	r.AddAttrs(slog.String("uptime", uptime()))
	return h.Handler.Handle(ctx, r)
}

func (h uptimeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return uptimeHandler{h.Handler.WithAttrs(as)}
}

func (h uptimeHandler) WithGroup(name string) slog.Handler {
	return uptimeHandler{h.Handler.WithGroup(name)}
}

func readCmdline() string {
	b, _ := os.ReadFile("/proc/cmdline")
	return strings.TrimSpace(string(b))
}

// uptime is the guest's seconds since boot, for the boot-time log lines.
func uptime() string {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}
