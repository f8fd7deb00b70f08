package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/crackbox/crackbox/pkg/config"
	"github.com/crackbox/crackbox/pkg/jail"
)

var runBinds = []flagBind{
	{"kernel", "run.kernel"},
	{"accel", "run.accel"},
	{"memory", "run.memory"},
	{"cpus", "run.cpus"},
	{"timeout", "run.timeout"},
	{"net", "run.net"},
	{"guest-init", "run.guest_init"},
}

type runFlags struct {
	interactive, tty        bool
	env, envFiles, volumes  []string
	workdir                 string
	noWorkdir, ro, force    bool
	root, debug             bool
	rootfs, machine, hostnm string
}

func init() {
	var rf runFlags
	cmd := &cobra.Command{
		Use:   "run [flags] -- command [args...]",
		Short: "Run one command in a throwaway guest",
		Long: `Run one command in a throwaway QEMU guest that sees the host's /usr, /etc and /opt
read-only (secrets masked), the current directory read-write at the same path, and
nothing else of the host unless shared with -v or passed with -e.

The exit status is the command's; 125 means crackbox itself failed (including a
guest crash and --timeout), 126 the command is not executable, 127 not found,
128+N killed by signal N. Ctrl-C is forwarded as SIGINT; a second Ctrl-C within
2 seconds stops the guest.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRun(cmd, args, rf)
		},
	}
	addConfigFlag(cmd)
	f := cmd.Flags()
	f.SetInterspersed(false)
	f.BoolVarP(&rf.interactive, "interactive", "i", false, "forward stdin to the command")
	f.BoolVarP(&rf.tty, "tty", "t", false, "give the command a terminal (raw mode, window size follows)")
	f.StringArrayVarP(&rf.env, "env", "e", nil, "set KEY=VALUE in the guest, or KEY to pass the host's value (repeatable)")
	f.StringArrayVar(&rf.envFiles, "env-file", nil, "read KEY=VALUE lines from a file (repeatable)")
	f.StringArrayVarP(&rf.volumes, "volume", "v", nil, "share HOST:GUEST[:ro] (repeatable)")
	f.StringVarP(&rf.workdir, "workdir", "w", "", "directory shared read-write at the same path and used as cwd (default: the current directory)")
	f.BoolVar(&rf.noWorkdir, "no-workdir", false, "share no work directory; the command starts in an empty $HOME")
	f.BoolVar(&rf.ro, "ro", false, "share the work directory read-only")
	f.BoolVar(&rf.force, "force", false, "allow sharing the home directory or credential directories (~/.ssh, ~/.aws, ...)")
	f.BoolVar(&rf.root, "root", false, "run the command as root in the guest")
	f.StringVar(&rf.rootfs, "rootfs", "", "use this directory tree as the guest root instead of the host view")
	f.StringVar(&rf.machine, "machine", "microvm", "QEMU machine: microvm or q35 (needs a kernel with PCI)")
	f.StringVar(&rf.hostnm, "hostname", "", "guest hostname (default crackbox)")
	f.BoolVar(&rf.debug, "debug", false, "debug logging; print the console log after a crash")
	// These bind to crackbox.toml [run] keys; the config defaults apply when unset.
	f.String("kernel", "", "guest kernel (vmlinux); default: the newest built one")
	f.String("guest-init", "", "guest-init binary; default: next to crackbox")
	f.String("accel", "auto", "accelerator: auto, kvm or tcg")
	f.String("memory", "512M", "guest memory, e.g. 256M, 1G")
	f.Int("cpus", 1, "guest vCPUs")
	f.String("timeout", "0", "stop the guest after this long (e.g. 30s, 5m); exit 125")
	f.String("net", "none", "network: none (tap and proxy-only arrive with --allow)")
	root.AddCommand(cmd)
}

func runRun(cmd *cobra.Command, argv []string, rf runFlags) error {
	cfg, _, err := loadConfig(cmd, runBinds)
	if err != nil {
		return err
	}
	log, _ := newLogger(cfg)
	if rf.debug {
		log, _ = newLogger(&config.Config{Log: config.Log{Level: "debug"}})
	}
	spec, err := specFromFlags(cmd, cfg, argv, rf)
	if err != nil {
		return err
	}
	spec.Logger = log
	spec.Debug = rf.debug

	stdinFd := int(os.Stdin.Fd())
	stdinTTY := term.IsTerminal(stdinFd)
	if rf.interactive {
		spec.Stdin = os.Stdin
	}
	spec.Stdout, spec.Stderr = os.Stdout, os.Stderr
	resize := make(chan [2]uint16, 1)
	spec.Resize = resize
	if rf.tty {
		spec.TTY = true
		if w, h, err := term.GetSize(int(os.Stdout.Fd())); err == nil {
			spec.Rows, spec.Cols = uint16(h), uint16(w)
		}
		if rf.interactive && stdinTTY {
			old, err := term.MakeRaw(stdinFd)
			if err != nil {
				return fmt.Errorf("terminal raw mode: %w", err)
			}
			defer term.Restore(stdinFd, old)
		}
	}

	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	sigs := make(chan int, 4)
	spec.Signals = sigs
	stopSignals := forwardSignals(ctx, cancel, sigs, resize, rf.tty)
	defer stopSignals()

	res, err := jail.Run(ctx, spec)
	if rf.tty && rf.interactive && stdinTTY {
		// Leave the terminal usable before printing anything.
		fmt.Fprint(os.Stderr, "\r")
	}
	if err != nil {
		return runError(res, err, rf.debug)
	}
	if res.ExecError != "" {
		fmt.Fprintf(os.Stderr, "crackbox: %s: %s\n", argv[0], res.ExecError)
	}
	if res.Exit != 0 {
		return exitError{res.Exit}
	}
	return nil
}

// runError prints one clear line for a failed run and picks the exit status.
func runError(res jail.Result, err error, debug bool) error {
	switch {
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(os.Stderr, "crackbox: stopped by a second Ctrl-C")
		return exitError{jail.ExitSignalBase + int(syscall.SIGINT)}
	case errors.Is(err, jail.ErrGuestCrashed):
		fmt.Fprintln(os.Stderr, "crackbox:", err)
		if debug && res.ConsoleLog != "" {
			if f, ferr := os.Open(res.ConsoleLog); ferr == nil {
				fmt.Fprintln(os.Stderr, "---- console log ----")
				io.Copy(os.Stderr, f)
				f.Close()
			}
		}
	default:
		fmt.Fprintln(os.Stderr, "crackbox:", err)
	}
	return exitError{jail.ExitFailed}
}

// forwardSignals forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2 to the command; a
// second SIGINT within 2 s cancels the run. SIGWINCH becomes a resize when tty is set.
func forwardSignals(ctx context.Context, cancel context.CancelFunc, sigs chan<- int, resize chan<- [2]uint16, tty bool) func() {
	ch := make(chan os.Signal, 8)
	list := []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}
	if tty {
		list = append(list, syscall.SIGWINCH)
	}
	signal.Notify(ch, list...)
	done := make(chan struct{})
	go func() {
		var lastInt time.Time
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case s := <-ch:
				sig := s.(syscall.Signal)
				if sig == syscall.SIGWINCH {
					if w, h, err := term.GetSize(int(os.Stdout.Fd())); err == nil {
						select {
						case resize <- [2]uint16{uint16(h), uint16(w)}:
						default:
						}
					}
					continue
				}
				if sig == syscall.SIGINT {
					if !lastInt.IsZero() && time.Since(lastInt) < 2*time.Second {
						cancel()
						return
					}
					lastInt = time.Now()
				}
				select {
				case sigs <- int(sig):
				default:
				}
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

// specFromFlags builds the jail.Spec from flags and the [run] config.
func specFromFlags(cmd *cobra.Command, cfg *config.Config, argv []string, rf runFlags) (jail.Spec, error) {
	s := jail.Spec{
		Argv:      argv,
		Kernel:    cfg.Run.Kernel,
		GuestInit: cfg.Run.GuestInit,
		Accel:     cfg.Run.Accel,
		CPUs:      cfg.Run.CPUs,
		MemoryMiB: int(cfg.Run.Memory.MiB()),
		Timeout:   cfg.Run.Timeout.Duration,
		Force:     rf.force,
		Root:      rf.root,
		RootFS:    rf.rootfs,
		Machine:   rf.machine,
		Hostname:  rf.hostnm,
		WorkdirRO: rf.ro,
	}
	// The config's default run.net is "auto"; until tap and proxy-only land here it means none.
	switch cfg.Run.Net {
	case "", "auto", "none":
		s.Net.Mode = jail.NetNone
	default:
		return s, fmt.Errorf("--net %s is not available yet; use --net none", cfg.Run.Net)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return s, err
	}
	switch {
	case rf.noWorkdir:
	case rf.workdir != "":
		s.Workdir = rf.workdir
	default:
		s.Workdir = cwd
	}
	for _, v := range rf.volumes {
		vol, err := jail.ParseVolume(v, cwd)
		if err != nil {
			return s, err
		}
		s.Volumes = append(s.Volumes, vol)
	}
	s.Env, err = jail.ResolveEnv(rf.env, rf.envFiles, os.LookupEnv)
	if err != nil {
		return s, err
	}
	return s, nil
}
