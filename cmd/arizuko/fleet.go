package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/crackbox/crackbox/internal/natsauth"
	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/dispatch"
	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/gated"
	"github.com/crackbox/crackbox/pkg/arizuko/schedule"
	"github.com/crackbox/crackbox/pkg/config"
)

// FleetConfig is the [fleet] section of arizuko.toml: turns run on runners
// pulling from NATS JetStream instead of on this host.
type FleetConfig struct {
	// NATS is the cluster's URL list (nats://a:4222,nats://b:4222); "" runs
	// turns on this host. --nats wins.
	NATS string `toml:"nats"`
	// Creds is a NATS JWT credentials file (.creds) of this process.
	Creds string `toml:"creds"`
	// NKey is a NATS nkey seed file of this process, instead of Creds.
	NKey string `toml:"nkey"`
	// CA is a PEM file of the CAs of the NATS servers' TLS; "" = system roots.
	CA string `toml:"ca"`
	// insecure is --insecure-nats: no credentials or TLS required.
	insecure bool
	// LeaseTTL is how long a folder's lease outlives its runner (default 15s).
	LeaseTTL config.Duration `toml:"lease_ttl"`
	// Replicas of the stream and buckets (default 3).
	Replicas int `toml:"replicas"`
	// Require maps a folder to the runner labels its turns need, e.g.
	// "acme" = ["kvm=true"]; a folder needs its own and its parents' labels.
	Require map[string][]string `toml:"require"`
	// Home bounds folder homes and their history, kept in the fleet's store.
	Home HomeConfig `toml:"home"`
}

func (fc FleetConfig) validate() error {
	if fc.LeaseTTL.Duration < 0 || (fc.LeaseTTL.Duration > 0 && fc.LeaseTTL.Duration.Seconds() < 1) {
		return fmt.Errorf("fleet.lease_ttl %s: want at least 1s", fc.LeaseTTL.Duration)
	}
	if fc.Replicas < 0 || fc.Replicas > 5 {
		return fmt.Errorf("fleet.replicas %d: want 1 to 5 (default 3)", fc.Replicas)
	}
	if err := fc.Home.validate(); err != nil {
		return err
	}
	for f, ls := range fc.Require {
		if err := folder.Validate(f); err != nil {
			return fmt.Errorf("fleet.require: %w", err)
		}
		if _, err := dispatch.ParseLabels(ls); err != nil {
			return fmt.Errorf("fleet.require %q: %w", f, err)
		}
	}
	return nil
}

// auth is the NATS identity of this process; it refuses none unless
// --insecure-nats, and says so loudly when it is.
func (fc FleetConfig) auth(who string) (natsauth.Auth, error) {
	a := natsauth.Auth{URL: fc.NATS, Creds: fc.Creds, NKey: fc.NKey, CA: fc.CA, Insecure: fc.insecure}
	if err := a.Check("fleet.nkey or fleet.creds (--nats-nkey, --nats-creds)"); err != nil {
		return a, fmt.Errorf("%s: %w", who, err)
	}
	if a.Insecure {
		slog.Warn("fleet nats without required credentials or tls", "flag", natsauth.Flag)
	}
	return a, nil
}

// require is the labels a folder's runner must have.
func (fc FleetConfig) require(f string) []string {
	var out []string
	segs := strings.Split(f, "/")
	for i := range segs {
		for _, l := range fc.Require[strings.Join(segs[:i+1], "/")] {
			if !slices.Contains(out, l) {
				out = append(out, l)
			}
		}
	}
	return out
}

// startFleet connects to NATS, makes the fleet's streams and returns the
// dispatcher that replaces the host's turn runner, and the claims that let
// one control plane of the fleet fire each schedule's due time.
func startFleet(ctx context.Context, fc FleetConfig, g *gated.Server, gate *acl.Gate, reg prometheus.Registerer) (*dispatch.Dispatcher, schedule.Claimer, func(), error) {
	d, js, stop, err := startDispatch(ctx, fc, g, gate, reg)
	if err != nil {
		return nil, nil, nil, err
	}
	replicas := fc.Replicas
	if replicas == 0 {
		replicas = dispatch.DefaultReplicas
	}
	host, _ := os.Hostname()
	name := fmt.Sprintf("%s:%d", host, os.Getpid())
	c, err := schedule.OpenClaimer(ctx, js, replicas, name)
	if err != nil && replicas > 1 {
		slog.Warn("schedule claims with one replica: the nats cluster refused more", "replicas", replicas, "err", err)
		c, err = schedule.OpenClaimer(ctx, js, 1, name)
	}
	if err != nil {
		stop()
		return nil, nil, nil, fmt.Errorf("fleet: %w", err)
	}
	return d, c, stop, nil
}

func startDispatch(ctx context.Context, fc FleetConfig, g *gated.Server, gate *acl.Gate, reg prometheus.Registerer) (*dispatch.Dispatcher, jetstream.JetStream, func(), error) {
	if err := fc.validate(); err != nil {
		return nil, nil, nil, err
	}
	auth, err := fc.auth("arizuko serve")
	if err != nil {
		return nil, nil, nil, err
	}
	nc, err := dispatch.Connect(auth, "arizuko-serve")
	if err != nil {
		return nil, nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, nil, err
	}
	s, err := dispatch.Ensure(ctx, js, fc.LeaseTTL.Duration, fc.Replicas, slog.Default())
	if err != nil {
		nc.Close()
		return nil, nil, nil, fmt.Errorf("fleet: %w", err)
	}
	s.Homes.Retention = fc.Home.retention()
	go collectHomes(ctx, s.Homes)
	d := dispatch.NewDispatcher(dispatch.Options{JS: js, Setup: s, Gated: g, Gate: gate, Require: fc.require, LeaseTTL: fc.LeaseTTL.Duration,
		HomeLimits: fc.Home.limits, KeepFailed: fc.Home.keepFailed, Metrics: reg, Log: slog.Default()})
	slog.Info("turns dispatched to the fleet", "nats", nc.ConnectedUrlRedacted())
	return d, js, nc.Close, nil
}
