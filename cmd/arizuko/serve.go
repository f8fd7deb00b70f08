package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	sdnotify "github.com/coreos/go-systemd/v22/daemon"
	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/turn"
)

// newServeCmd is `arizuko serve`.
func newServeCmd(a *app) *cobra.Command {
	var listen, natsURL string
	var insecureNATS bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the arizuko daemon (HTTP API)",
		Long: `Run the daemon on the data dir. It refuses to start without a secrets key
($ARIZUKO_SECRETS_KEY, else the file $ARIZUKO_SECRETS_KEY_FILE,
secrets.key_file or <data>/secrets.key names).`,
		Args: cobra.NoArgs,
		// Replaces the root's hook: serve's log level also comes from log.level,
		// which RunE knows only once the config is read.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig(flagOverrides(map[string]string{"server.listen": listen, "fleet.nats": natsURL, "log.level": a.logLevel})...)
			if err != nil {
				return err
			}
			if err := setupLog(cfg.Log.Level); err != nil {
				return err
			}
			cfg.Fleet.insecure = insecureNATS
			return serve(cmd.Context(), cfg, cfg.Server.Listen)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "address to listen on (default server.listen, "+defaultListen+")")
	cmd.Flags().StringVar(&natsURL, "nats", "", "NATS JetStream URL(s): publish turns to `arizuko runner`s instead of running them here (default fleet.nats)")
	cmd.Flags().BoolVar(&insecureNATS, "insecure-nats", false, "let the fleet's NATS go without credentials or TLS (anyone who reaches it could squat turns)")
	return cmd
}

func serve(ctx context.Context, cfg *Config, listen string) error {
	ring, err := cfg.Secrets.ring()
	if err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	token, err := readToken(cfg.Server.TokenFile)
	if err != nil {
		return fmt.Errorf("refusing to start: %w (run `arizuko init`)", err)
	}
	if len(token) < 16 {
		return fmt.Errorf("refusing to start: token in %s is shorter than 16 characters", cfg.Server.TokenFile)
	}
	if _, err := os.Stat(cfg.DataDir); err != nil {
		return fmt.Errorf("data dir: %w (run `arizuko init`)", err)
	}
	lock, err := lockData(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.DataDir, err)
	}
	defer lock.Close()

	l, err := service.Open(ctx, service.Options{DataDir: cfg.DataDir, Ring: ring, EngagementTTL: cfg.Routing.EngagementTTL.Duration,
		MaxTurnsPerDay: cfg.Turns.MaxTurnsPerDay, Store: cfg.Store.URL, AllowCIDRs: cfg.Turns.proxy.AllowCIDRs, Limits: cfg.Limits, Log: slog.Default()})
	if err != nil {
		return err
	}
	defer l.Close()
	if err := l.CheckKey(ctx); err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	if err := l.Store().Claim(ctx); err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	if n, err := l.Store().RequeueTurns(ctx, turn.OutcomeNoSecrets); err != nil {
		return err
	} else if n > 0 {
		slog.Info("turns that failed on secrets run again under this key ring", "turns", n)
	}

	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", listen, err)
	}
	if ap, err := netip.ParseAddrPort(ln.Addr().String()); err == nil {
		if !ap.Addr().IsLoopback() {
			slog.Warn("api listens beyond loopback without TLS; front it with a TLS proxy", "addr", ln.Addr().String())
		}
		// No turn reaches the daemon's own API, whatever allow_cidrs opens.
		cfg.Turns.proxy.Refuse = append(cfg.Turns.proxy.Refuse, ap)
	}
	url := "http://" + ln.Addr().String()
	info, _ := json.Marshal(daemonInfo{URL: url, PID: os.Getpid()})
	infoPath := filepath.Join(cfg.DataDir, daemonFile)
	if err := os.WriteFile(infoPath, info, 0o600); err != nil {
		ln.Close()
		return err
	}
	defer os.Remove(infoPath)

	cfg.Turns.fleet, cfg.Turns.email = cfg.Fleet, cfg.Email
	handler, stopTurns, err := startTurns(ctx, cfg.Turns, l, token, url)
	if err != nil {
		return err
	}
	defer stopTurns()
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	slog.Info("arizuko serving", "url", url, "data", cfg.DataDir, "config", cfg.file)
	// The listener is bound and the turn queue runs: tell systemd (Type=notify).
	if _, err := sdnotify.SdNotify(false, sdnotify.SdNotifyReady); err != nil {
		slog.Warn("systemd readiness notification", "err", err)
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	slog.Info("arizuko shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
