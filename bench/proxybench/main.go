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
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

type targetFlags []target

func (t *targetFlags) String() string { return fmt.Sprint(*t) }

// Set parses "direct" or "NAME=ADDR[,pid=N][,host=NAME][,baseline]".
func (t *targetFlags) Set(s string) error {
	if s == "direct" {
		*t = append(*t, target{Name: "direct"})
		return nil
	}
	name, rest, ok := strings.Cut(s, "=")
	if !ok || name == "" || name == "direct" {
		return fmt.Errorf("target %q: want direct or NAME=ADDR[,pid=N][,host=NAME][,baseline]", s)
	}
	parts := strings.Split(rest, ",")
	tg := target{Name: name, Proxy: parts[0], Host: "127.0.0.1"}
	for _, kv := range parts[1:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "baseline":
			tg.Baseline = true
		case "pid":
			pid, err := strconv.Atoi(v)
			if err != nil || pid <= 0 {
				return fmt.Errorf("target %q: pid %q is not a process id", s, v)
			}
			tg.PID = pid
		case "host":
			tg.Host = v
		default:
			return fmt.Errorf("target %q: unknown option %q (want pid=, host= or baseline)", s, k)
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
	flag.Var(&targets, "target", "direct, or NAME=PROXYADDR,pid=N[,host=CONNECTNAME][,baseline] (repeatable, order kept; baseline = an earlier build of the subject, not ranked against)")
	flag.Var(&notes, "note", "line added to the report header (repeatable)")
	subject := flag.String("subject", "crackbox", "target the issue's goals apply to")
	bytes := flag.Int64("bytes", 1<<30, "size of the throughput transfer")
	repeat := flag.Int("repeat", 3, "full runs of the throughput, rate and latency phases; the report shows medians")
	tputRounds := flag.Int("throughput-rounds", 1, "throughput transfers per target and run; the best counts")
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
		repeat: *repeat, bytes: *bytes, tputRounds: *tputRounds, tunnels: *tunnels, rateRounds: *rateRounds,
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
	repeat, tputRounds        int
	tunnels                   int
	rateRounds, conc          int
	seqN, idleN, idleGoal     int
	settle, opTimeout         time.Duration
	mdPath, jsonPath, command string
}
