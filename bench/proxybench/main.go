// Command proxybench measures CONNECT proxies side by side against a direct
// connection, all on loopback: throughput of one large transfer, new
// tunnels per second under concurrency, per-tunnel latency, and the proxy's
// RSS with many idle tunnels. It runs its own upstream server; the proxies
// are started by the caller (scripts/bench.sh) and named with -target.
//
//	proxybench -upstream 127.0.0.1:18080 -target direct \
//	  -target crackbox=127.0.0.1:18128,pid=123,host=bench.upstream.test
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"
)

type targetFlags []target

func (t *targetFlags) String() string { return fmt.Sprint(*t) }

// Set parses "direct" or "NAME=ADDR[,pid=N][,host=NAME]".
func (t *targetFlags) Set(s string) error {
	if s == "direct" {
		*t = append(*t, target{Name: "direct"})
		return nil
	}
	name, rest, ok := strings.Cut(s, "=")
	if !ok || name == "" || name == "direct" {
		return fmt.Errorf("target %q: want direct or NAME=ADDR[,pid=N][,host=NAME]", s)
	}
	parts := strings.Split(rest, ",")
	tg := target{Name: name, Proxy: parts[0], Host: "127.0.0.1"}
	for _, kv := range parts[1:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "pid":
			pid, err := strconv.Atoi(v)
			if err != nil || pid <= 0 {
				return fmt.Errorf("target %q: pid %q is not a process id", s, v)
			}
			tg.PID = pid
		case "host":
			tg.Host = v
		default:
			return fmt.Errorf("target %q: unknown option %q (want pid= or host=)", s, k)
		}
	}
	if tg.PID == 0 {
		return fmt.Errorf("target %q: a proxy target needs pid=N for RSS and CPU", s)
	}
	*t = append(*t, tg)
	return nil
}

type noteFlags []string

func (n *noteFlags) String() string     { return strings.Join(*n, "; ") }
func (n *noteFlags) Set(s string) error { *n = append(*n, s); return nil }

func main() {
	var (
		targets targetFlags
		notes   noteFlags
	)
	upstreamAddr := flag.String("upstream", "127.0.0.1:18080", "address the built-in upstream listens on (loopback)")
	flag.Var(&targets, "target", "direct, or NAME=PROXYADDR,pid=N[,host=CONNECTNAME] (repeatable, order kept)")
	flag.Var(&notes, "note", "line added to the report header (repeatable)")
	subject := flag.String("subject", "crackbox", "target the issue's goals apply to")
	bytes := flag.Int64("bytes", 1<<30, "size of the throughput transfer")
	tputRounds := flag.Int("throughput-rounds", 1, "throughput transfers per target; the best counts")
	tunnels := flag.Int("tunnels", 5000, "short tunnels per target in the rate phase")
	rateRounds := flag.Int("rate-rounds", 5, "slices the rate phase is cut into, rotating targets")
	conc := flag.Int("concurrency", 64, "concurrent clients in the rate and idle phases")
	seqN := flag.Int("latency-tunnels", 1000, "tunnels per target for one-at-a-time latency")
	idleN := flag.Int("idle", 10000, "idle tunnels held open per proxy for RSS")
	idleGoal := flag.Int("idle-goal", 0, "tunnel count the RSS goal is stated for; RSS is extrapolated to it (default -idle)")
	settle := flag.Duration("settle", 2*time.Second, "wait after opening idle tunnels before reading RSS")
	opTimeout := flag.Duration("timeout", 10*time.Second, "deadline for one tunnel (ten times this for the transfer)")
	mdPath := flag.String("md", "", "write the markdown report here too")
	jsonPath := flag.String("json", "", "write the raw results as JSON here")
	command := flag.String("command", "make bench", "command line recorded in the report")
	flag.Parse()

	if err := run(opts{
		upstream: *upstreamAddr, targets: targets, notes: notes, subject: *subject,
		bytes: *bytes, tputRounds: *tputRounds, tunnels: *tunnels, rateRounds: *rateRounds,
		conc: *conc, seqN: *seqN, idleN: *idleN, idleGoal: *idleGoal, settle: *settle, opTimeout: *opTimeout,
		mdPath: *mdPath, jsonPath: *jsonPath, command: *command,
	}); err != nil {
		fmt.Fprintln(os.Stderr, "proxybench:", err)
		os.Exit(1)
	}
}

