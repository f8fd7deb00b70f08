package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/internal/logfile"
	"github.com/crackbox/crackbox/pkg/admin"
	"github.com/crackbox/crackbox/pkg/admin/fleet"
	"github.com/crackbox/crackbox/pkg/config"
	"github.com/crackbox/crackbox/pkg/proxy"
	"github.com/crackbox/crackbox/pkg/proxy/allow"
)

// singleClientID names the client that --client / proxy.client registers.
const singleClientID = "client"

var proxyServeBinds = []flagBind{
	{"listen", "proxy.listen"},
	{"transparent", "proxy.transparent"},
	{"admin", "admin.listen"},
	{"client", "proxy.client"},
	{"allow", "proxy.allow"},
	{"registry", "proxy.registry"},
	{"replica", "proxy.replica"},
	{"insecure-nats", "proxy.registry_insecure"},
}

// newProxyCmd builds crackbox proxy and its serve subcommand.
func newProxyCmd() *cobra.Command {
	proxyCmd := &cobra.Command{Use: "proxy", Short: "Run the allowlist egress proxy as a standalone daemon"}
	serve := &cobra.Command{
		Use:   "serve",
		Short: "Serve the forward and transparent proxy with an admin API",
		Long: `Serve the egress proxy. Clients are registered through the admin API
(POST /v1/register) or, for a single client, with --client and --allow.
SIGHUP reloads the config file; SIGTERM or SIGINT drains open tunnels for up
to proxy.drain_grace and exits 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, src, err := loadConfig(cmd, proxyServeBinds)
			if err != nil {
				return err
			}
			return serveProxy(cmd.Context(), cfg, src)
		},
	}
	addConfigFlag(serve)
	f := serve.Flags()
	f.String("listen", ":3128", "forward proxy address; \"\" disables it")
	f.String("transparent", ":3127", "transparent proxy address for NAT-redirected traffic; \"\" disables it")
	f.String("admin", "127.0.0.1:3129", "admin API address; \"\" disables it")
	f.String("client", "", "single-client mode: the client IP the --allow list applies to")
	f.StringArray("allow", nil, "allowed host (repeatable): example.com, *.example.com, host:port")
	f.String("registry", "", "NATS URLs of a registry shared by proxy replicas (JetStream KV); \"\" keeps it local")
	f.Bool("insecure-nats", false, "let proxy.registry's NATS go without credentials or TLS (anyone who reaches it could widen egress)")
	f.String("replica", "", "this replica's name in decision lines and logs (default: the host name)")
	proxyCmd.AddCommand(serve)
	return proxyCmd
}

// daemon is a running proxy serve: what SIGHUP and SIGTERM act on.
type daemon struct {
	log   *slog.Logger
	level *slog.LevelVar
	src   config.Source
	cfg   *config.Config
	reg   *proxy.Registry
	px    *proxy.Proxy
	adm   *admin.Server // nil when the admin API is off
	dlog  *decisionLog
	prom  *prometheus.Registry
	// fleet is the shared registry (proxy.registry); nil keeps it local.
	fleet   *fleet.Fleet
	replica string

	healthMu sync.Mutex
	down     error // first unexpected listener failure

	tokenFile string // the admin token this daemon made, removed when it stops
}

func serveProxy(ctx context.Context, cfg *config.Config, src config.Source) error {
	d, err := newDaemon(ctx, cfg, src)
	if err != nil {
		return err
	}
	defer d.close()
	ls, err := listen(cfg)
	if err != nil {
		return err
	}
	if err := d.startAdmin(ls); err != nil {
		ls.close()
		return err
	}
	wg := d.serve(ls)
	d.wait(ctx)
	d.drain()
	wg.Wait()
	if d.tokenFile != "" {
		os.Remove(d.tokenFile)
	}
	d.log.Info("proxy stopped")
	return nil
}

// newDaemon checks the config and builds the registry, the shared registry's
// connection when there is one, and the proxy; nothing listens yet.
func newDaemon(ctx context.Context, cfg *config.Config, src config.Source) (*daemon, error) {
	log, level := newLogger(cfg)
	if cfg.Proxy.Listen == "" && cfg.Proxy.Transparent == "" {
		return nil, errors.New("both proxy.listen and proxy.transparent are disabled: enable at least one")
	}
	if err := admin.CheckListen(cfg.Admin.Listen, cfg.Admin.Secret); err != nil {
		return nil, err
	}
	d := &daemon{log: log, level: level, src: src, cfg: cfg, reg: proxy.NewRegistry(), dlog: &decisionLog{},
		replica: replicaID(cfg.Proxy.Replica), prom: prometheus.NewRegistry()}
	if cfg.File != "" {
		log.Info("config loaded", "file", cfg.File)
	}
	d.prom.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts, err := d.proxyOptions(cfg)
	if err == nil {
		opts.Registerer, opts.Log = d.prom, log
		err = d.openRegistry(ctx)
	}
	if err == nil {
		d.px, err = proxy.New(opts, d.reg)
	}
	if err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

// close releases what newDaemon opened.
func (d *daemon) close() {
	if d.fleet != nil {
		d.fleet.Close()
	}
	d.dlog.Close()
}

// drain stops accepting, lets open tunnels finish for drain_grace, then cuts them.
func (d *daemon) drain() {
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.Proxy.DrainGrace.Duration)
	defer cancel()
	if err := d.px.Shutdown(ctx); err != nil {
		d.log.Warn("drain grace over, cutting open tunnels", "err", err)
	}
	if d.adm != nil {
		actx, acancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer acancel()
		_ = d.adm.Shutdown(actx)
	}
}

// reload rereads the config with the original flags; a bad file keeps the old config.
func (d *daemon) reload() {
	cfg, err := config.Load(d.src)
	if err != nil {
		d.log.Error("reload failed, keeping the old config", "err", err)
		return
	}
	opts, err := d.proxyOptions(cfg)
	if err != nil {
		d.log.Error("reload failed, keeping the old config", "err", err)
		return
	}
	if err := d.px.Reload(opts); err != nil {
		d.log.Error("reload failed, keeping the old config", "err", err)
		return
	}
	if d.fleet == nil {
		if err := d.setClient(cfg); err != nil {
			d.log.Error("reload: configured client not updated", "err", err)
		}
	}
	old := d.cfg
	for _, k := range []struct{ key, was, now string }{
		{"proxy.listen", old.Proxy.Listen, cfg.Proxy.Listen},
		{"proxy.transparent", old.Proxy.Transparent, cfg.Proxy.Transparent},
		{"admin.listen", old.Admin.Listen, cfg.Admin.Listen},
		{"admin.metrics_listen", old.Admin.MetricsListen, cfg.Admin.MetricsListen},
		{"proxy.state_file", old.Proxy.StateFile, cfg.Proxy.StateFile},
		{"proxy.registry", old.Proxy.Registry, cfg.Proxy.Registry},
		{"proxy.replica", old.Proxy.Replica, cfg.Proxy.Replica},
	} {
		if k.was != k.now {
			d.log.Warn("setting changes only on restart", "key", k.key, "running", k.was, "configured", k.now)
		}
	}
	if old.Admin.Secret != cfg.Admin.Secret {
		d.log.Warn("setting changes only on restart", "key", "admin.secret")
	}
	d.level.Set(cfg.Log.SlogLevel())
	d.cfg = cfg
	d.log.Info("config reloaded", "file", cfg.File, "allow", cfg.Proxy.Allow)
}

// proxyOptions converts the validated config into proxy.Options (the same keys a run's
// private proxy takes) plus the daemon's decision log; Registerer and Log are set
// once by the caller.
func (d *daemon) proxyOptions(cfg *config.Config) (proxy.Options, error) {
	opts, err := cfg.Proxy.RunOptions(nil)
	if err != nil {
		return opts, err
	}
	w, err := d.dlog.Open(cfg.Proxy.DecisionLog)
	if err != nil {
		return opts, fmt.Errorf("proxy.decision_log: %w", err)
	}
	if w != nil {
		opts.DecisionLog = w
	}
	opts.Replica = d.replica
	return opts, nil
}

// setClient makes the registry's configured single client match cfg: the
// global allowlist applies to proxy.client. Edits go through the admin
// server when there is one so the state file follows.
func (d *daemon) setClient(cfg *config.Config) error {
	list, err := allow.ParseWithPorts(cfg.Proxy.Allow, cfg.Proxy.DefaultPorts)
	if err != nil {
		return fmt.Errorf("proxy.allow: %w", err)
	}
	var ip netip.Addr
	if cfg.Proxy.Client != "" {
		if ip, err = netip.ParseAddr(cfg.Proxy.Client); err != nil {
			return fmt.Errorf("proxy.client: %w", err)
		}
	} else if len(cfg.Proxy.Allow) > 0 {
		d.log.Warn("proxy.allow is set but proxy.client is not: the global allowlist applies to no client")
	}
	apply := func(reg *proxy.Registry) error {
		for _, c := range reg.List() {
			if c.ID == singleClientID && c.IP != ip.Unmap() {
				reg.Unregister(c.IP)
			}
		}
		if !ip.IsValid() {
			return nil
		}
		if c, ok := reg.Lookup(ip); ok && c.ID == singleClientID {
			old := c.Allow.Entries()
			_, err := reg.Update(ip, diff(list.Entries(), old), diff(old, list.Entries()))
			return err
		}
		return reg.Register(proxy.Client{ID: singleClientID, IP: ip, Allow: list})
	}
	if d.adm != nil {
		return d.adm.Apply(apply)
	}
	return apply(d.reg)
}

// diff returns the entries of a that are not in b.
func diff(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

func (d *daemon) fail(err error) {
	d.healthMu.Lock()
	if d.down == nil {
		d.down = err
	}
	d.healthMu.Unlock()
	d.log.Error("listener stopped", "err", err)
}

func (d *daemon) health() error {
	d.healthMu.Lock()
	defer d.healthMu.Unlock()
	return d.down
}

func addrOf(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	return ln.Addr().String()
}

// daemonDecisionsMax caps the daemon's decision log file; past it the file
// rotates once to path.1, so clients cannot fill the disk with requests.
const daemonDecisionsMax = 64 << 20

// decisionLog is the daemon's decision log across reloads. Every SIGHUP opens
// its path anew, so after logrotate moves the file the daemon writes a fresh
// one; tunnels decided before the reload write to the new file too.
type decisionLog struct {
	mu   sync.Mutex
	path string
	w    io.WriteCloser
}

// Open (re)opens path ("-" is stderr, "" is none) and returns the log as a
// writer, or nil when it is off.
func (l *decisionLog) Open(path string) (io.Writer, error) {
	var w io.WriteCloser
	switch path {
	case "":
	case "-":
		w = nopCloser{os.Stderr}
	default:
		f, err := logfile.Open(path, daemonDecisionsMax, 0o640)
		if err != nil {
			return nil, err
		}
		w = f
	}
	l.mu.Lock()
	old := l.w
	l.path, l.w = path, w
	l.mu.Unlock()
	if old != nil {
		old.Close()
	}
	if w == nil {
		return nil, nil
	}
	return l, nil
}

// Write appends to the current file.
func (l *decisionLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil {
		return len(p), nil
	}
	return l.w.Write(p)
}

func (l *decisionLog) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w != nil {
		l.w.Close()
		l.w = nil
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
