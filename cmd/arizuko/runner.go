package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/internal/natsauth"
	"github.com/crackbox/crackbox/pkg/arizuko/dispatch"
)

// newRunnerCmd is `arizuko runner`: one host of the fleet.
func newRunnerCmd(a *app) *cobra.Command {
	var (
		natsURL, creds string
		nkey, ca       string
		insecureNATS   bool
		capacity       int
		labels         []string
		hostAgent      bool
	)
	c := &cobra.Command{
		Use:   "runner",
		Short: "Run turns that `arizuko serve --nats` dispatches",
		Long: `Pull turns from NATS JetStream and run each in its own guest on this host,
up to --capacity at a time. The folder's lease in JetStream KV keeps one live
turn per folder across the fleet; the control plane (--server, with a token
of kind runner) hands out each turn's job, serves its tool calls and takes
its outcome. Folder homes and sockets live under --data on this host.`,
		Args: cobra.NoArgs,
		// Replaces the root's hook: the runner logs at info unless told.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig(flagOverrides(map[string]string{
				"fleet.nats": natsURL, "fleet.creds": creds, "fleet.nkey": nkey, "fleet.ca": ca, "log.level": a.logLevel})...)
			if err != nil {
				return err
			}
			if err := setupLog(cfg.Log.Level); err != nil {
				return err
			}
			fc := cfg.Fleet
			fc.insecure = insecureNATS
			server, token := cfg.remote, cfg.token
			switch {
			case fc.NATS == "":
				return fmt.Errorf("runner: no NATS: pass --nats nats://host:4222 or set fleet.nats")
			case server == "" || token == "":
				return fmt.Errorf("runner: pass --server (the control plane's URL) and --token (`arizuko token add NAME --kind runner`)")
			case capacity < 1 || capacity > 1000:
				return fmt.Errorf("runner: --capacity %d: want 1 to 1000", capacity)
			}
			auth, err := fc.auth("runner")
			if err != nil {
				return err
			}
			ls, err := dispatch.ParseLabels(labels)
			if err != nil {
				return fmt.Errorf("runner: --label: %w", err)
			}
			if err := cfg.Turns.validate(); err != nil {
				return err
			}
			exec := newTurnRunner(cfg.Turns)
			if hostAgent {
				slog.Warn("runner runs agents as host processes, without a guest: for tests only")
				exec = hostProcess{}
			}
			if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
				return fmt.Errorf("runner data dir: %w", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runRunner(ctx, auth, &dispatch.Client{URL: server, Token: token},
				dispatch.RunnerOptions{Capacity: capacity, Labels: ls, Exec: exec, DataDir: cfg.DataDir, Log: slog.Default()})
		},
	}
	f := c.Flags()
	f.StringVar(&natsURL, "nats", "", "NATS JetStream URL(s) (default fleet.nats)")
	f.StringVar(&creds, "nats-creds", "", "NATS JWT credentials file (default fleet.creds)")
	f.StringVar(&nkey, "nats-nkey", "", "NATS nkey seed file (default fleet.nkey)")
	f.StringVar(&ca, "nats-ca", "", "PEM CAs of the NATS servers' TLS (default fleet.ca)")
	f.BoolVar(&insecureNATS, "insecure-nats", false, "let NATS go without credentials or TLS (anyone who reaches it could squat turns)")
	f.IntVar(&capacity, "capacity", 1, "live turns (guests) on this host")
	f.StringArrayVar(&labels, "label", nil, "a label folders may require, key=value (repeatable), e.g. kvm=true")
	f.BoolVar(&hostAgent, "unsafe-host-agent", false, "run agents as host processes without a guest (tests only)")
	f.MarkHidden("unsafe-host-agent")
	return c
}

// runRunner checks the token, waits for the fleet's streams and pulls turns until ctx ends.
func runRunner(ctx context.Context, auth natsauth.Auth, cl *dispatch.Client, o dispatch.RunnerOptions) error {
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	who, err := cl.Whoami(wctx)
	cancel()
	if errors.Is(err, dispatch.ErrRefused) {
		return fmt.Errorf("runner: %w; make one with `arizuko token add NAME --kind runner`", err)
	}
	if err != nil {
		return fmt.Errorf("runner: control plane %s: %w", cl.URL, err)
	}
	nc, err := dispatch.Connect(auth, "arizuko-runner-"+who.Runner)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if o.Setup, err = dispatch.Await(ctx, js, slog.Default()); err != nil {
		return err
	}
	o.ID, o.Client = who.Runner, cl
	r, err := dispatch.NewRunner(ctx, o)
	if err != nil {
		return err
	}
	return r.Run(ctx)
}