type opts struct {
	upstream                  string
	targets                   []target
	notes                     []string
	subject                   string
	bytes                     int64
	tputRounds, tunnels       int
	rateRounds, conc          int
	seqN, idleN, idleGoal     int
	settle, opTimeout         time.Duration
	mdPath, jsonPath, command string
}

func run(o opts) error {
	if o.idleGoal <= 0 {
		o.idleGoal = o.idleN
	}
	if len(o.targets) == 0 {
		return errors.New("no -target given: pass at least -target direct")
	}
	if o.bytes <= 0 || o.tunnels <= 0 || o.conc <= 0 || o.rateRounds <= 0 || o.tputRounds <= 0 {
		return errors.New("-bytes, -tunnels, -concurrency, -rate-rounds and -throughput-rounds must be positive")
	}
	up, err := startUpstream(o.upstream)
	if err != nil {
		return fmt.Errorf("upstream: %w", err)
	}
	defer up.close()
	b := &bench{upstream: o.upstream, up: up, opTimeout: o.opTimeout, concurrency: o.conc}
	rs := make([]*result, len(o.targets))
	for i, t := range o.targets {
		rs[i] = &result{Target: t}
	}
	start := time.Now()
	step := func(name string) { slog.Info("phase", "name", name, "elapsed", time.Since(start).Round(time.Second)) }

	step("warm-up")
	for _, r := range rs {
		b.checkDeny(r, "not-allowed.test")
		b.warm(r, 100)
	}
	step("throughput")
	for round := 0; round < o.tputRounds; round++ {
		for _, r := range rs {
			b.throughput(r, o.bytes)
			slog.Info("throughput", "target", r.Target.Name, "mib_s", fmt.Sprintf("%.0f", r.ThroughputMiBs))
		}
	}
	step("tunnel rate")
	accs := make([]rateAcc, len(rs))
	for round := 0; round < o.rateRounds; round++ {
		n := o.tunnels / o.rateRounds
		if round == o.rateRounds-1 {
			n = o.tunnels - n*(o.rateRounds-1)
		}
		for i, r := range rs {
			b.rate(r, n, &accs[i])
		}
	}
	for i, r := range rs {
		r.setRate(&accs[i])
		slog.Info("tunnel rate", "target", r.Target.Name, "per_s", fmt.Sprintf("%.0f", r.RatePerSec), "errors", r.RateErrors)
	}
	if o.seqN > 0 {
		step("latency")
		b.sequential(rs, o.seqN)
	}
	if o.idleN > 0 {
		step("idle tunnels")
		for _, r := range rs {
			if r.Target.direct() {
				continue
			}
			b.idle(r, o.idleN, o.settle)
			slog.Info("idle", "target", r.Target.Name, "opened", r.IdleOpened, "rss_mib", fmt.Sprintf("%.1f", r.RSSIdleMiB))
			time.Sleep(time.Second) // let the proxy finish closing before the next one starts
		}
	}

	info := runInfo{
		Date: start.UTC().Format("2006-01-02 15:04 UTC"), Machine: machine(),
		Command: o.command, Notes: o.notes, Subject: o.subject,
		Bytes: o.bytes, Tunnels: o.tunnels, Conc: o.conc, SeqN: o.seqN, Idle: o.idleN, IdleGoal: o.idleGoal,
		Duration: time.Since(start).Round(time.Second).String(),
	}
	vs := verdicts(rs, o.subject, o.idleGoal)
	writeMarkdown(os.Stdout, info, rs, vs)
	if o.mdPath != "" {
		f, err := os.Create(o.mdPath)
		if err != nil {
			return err
		}
		writeMarkdown(f, info, rs, vs)
		if err := f.Close(); err != nil {
			return err
		}
	}
	if o.jsonPath != "" {
		out, _ := json.MarshalIndent(struct {
			Info     runInfo   `json:"info"`
			Results  []*result `json:"results"`
			Verdicts []verdict `json:"verdicts"`
		}{info, rs, vs}, "", "  ")
		if err := os.WriteFile(o.jsonPath, append(out, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}
