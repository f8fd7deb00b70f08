package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/crackbox/crackbox/internal/envvar"
	"github.com/crackbox/crackbox/internal/hostfile"
	"github.com/crackbox/crackbox/internal/logfile"
	"github.com/crackbox/crackbox/pkg/config"
	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/jail/netjail"
	"github.com/crackbox/crackbox/pkg/jail/runrec"
	"github.com/crackbox/crackbox/pkg/proxy/allow"
)

// netFlags are the egress flags of crackbox run.
type netFlags struct {
	allow, allowFiles, allowCIDRs []string
	logFile                       string
	learn, quiet                  bool
}

// errNoAllow is returned when a networked run names no allowlist.
var errNoAllow = errors.New("--allow is required: name the hosts the command may reach (--allow github.com,pypi.org), " +
	"--allow none.invalid to block everything, --learn to find out what it needs, or --net none for no network")

// allowEntries gathers --allow (comma-separated, repeatable) and --allow-file entries.
func allowEntries(nf netFlags) ([]string, error) {
	var out []string
	add := func(s string) {
		for _, e := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
			out = append(out, e)
		}
	}
	for _, a := range nf.allow {
		add(a)
	}
	for _, path := range nf.allowFiles {
		f, err := hostfile.Open(path)
		if err != nil {
			return nil, fmt.Errorf("--allow-file: %w", err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line, _, _ := strings.Cut(sc.Text(), "#")
			add(line)
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("--allow-file %s: %w", path, err)
		}
	}
	return out, nil
}

// allowList parses the run's allowlist. A networked run without entries is refused
// unless it learns: egress fails closed, but a missing flag is a mistake worth naming.
func allowList(nf netFlags, mode string, defaultPorts []int) (*allow.List, error) {
	entries, err := allowEntries(nf)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 && !nf.learn && mode != jail.NetNone {
		return nil, errNoAllow
	}
	if nf.learn && len(entries) > 0 {
		return nil, errors.New("--learn allows nothing and records what the command tries; drop --allow or --learn")
	}
	list, err := allow.ParseWithPorts(entries, defaultPorts)
	if err != nil {
		return nil, fmt.Errorf("--allow: %w", err)
	}
	return list, nil
}

// decisionSink is the run record's decision log plus --log FILE ("-" is stderr),
// which rotates to FILE.1 at the run record's cap: a guest's refused requests
// are its to multiply.
func decisionSink(rec *runrec.Record, path string) (io.Writer, func(), error) {
	if path == "" {
		return rec.DecisionLog(), func() {}, nil
	}
	if path == "-" {
		return io.MultiWriter(rec.DecisionLog(), os.Stderr), func() {}, nil
	}
	f, err := logfile.Open(path, runrec.DecisionsMax, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("--log: %w", err)
	}
	return io.MultiWriter(rec.DecisionLog(), f), func() { f.Close() }, nil
}

// runStore is where run records live: $CRACKBOX_RUNS_DIR, else runrec.DefaultDir().
func runStore() *runrec.Store {
	dir := os.Getenv(envvar.RunsDir)
	if dir == "" {
		dir = runrec.DefaultDir()
	}
	return &runrec.Store{Dir: dir}
}

// runNetOptions builds the run's network from flags and config: the
// allowlist, the proxy settings, the address pool and the --secret set.
// env is the guest environment a secret may not also be set in.
func runNetOptions(cfg *config.Config, rf runFlags, env []string) (netjail.Options, error) {
	o := netjail.Options{Mode: cfg.Run.Net, UID: -1, GID: -1, Learn: rf.net.learn}
	var err error
	if o.Allow, err = allowList(rf.net, cfg.Run.Net, cfg.Proxy.DefaultPorts); err != nil {
		return o, err
	}
	if o.Proxy, err = cfg.Proxy.RunOptions(rf.net.allowCIDRs); err != nil {
		return o, err
	}
	secrets, err := runSecrets(cfg, rf.secrets, os.LookupEnv)
	if err != nil {
		return o, err
	}
	if o.Secrets, err = secretSet(secrets, env, cfg.Run.Net); err != nil {
		return o, err
	}
	if o.Pool, err = cfg.Run.AddrPoolPrefix(); err != nil {
		return o, err
	}
	return o, nil
}
