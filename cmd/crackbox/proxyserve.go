package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"

	sdnotify "github.com/coreos/go-systemd/v22/daemon"

	"github.com/crackbox/crackbox/internal/envvar"
	"github.com/crackbox/crackbox/pkg/admin"
	"github.com/crackbox/crackbox/pkg/config"
	"github.com/crackbox/crackbox/pkg/jail/rundir"
	"github.com/crackbox/crackbox/pkg/proxy"
)

// listeners are the daemon's sockets; nil ones are disabled.
type listeners struct{ fwd, tr, adm, met net.Listener }

// listen binds everything before anything is served, so a taken port fails
// the start instead of leaving a half-up daemon.
func listen(cfg *config.Config) (*listeners, error) {
	ls := &listeners{}
	for _, l := range []struct {
		key, addr string
		ln        *net.Listener
	}{
		{"proxy.listen", cfg.Proxy.Listen, &ls.fwd}, {"proxy.transparent", cfg.Proxy.Transparent, &ls.tr},
		{"admin.listen", cfg.Admin.Listen, &ls.adm}, {"admin.metrics_listen", cfg.Admin.MetricsListen, &ls.met},
	} {
		if l.addr == "" {
			continue
		}
		var err error
		if *l.ln, err = net.Listen("tcp", l.addr); err != nil {
			ls.close()
			return nil, fmt.Errorf("%s: %w", l.key, err)
		}
	}
	return ls, nil
}

func (ls *listeners) close() {
	for _, ln := range []net.Listener{ls.fwd, ls.tr, ls.adm, ls.met} {
		if ln != nil {
			ln.Close()
		}
	}
}

// startAdmin builds the admin server when the admin or metrics listener is on.
func (d *daemon) startAdmin(ls *listeners) error {
	if ls.adm == nil && ls.met == nil {
		return nil
	}
	key, err := admin.LoadStateKey(os.Getenv(envvar.StateKey), d.cfg.Proxy.StateKeyFile, d.log)
	if err != nil {
		return err
	}
	secret := d.cfg.Admin.Secret
	if ls.adm != nil && secret == "" {
		if secret, err = d.makeToken(ls.adm.Addr().String()); err != nil {
			return err
		}
	}
	o := admin.Options{
		Registry: d.reg, Secret: secret, StateFile: d.cfg.Proxy.StateFile, StateKey: key,
		Gatherer: d.prom, Healthy: d.health, Active: d.px.Active, Log: d.log,
	}
	o.Shared = d.shared()
	if d.adm, err = admin.New(o); err != nil {
		return err
	}
	return nil
}

// makeToken guards an admin API started without admin.secret with a fresh token only
// this user can read: every local user can dial loopback.
func (d *daemon) makeToken(addr string) (string, error) {
	base := rundir.DefaultBase()
	if err := rundir.EnsureBase(base); err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	path, err := admin.TokenFile(base, addr)
	if err != nil {
		return "", err
	}
	tok, err := admin.WriteToken(path)
	if err != nil {
		return "", err
	}
	d.tokenFile = path
	d.log.Info("admin api has no secret; serving on loopback with a token", "addr", addr, "token_file", path)
	return tok, nil
}

// serve starts a goroutine per listener; the group ends when all have stopped.
func (d *daemon) serve(ls *listeners) *sync.WaitGroup {
	var wg sync.WaitGroup
	run := func(name string, serve func(net.Listener) error, ln net.Listener) {
		if ln == nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := serve(ln); err != nil && !errors.Is(err, proxy.ErrShutdown) {
				d.fail(fmt.Errorf("%s listener: %w", name, err))
			}
		}()
	}
	run("forward", d.px.ServeForward, ls.fwd)
	run("transparent", d.px.ServeTransparent, ls.tr)
	if d.adm != nil {
		run("admin", d.adm.Serve, ls.adm)
		run("metrics", d.adm.ServeMetrics, ls.met)
	}
	d.log.Info("proxy serving", "forward", addrOf(ls.fwd), "transparent", addrOf(ls.tr), "admin", addrOf(ls.adm),
		"metrics", addrOf(ls.met), "clients", len(d.reg.List()), "replica", d.replica, "registry", d.registryKind())
	return &wg
}

// wait handles SIGHUP until SIGTERM, SIGINT or ctx ends.
func (d *daemon) wait(ctx context.Context) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	// Every listener is bound and SIGHUP handled: tell systemd (Type=notify).
	if _, err := sdnotify.SdNotify(false, sdnotify.SdNotifyReady); err != nil {
		d.log.Warn("systemd readiness notification", "err", err)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				d.reload()
				continue
			}
			d.log.Info("draining", "signal", sig.String(), "grace", d.cfg.Proxy.DrainGrace.Duration, "active", d.px.Active())
		case <-ctx.Done():
			d.log.Info("draining", "reason", ctx.Err(), "grace", d.cfg.Proxy.DrainGrace.Duration)
		}
		return
	}
}
