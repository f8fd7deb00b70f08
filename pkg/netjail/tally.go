package netjail

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/crackbox/crackbox/pkg/allow"
	"github.com/crackbox/crackbox/pkg/dns"
	"github.com/crackbox/crackbox/pkg/proxy"
)

// Tally counts what a run's guest tried to reach: blocked proxy requests for
// the exit summary, and (in learn mode) every attempted host for a ready
// --allow list. Its methods are safe for concurrent use.
type Tally struct {
	defaultPorts []int

	mu        sync.Mutex
	blocked   map[string]int // allow entry form -> refused requests
	lookups   map[string]int // names refused by DNS that the proxy never saw
	attempted map[string]struct{}
}

// NewTally returns an empty tally; entries for ports outside defaultPorts
// (nil = allow.DefaultPorts) are written host:port.
func NewTally(defaultPorts []int) *Tally {
	if len(defaultPorts) == 0 {
		defaultPorts = allow.DefaultPorts
	}
	return &Tally{
		defaultPorts: slices.Clone(defaultPorts),
		blocked:      map[string]int{},
		lookups:      map[string]int{},
		attempted:    map[string]struct{}{},
	}
}

// entry renders host and port the way --allow takes them, or "" for hosts
// that cannot be allowlisted (missing or IP literals).
func (t *Tally) entry(host string, port int) string {
	h, err := allow.NormalizeHost(host)
	if err != nil {
		return ""
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return ""
	}
	if port == 0 || slices.Contains(t.defaultPorts, port) {
		return h
	}
	return h + ":" + strconv.Itoa(port)
}

// Decision records one proxy decision; use it as proxy.Options.OnDecision.
func (t *Tally) Decision(d proxy.Decision) {
	e := t.entry(d.Host, d.Port)
	t.mu.Lock()
	defer t.mu.Unlock()
	if e != "" {
		t.attempted[e] = struct{}{}
	}
	if d.Allowed {
		return
	}
	if e == "" {
		// No usable name: show what the guest dialed instead.
		switch {
		case d.Host != "":
			e = d.Host
		case d.IP != "":
			e = d.IP
		default:
			e = "(no host name)"
		}
		if d.Port != 0 && !strings.Contains(e, ":") {
			e += ":" + strconv.Itoa(d.Port)
		}
	}
	t.blocked[e]++
}

// Query records one DNS question; use it as dns.Config.OnQuery.
func (t *Tally) Query(q dns.Query) {
	if q.Name == "" || strings.HasSuffix(q.Name, ".arpa") || !strings.Contains(q.Name, ".") {
		return
	}
	e := t.entry(q.Name, 0)
	if e == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.attempted[e] = struct{}{}
	if !q.Allowed {
		t.lookups[e]++
	}
}

type count struct {
	name string
	n    int
}

func sorted(m map[string]int) []count {
	out := make([]count, 0, len(m))
	for k, v := range m {
		out = append(out, count{k, v})
	}
	slices.SortFunc(out, func(a, b count) int {
		if c := cmp.Compare(b.n, a.n); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Summary is the one stderr line printed at exit, e.g.
// "crackbox: blocked 3 requests: example.com (2), evil.test (1)", or "" when
// nothing was blocked. Names refused only at DNS (the client never reached
// the proxy) follow as a second clause.
func (t *Tally) Summary() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var clauses []string
	if len(t.blocked) > 0 {
		total := 0
		var parts []string
		for _, c := range sorted(t.blocked) {
			total += c.n
			parts = append(parts, fmt.Sprintf("%s (%d)", c.name, c.n))
		}
		clauses = append(clauses, fmt.Sprintf("blocked %d %s: %s", total, plural(total, "request", "requests"), strings.Join(parts, ", ")))
	}
	var names []string
	for _, c := range sorted(t.lookups) {
		host, _, _ := strings.Cut(c.name, ":")
		if t.blockedHost(host) {
			continue
		}
		names = append(names, c.name)
	}
	if len(names) > 0 {
		clauses = append(clauses, fmt.Sprintf("refused DNS for %d %s: %s", len(names), plural(len(names), "name", "names"), strings.Join(names, ", ")))
	}
	if len(clauses) == 0 {
		return ""
	}
	return "crackbox: " + strings.Join(clauses, "; ")
}

func (t *Tally) blockedHost(host string) bool {
	for e := range t.blocked {
		if h, _, _ := strings.Cut(e, ":"); h == host {
			return true
		}
	}
	return false
}

// Learned returns every host the guest tried to reach, as sorted --allow entries.
func (t *Tally) Learned() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.attempted))
	for e := range t.attempted {
		out = append(out, e)
	}
	slices.Sort(out)
	return out
}

// LearnReport is what --learn prints at exit: the attempted hosts as one
// ready-to-paste flag, or a note that nothing was attempted.
func (t *Tally) LearnReport() string {
	l := t.Learned()
	if len(l) == 0 {
		return "crackbox: learn: the command tried to reach no host"
	}
	return fmt.Sprintf("crackbox: learn: the command tried to reach %d %s; to allow %s:\n  --allow %s",
		len(l), plural(len(l), "host", "hosts"), plural(len(l), "it", "them"), strings.Join(l, ","))
}
