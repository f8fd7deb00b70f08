package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/crackbox/crackbox/pkg/arizuko/api"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/secrets"
)

// The daemon holds lockFile exclusively and advertises its URL in daemonFile.
const (
	lockFile   = "arizuko.lock"
	daemonFile = "daemon.json"
)

type daemonInfo struct {
	URL string `json:"url"`
	PID int    `json:"pid"`
}

// lockData takes the data dir's exclusive lock without waiting; the returned
// file holds it until closed. errLocked means a daemon (or another CLI) has it.
func lockData(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, errLocked
		}
		return nil, err
	}
	return f, nil
}

var errLocked = errors.New("data dir is locked by a running arizuko")

func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("token: %w (pass --token or $ARIZUKO_TOKEN)", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// bearer is the token for the daemon: --token/$ARIZUKO_TOKEN, else the
// token file.
func (c *Config) bearer() (string, error) {
	if c.token != "" {
		return c.token, nil
	}
	return readToken(c.Server.TokenFile)
}

// findDaemon is the URL of the daemon to use: --server/$ARIZUKO_SERVER, else
// the one that holds the data dir's lock and advertises itself there. With
// no daemon it returns "" and the lock, which the caller then owns.
func (c *Config) findDaemon() (string, *os.File, error) {
	if c.remote != "" {
		return strings.TrimSuffix(c.remote, "/"), nil, nil
	}
	if _, err := os.Stat(c.DataDir); err != nil {
		return "", nil, fmt.Errorf("data dir %s: %w (run `arizuko init` or pass --data/--server)", c.DataDir, err)
	}
	lock, err := lockData(c.DataDir)
	if err == nil {
		return "", lock, nil
	}
	if !errors.Is(err, errLocked) {
		return "", nil, err
	}
	var info daemonInfo
	b, rerr := os.ReadFile(filepath.Join(c.DataDir, daemonFile))
	if rerr != nil || json.Unmarshal(b, &info) != nil || info.URL == "" {
		return "", nil, fmt.Errorf("%s: %w and advertises no URL; pass --server", c.DataDir, err)
	}
	slog.Debug("using running daemon", "url", info.URL)
	return strings.TrimSuffix(info.URL, "/"), nil, nil
}

// daemonEndpoint finds the running daemon and its token; errNoDaemon if none.
func (c *Config) daemonEndpoint() (string, string, error) {
	url, lock, err := c.findDaemon()
	if err != nil {
		return "", "", err
	}
	if lock != nil {
		lock.Close()
		return "", "", errNoDaemon
	}
	token, err := c.bearer()
	return url, token, err
}

// connect returns the service the command should use, with the principal in
// ctx, and a func releasing it: the daemon's API when one runs, else the data
// dir opened directly. One code path per operation: both sides implement
// service.Service.
func (a *app) connect(ctx context.Context) (service.Service, context.Context, func(), error) {
	cfg, err := a.loadConfig()
	if err != nil {
		return nil, ctx, nil, err
	}
	url, lock, err := cfg.findDaemon()
	if err != nil {
		return nil, ctx, nil, err
	}
	if lock == nil {
		token, err := cfg.bearer()
		if err != nil {
			return nil, ctx, nil, err
		}
		return api.NewClient(url, token), ctx, func() {}, nil
	}
	ring, kerr := cfg.Secrets.ring()
	if kerr != nil && !errors.Is(kerr, secrets.ErrNoKey) {
		lock.Close()
		return nil, ctx, nil, kerr
	}
	l, err := service.Open(ctx, service.Options{DataDir: cfg.DataDir, Ring: ring, EngagementTTL: cfg.Routing.EngagementTTL.Duration,
		MaxTurnsPerDay: cfg.Turns.MaxTurnsPerDay, Store: cfg.Store.URL, AllowCIDRs: cfg.Turns.proxy.AllowCIDRs, Limits: cfg.Limits, Log: slog.Default()})
	if err != nil {
		lock.Close()
		return nil, ctx, nil, err
	}
	// Whoever can open the data dir owns it; act as its admin principal.
	ctx = service.WithPrincipal(ctx, service.AdminPrincipal)
	return l, ctx, func() { l.Close(); lock.Close() }, nil
}

// withService runs fn against the connected service.
func (a *app) withService(ctx context.Context, fn func(ctx context.Context, s service.Service) error) error {
	s, ctx, release, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer release()
	return fn(ctx, s)
}
