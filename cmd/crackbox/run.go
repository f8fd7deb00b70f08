package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/crackbox/crackbox/internal/logfile"
	"github.com/crackbox/crackbox/pkg/config"
	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/jail/netjail"
	"github.com/crackbox/crackbox/pkg/jail/runrec"
)

// stopSignal is the signal that made forwardSignals stop the guest.
var stopSignal atomic.Int32

// termGrace is how long the command may take to exit after SIGTERM before the guest is stopped.
const termGrace = 10 * time.Second

var runBinds = []flagBind{
	{"kernel", "run.kernel"},
	{"accel", "run.accel"},
	{"memory", "run.memory"},
	{"cpus", "run.cpus"},
	{"timeout", "run.timeout"},
	{"net", "run.net"},
	{"guest-init", "run.guest_init"},
	{"snapshot", "run.snapshot"},
	{"workdir-sync", "run.workdir_sync"},
}

type runFlags struct {
	interactive, tty        bool
	env, envFiles, volumes  []string
	workdir                 string
	noWorkdir, ro, force    bool
	systemShare             bool // --allow-system-share
	root, debug             bool
	rootfs, machine, hostnm string
	snapshot                string
	secrets                 []string
	diskQuota               string
	net                     netFlags
}

// newRunCmd builds crackbox run.
func newRunCmd() *cobra.Command {
	var rf runFlags
	cmd := &cobra.Command{
		Use:   "run [flags] -- command [args...]",
		Short: "Run one command in a throwaway guest",
		Long: `Run one command in a throwaway QEMU guest that sees the host's /usr, /etc and /opt
read-only (secrets masked), the current directory read-write at the same path, and
nothing else of the host unless shared with -v or passed with -e.

The guest's only way out is a proxy started for this run that lets it reach the
hosts named with --allow (comma-separated, repeatable; --allow none.invalid blocks
everything) and nothing else. As root the guest gets a tap device whose traffic
nftables confines to that proxy and its DNS responder (--net tap); otherwise it has
no NIC and proxy-aware clients reach the proxy over the control channel
(--net proxy-only). --net auto picks tap when possible. At exit a line on stderr
names what was blocked; --learn allows nothing and prints the --allow list the
command would have needed. Each run leaves a record: crackbox runs ls.

What this host lacks (no usable KVM, so the guest runs under slow TCG; a VMM that
cannot be fully confined) is one "crackbox: note:" line; crackbox doctor explains it.
-q prints nothing of crackbox's own but the errors that make the run fail: no
summary, no warnings, no notes (--learn's list still, it is what was asked for).

The guest's PATH is the caller's PATH with the entries the guest cannot see dropped
(a directory under /usr, /opt, the workdir or a volume stays; one under /tmp or an
unshared home goes), so tools on the host's PATH are found; -e PATH=... wins.

The exit status is the command's; 125 means crackbox itself failed (including a
guest crash and --timeout), 126 the command is not executable, 127 not found,
128+N killed by signal N. Ctrl-C is forwarded as SIGINT; a second Ctrl-C within
2 seconds stops the guest. SIGTERM is forwarded too; a command still running 10
seconds later is stopped (exit 143). The network is torn down on every path.

--secret NAME@host[,host...] keeps a credential out of the guest: the guest gets
NAME=<placeholder>, a random token drawn for this run, and the proxy puts the real
value (from the invoking environment's NAME, or =env:OTHER, or =file:PATH) in place
of the placeholder only in HTTPS requests to those hosts: in header values, inside
Basic credentials (https://x:$TOKEN@host/) and in the URL query. Request bodies are
not rewritten. For those hosts alone the proxy terminates TLS with a CA made for
this run (in memory, trusted in the guest through SSL_CERT_FILE and friends) and
verifies the upstream against the host's roots plus proxy.upstream_ca; every other
host stays an end-to-end tunnel. Responses from those hosts have the value turned
back into the placeholder. The placeholder anywhere else (plain HTTP, a CONNECT
target, a TLS server name, a DNS name, another host) is refused with
secret-exfiltration, and the exit summary names the secret.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRun(cmd, args, rf)
		},
	}
	addConfigFlag(cmd)
	f := cmd.Flags()
	f.SetInterspersed(false)
	f.BoolVarP(&rf.interactive, "interactive", "i", false, "forward stdin to the command; without -i its stdin is empty, as with docker run, and a pipe or file on stdin gets a warning")
	f.BoolVarP(&rf.tty, "tty", "t", false, "give the command a terminal (raw mode, window size follows)")
	f.StringArrayVarP(&rf.env, "env", "e", nil, "set KEY=VALUE in the guest, or KEY to pass the host's value (repeatable)")
	f.StringArrayVar(&rf.envFiles, "env-file", nil, "read KEY=VALUE lines from a file (repeatable)")
	f.StringArrayVarP(&rf.volumes, "volume", "v", nil, "share HOST:GUEST[:ro] (repeatable)")
	f.StringVarP(&rf.workdir, "workdir", "w", "", "directory shared read-write at the same path and used as cwd (default: the current directory)")
	f.BoolVar(&rf.noWorkdir, "no-workdir", false, "share no work directory; the command starts in an empty $HOME")
	f.BoolVar(&rf.ro, "ro", false, "share the work directory read-only")
	f.BoolVar(&rf.force, "force", false, "allow sharing the home directory or credential directories (~/.ssh, ~/.aws, ...)")
	f.BoolVar(&rf.systemShare, "allow-system-share", false, "allow read-write shares of system directories (/etc, /usr, /var, ...) and of crackbox's cache and run records")
	f.BoolVar(&rf.root, "root", false, "run the command as root in the guest")
	f.StringVar(&rf.rootfs, "rootfs", "", "use this directory tree as the guest root instead of the host view")
	f.StringVar(&rf.machine, "machine", "microvm", "QEMU machine: microvm or q35 (needs a kernel with PCI)")
	f.StringVar(&rf.hostnm, "hostname", "", "guest hostname (default crackbox)")
	f.StringVar(&rf.snapshot, "snapshot", "auto", "restore a snapshot of a booted guest instead of booting: auto (when the run fits), on (refuse runs that cannot) or off")
	f.StringArrayVar(&rf.secrets, "secret", nil, "NAME@host[,host...][=env:OTHER|=file:PATH]: the guest gets a placeholder, the proxy sends the value to those hosts only (repeatable; bodies are not rewritten)")
	f.StringVar(&rf.diskQuota, "disk-quota", "10G", "how much the workdir and each read-write volume may grow during the run (e.g. 500M, 10G; none = unbounded); each new file, directory or link counts 4 KiB; past it the guest gets ENOSPC")
	f.BoolVar(&rf.debug, "debug", false, "debug logging; print the console log after a crash")
	// These bind to crackbox.toml [run] keys; the config defaults apply when unset.
	f.String("kernel", "", "guest kernel (vmlinux); default: the newest built one")
	f.String("guest-init", "", "guest-init binary; default: next to crackbox")
	f.String("accel", "auto", "accelerator: auto, kvm or tcg")
	f.String("memory", "512M", "guest memory, e.g. 256M, 1G")
	f.String("workdir-sync", "exit", "when the workdir's changes reach the host: exit (kept in the guest and applied when the command ends, also after Ctrl-C or --timeout; lost if crackbox is killed) or live (written through as they are made: slower, for jobs whose writes the host must see during the run)")
	f.Int("cpus", 1, "guest vCPUs")
	f.String("timeout", "0", "stop the guest after this long (e.g. 30s, 5m); exit 125")
	f.String("net", "auto", "network: auto (tap when root, else proxy-only), tap, proxy-only or none")
	cmd.RegisterFlagCompletionFunc("net", cobra.FixedCompletions([]string{
		"auto\ttap when root, else proxy-only", "tap\ta tap confined by nftables (root)",
		"proxy-only\tno NIC; proxy-aware clients only", "none\tno network at all",
	}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("accel", cobra.FixedCompletions([]string{"auto", "kvm", "tcg"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("workdir-sync", cobra.FixedCompletions([]string{"live", "exit"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RegisterFlagCompletionFunc("snapshot", cobra.FixedCompletions([]string{"auto", "on", "off"}, cobra.ShellCompDirectiveNoFileComp))
	f.StringArrayVar(&rf.net.allow, "allow", nil, "hosts the command may reach, comma-separated (repeatable); none.invalid blocks everything")
	f.StringArrayVar(&rf.net.allowFiles, "allow-file", nil, "read allowlist entries from a file, one or more a line, # comments (repeatable)")
	f.StringArrayVar(&rf.net.allowCIDRs, "allow-cidr", nil, "private range allowed names may resolve into, e.g. 10.1.2.0/24; it opens no IP literal (name addresses in --allow for that), and this host's own addresses only when named exactly (a /32) (repeatable)")
	f.StringVar(&rf.net.logFile, "log", "", "append the proxy's JSON decision log to this file, rotated to FILE.1 at 8 MiB (- is stderr)")
	f.BoolVar(&rf.net.learn, "learn", false, "allow nothing, record every host the command tries, print them as an --allow list")
	f.BoolVarP(&rf.net.quiet, "quiet", "q", false, "print nothing of crackbox's own but errors that fail the run (no blocked-egress summary, no warnings, no host notes)")
	return cmd
}

func runRun(cmd *cobra.Command, argv []string, rf runFlags) error {
	cfg, _, err := loadConfig(cmd, runBinds)
	if err != nil {
		return err
	}
	log, level := newLogger(cfg)
	switch {
	case rf.debug:
		log, _ = newLogger(&config.Config{Log: config.Log{Level: "debug"}})
	case rf.net.quiet:
		// Quiet means crackbox's own output is only what makes the run fail.
		level.Set(slog.LevelError)
	}
	spec, err := specFromFlags(cmd, cfg, argv, rf)
	if err != nil {
		return err
	}
	spec.Log = log
	spec.Debug = rf.debug
	if !rf.debug {
		spec.HostNotes = hostNotes(cmd.ErrOrStderr(), rf.net.quiet)
	}
	nopts, err := runNetOptions(cfg, rf, spec.Env)
	if err != nil {
		return err
	}
	nopts.Log, nopts.Proxy.Log = log, log

	if !rf.net.quiet {
		warnAllowAll(cmd.ErrOrStderr(), nopts.Allow)
	}
	resize := guestStdio(cmd, rf, &spec)

	// Signals are caught before anything is built so that Ctrl-C or SIGTERM during
	// setup still runs the cleanup below.
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	sigs := make(chan int, 4)
	spec.Signals = sigs
	stopSignals := forwardSignals(ctx, cancel, sigs, resize, rf.tty)
	defer stopSignals()

	rec, err := runStore().Create(runrec.Manifest{
		ID: runrec.NewID(time.Now()), Argv: argv, Workdir: spec.Workdir,
		Allow: nopts.Allow.Entries(), Learn: rf.net.learn, Net: cfg.Run.Net,
	})
	if err != nil {
		return err
	}
	nopts.RunID = rec.ID()
	dlog, closeLog, err := decisionSink(rec, rf.net.logFile)
	if err != nil {
		finishRecord(rec, log, rf.net.learn, netjail.Outcome{Result: jail.Result{Exit: jail.ExitFailed}, Mode: cfg.Run.Net}, err)
		return err
	}
	defer closeLog()
	nopts.Proxy.DecisionLog = dlog

	ready, restore := rawTerminal(rf, &spec)
	defer restore()
	out, err := netjail.Jail(ctx, netjail.Job{Net: nopts, Spec: spec, Ready: ready})
	restore()
	finishRecord(rec, log, rf.net.learn, out, err)
	if line := out.Net.Report(rf.net.quiet); line != "" {
		fmt.Fprintln(os.Stderr, line)
	}
	if err != nil {
		return runError(out.Result, err, rf.debug)
	}
	if out.ExecError != "" {
		fmt.Fprintf(os.Stderr, "crackbox: %s: %s\n", argv[0], out.ExecError)
	}
	if out.Exit != 0 {
		return exitError{out.Exit}
	}
	return nil
}

// guestStdio connects the command to this process's stdio (stdin only with
// -i) and returns the channel that carries window size changes.
func guestStdio(cmd *cobra.Command, rf runFlags, spec *jail.Spec) chan [2]uint16 {
	if rf.interactive {
		spec.Stdin = os.Stdin
	} else if !rf.net.quiet {
		warnStdinDropped(cmd.ErrOrStderr(), os.Stdin)
	}
	spec.Stdout, spec.Stderr = os.Stdout, os.Stderr
	resize := make(chan [2]uint16, 1)
	spec.Resize = resize
	return resize
}

// rawTerminal sizes the guest's terminal for -t, and for -it on a terminal
// returns the step that makes it raw once the network is up; restore undoes it.
func rawTerminal(rf runFlags, spec *jail.Spec) (ready func() error, restore func()) {
	restore = func() {}
	if !rf.tty {
		return nil, restore
	}
	spec.TTY = true
	if w, h, err := term.GetSize(int(os.Stdout.Fd())); err == nil {
		spec.Rows, spec.Cols = uint16(h), uint16(w)
	}
	fd := int(os.Stdin.Fd())
	if !rf.interactive || !term.IsTerminal(fd) {
		return nil, restore
	}
	var old *term.State
	ready = func() error {
		var err error
		if old, err = term.MakeRaw(fd); err != nil {
			return fmt.Errorf("terminal raw mode: %w", err)
		}
		return nil
	}
	restore = func() {
		if old != nil {
			// Leave the terminal usable before anything else is printed.
			fmt.Fprint(os.Stderr, "\r")
			term.Restore(fd, old)
			old = nil
		}
	}
	return ready, restore
}

// finishRecord writes how the run ended into its record.
func finishRecord(rec *runrec.Record, log *slog.Logger, learn bool, out netjail.Outcome, runErr error) {
	ferr := rec.Finish(func(m *runrec.Manifest) {
		m.Net, m.Accel, m.Exit, m.Signal = out.Mode, out.Accel, out.Exit, out.Signal
		m.BootMS, m.RunMS = out.Boot.Milliseconds(), out.Run.Milliseconds()
		m.Blocked = out.Net.Blocked()
		if learn {
			m.Learned = out.Net.Learned()
		}
		if out.ConsoleLog != "" {
			m.RunDir = out.RunDir
		}
		if runErr != nil {
			m.Status, m.Error = runrec.StatusFailed, runErr.Error()
		} else if out.ExecError != "" {
			m.Error = out.ExecError
		}
	})
	if ferr != nil {
		log.Warn("run record", "id", rec.ID(), "err", ferr)
	}
}

// runError prints one clear line for a failed run and picks the exit status.
func runError(res jail.Result, err error, debug bool) error {
	switch {
	case errors.Is(err, context.Canceled):
		if syscall.Signal(stopSignal.Load()) == syscall.SIGTERM {
			fmt.Fprintf(os.Stderr, "crackbox: stopped: the command ignored SIGTERM for %s\n", termGrace)
			return exitError{jail.ExitSignalBase + int(syscall.SIGTERM)}
		}
		fmt.Fprintln(os.Stderr, "crackbox: stopped by a second Ctrl-C")
		return exitError{jail.ExitSignalBase + int(syscall.SIGINT)}
	case errors.Is(err, jail.ErrGuestCrashed):
		fmt.Fprintln(os.Stderr, "crackbox:", err)
		if debug && res.ConsoleLog != "" {
			// Both files of the capped console log (at most 2 MiB), oldest first.
			if out := logfile.Tail(res.ConsoleLog, 4<<20); out != "" {
				fmt.Fprintln(os.Stderr, "---- console log ----")
				fmt.Fprint(os.Stderr, out)
			}
		}
	default:
		fmt.Fprintln(os.Stderr, "crackbox:", err)
	}
	return exitError{jail.ExitFailed}
}

// forwardSignals forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2 to the command; a
// second SIGINT within 2 s cancels the run, and so does a command still running
// termGrace after SIGTERM, so a supervisor's SIGTERM always ends in a cleaned-up run.
// SIGWINCH becomes a resize when tty is set.
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
		var termTimer <-chan time.Time
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-termTimer:
				stopSignal.Store(int32(syscall.SIGTERM))
				cancel()
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
						stopSignal.Store(int32(syscall.SIGINT))
						cancel()
						return
					}
					lastInt = time.Now()
				}
				if sig == syscall.SIGTERM && termTimer == nil {
					termTimer = time.After(termGrace)
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
		Argv:        argv,
		Kernel:      cfg.Run.Kernel,
		GuestInit:   cfg.Run.GuestInit,
		Accel:       cfg.Run.Accel,
		Snapshot:    cfg.Run.Snapshot,
		WorkdirSync: cfg.Run.WorkdirSync,
		CacheDir:    cfg.Run.Cache,
		CPUs:        cfg.Run.CPUs,
		MemoryMiB:   int(cfg.Run.Memory.MiB()),
		Timeout:     cfg.Run.Timeout.Duration,
		Force:       rf.force,
		Root:        rf.root,
		RootFS:      rf.rootfs,
		Machine:     rf.machine,
		Hostname:    rf.hostnm,
		WorkdirRO:   rf.ro,
		// PATH names no secret; the guest keeps the entries it can see.
		Path: os.Getenv("PATH"),
	}
	// Run records are crackbox's state: no guest may rewrite them.
	s.SystemShare, s.StateDirs = rf.systemShare, []string{runStore().Dir}
	switch rf.diskQuota {
	case "none":
		s.DiskQuota = -1
	default:
		var q config.Size
		if err := q.UnmarshalText([]byte(rf.diskQuota)); err != nil || q == 0 {
			return s, fmt.Errorf("--disk-quota %q: give a size such as 500M or 10G, or none", rf.diskQuota)
		}
		s.DiskQuota = int64(q)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return s, err
	}
	if err := checkWorkdirFlags(rf); err != nil {
		return s, err
	}
	switch {
	case rf.noWorkdir:
	case rf.workdir != "":
		s.Workdir = rf.workdir
		// A directory an earlier guest could write may hold a symlink it
		// planted in place of the one named; the current directory is the
		// operator's own.
		s.WorkdirNoSymlinks = true
	default:
		s.Workdir = cwd
	}
	for _, v := range rf.volumes {
		vol, err := parseVolume(v, cwd)
		if err != nil {
			return s, err
		}
		vol.NoSymlinks = true
		s.Volumes = append(s.Volumes, vol)
	}
	if err := checkWorkdirNotVolume(rf.workdir, s.Volumes); err != nil {
		return s, err
	}
	s.Env, err = resolveEnv(rf.env, rf.envFiles, os.LookupEnv)
	if err != nil {
		return s, err
	}
	return s, nil
}
