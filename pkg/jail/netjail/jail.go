package netjail

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/crackbox/crackbox/pkg/jail"
)

// ErrSecretEnv is returned by Jail when a secret's name is also set in the
// guest's environment: the guest would hold a value beside its placeholder.
var ErrSecretEnv = errors.New("a secret is also an environment variable")

// ErrSecretNoNet is returned by Jail for secrets on a run without network:
// the proxy that injects them would not exist.
var ErrSecretNoNet = errors.New("secrets need a network")

// Job is one command in a guest behind a network of its own: what crackbox
// run and arizuko's turns both do.
type Job struct {
	// Net is the run's network. The placeholders of Net.Secrets join
	// Spec.Env; their values stay with the proxy.
	Net Options
	// Spec is the guest; Jail sets Spec.Net.
	Spec jail.Spec
	// Ready runs once the network is up, right before the guest boots; an
	// error ends the run unbooted. A terminal goes raw here, so setup logs
	// and a Ctrl-C during setup still meet a cooked one.
	Ready func() error
}

// Outcome is how a Job ended.
type Outcome struct {
	jail.Result
	// Mode is the network mode the run had; Job.Net.Mode when the network
	// never came up.
	Mode string
	// Net is the run's network, closed, for Report, Blocked and Learned;
	// nil when it never came up (those methods take a nil Run).
	Net *Run
}

// Jail runs j: it removes what dead runs left behind, builds the network,
// boots the guest through jail.Run, and tears the network down before it
// returns, so the tally in Outcome.Net is final. A failed network setup is
// returned as "network: …" with Result.Exit set to jail.ExitFailed.
func Jail(ctx context.Context, j Job) (Outcome, error) {
	out := Outcome{Result: jail.Result{Exit: jail.ExitFailed}, Mode: j.Net.Mode}
	log := j.Net.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := checkSecrets(j.Net, j.Spec.Env); err != nil {
		return out, err
	}
	Sweep(j.Net.RunsDir, log)
	nr, err := Prepare(ctx, j.Net)
	if err != nil {
		return out, fmt.Errorf("network: %w", err)
	}
	defer nr.Close()
	out.Mode, out.Net = nr.Mode, nr
	spec := j.Spec
	spec.Net = nr.Net
	spec.Env = append(slices.Clip(spec.Env), j.Net.Secrets.Env()...)
	if j.Ready != nil {
		if err := j.Ready(); err != nil {
			return out, err
		}
	}
	out.Result, err = jail.Run(ctx, spec)
	// Stop the proxy before the caller reads the tally, so no decision is
	// still in flight.
	if cerr := nr.Close(); cerr != nil {
		log.Warn("network cleanup", "err", cerr)
	}
	return out, err
}

// Sweep removes the network leftovers of runs killed with SIGKILL (see GC)
// when this process may manage taps; it is the one place runs clean up after
// dead ones, whatever their own mode. runsDir "" is DefaultRunsDir().
func Sweep(runsDir string, log *slog.Logger) {
	if Available() != nil {
		return
	}
	if runsDir == "" {
		runsDir = DefaultRunsDir()
	}
	if removed, err := GC(runsDir); err != nil {
		log.Warn("gc of dead runs", "err", err)
	} else if len(removed) > 0 {
		log.Info("removed leftovers of dead runs", "objects", removed)
	}
}

// checkSecrets refuses secrets the run could not keep out of the guest.
func checkSecrets(o Options, env []string) error {
	if o.Secrets.Empty() {
		return nil
	}
	if o.Mode == jail.NetNone {
		return ErrSecretNoNet
	}
	for _, name := range o.Secrets.Names() {
		for _, kv := range env {
			if k, _, _ := strings.Cut(kv, "="); k == name {
				return fmt.Errorf("%s: %w", name, ErrSecretEnv)
			}
		}
	}
	return nil
}
