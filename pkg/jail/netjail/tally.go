package netjail

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/crackbox/crackbox/pkg/proxy"
	"github.com/crackbox/crackbox/pkg/proxy/allow"
	"github.com/crackbox/crackbox/pkg/proxy/dns"
	"github.com/crackbox/crackbox/pkg/proxy/inject"
)

// A guest chooses the names it tries, so a tally keeps at most maxNames
// distinct names per kind and counts the rest; the exit summary names the
// summaryTop most frequent and says how many more there were.
const (
	maxNames   = 1000
	summaryTop = 10
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
	exfil     map[string]int         // secret name -> placeholders refused out of place
	refused   map[string]refusedAddr // allowed name -> the address the guard refused
	// Requests, lookups and attempts of names that arrived after their map
	// was full: counted, not kept.
	blockedOver, lookupsOver, attemptedOver int
}

// bump counts one more for name, unless m is full and name is new.
func bump(m map[string]int, name string, over *int) {
	if _, ok := m[name]; ok || len(m) < maxNames {
		m[name]++
		return
	}
	*over++
}

func (t *Tally) attempt(e string) {
	if _, ok := t.attempted[e]; ok || len(t.attempted) < maxNames {
		t.attempted[e] = struct{}{}
		return
	}
	t.attemptedOver++
}

// NewTally returns an empty tally; entries for ports outside defaultPorts
// (nil = allow.DefaultPorts) are written host:port.
func NewTally(defaultPorts []int) *Tally {
	return &Tally{
		defaultPorts: allow.EffectivePorts(defaultPorts),
		blocked:      map[string]int{},
		lookups:      map[string]int{},
		attempted:    map[string]struct{}{},
		exfil:        map[string]int{},
		refused:      map[string]refusedAddr{},
	}
}

// entry renders host and port the way --allow takes them (an IP literal as
// an address entry), or "" for a missing or invalid host.
func (t *Tally) entry(host string, port int) string {
	h, err := allow.NormalizeHost(host)
	if err != nil {
		return ""
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if port == 0 || slices.Contains(t.defaultPorts, port) {
			return a.String()
		}
		return netip.AddrPortFrom(a, uint16(port)).String()
	}
	if port == 0 || slices.Contains(t.defaultPorts, port) {
		return h
	}
	return h + ":" + strconv.Itoa(port)
}

// Decision records one proxy decision; use it as proxy.Options.OnDecision.
func (t *Tally) Decision(d proxy.Decision) {
	if d.Reason == proxy.ReasonSecretExfiltration && d.Secret != "" {
		// Counted under the secret's name only: the host may be made of
		// the placeholder, and is no host to allow.
		t.mu.Lock()
		t.exfil[d.Secret]++
		t.mu.Unlock()
		return
	}
	e := t.entry(d.Host, d.Port)
	t.mu.Lock()
	defer t.mu.Unlock()
	if e != "" {
		t.attempt(e)
	}
	if d.Allowed {
		return
	}
	if r, ok := refusedOf(d); ok {
		if h, err := allow.NormalizeHost(d.Host); err == nil {
			t.noteRefused(h, r)
		}
	}
	if e == "" {
		// No usable name: show what the guest dialed instead.
		switch {
		case d.Host != "":
			e = badName(d.Host)
		case d.IP != "":
			e = d.IP
		default:
			e = "(no host name)"
		}
		if d.Port != 0 && !strings.Contains(e, ":") {
			e += ":" + strconv.Itoa(d.Port)
		}
	}
	bump(t.blocked, e, &t.blockedOver)
}

// maxBadName bounds how much of an unusable name the summary quotes.
const maxBadName = 64

// badName shows a name the guest sent that is no host name. The summary is printed
// under crackbox's name on the operator's terminal, so the name is quoted in ASCII:
// a bidi override or a C1 control in it can neither reorder nor drive the terminal.
func badName(h string) string {
	if len(h) > maxBadName {
		return strconv.QuoteToASCII(strings.ToValidUTF8(h[:maxBadName], "")) + "…"
	}
	return strconv.QuoteToASCII(h)
}

// Query records one DNS question; use it as dns.Config.OnQuery.
func (t *Tally) Query(q dns.Query) {
	if q.Name == "" || strings.HasSuffix(q.Name, ".arpa") || !strings.Contains(q.Name, ".") || inject.Mentions(q.Name) {
		return
	}
	e := t.entry(q.Name, 0)
	if e == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.attempt(e)
	if !q.Allowed {
		bump(t.lookups, e, &t.lookupsOver)
	}
	var ae *proxy.AddrError
	if q.Allowed && errors.As(q.Err, &ae) {
		t.noteRefused(q.Name, refusedAddr{ae.Addr, ae.Class})
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
// the proxy) follow as a second clause. Each clause names the summaryTop
// most frequent names and ends in "and N more" when there were others.
func (t *Tally) Summary() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var clauses []string
	if len(t.exfil) > 0 {
		total := 0
		var parts []string
		for _, c := range sorted(t.exfil) {
			total += c.n
			parts = append(parts, fmt.Sprintf("%s (%d)", c.name, c.n))
		}
		clauses = append(clauses, fmt.Sprintf("refused %d %s to send a secret's placeholder where it is not bound: %s",
			total, plural(total, "attempt", "attempts"), strings.Join(parts, ", ")))
	}
	if len(t.blocked) > 0 {
		total := t.blockedOver
		var parts []string
		for i, c := range sorted(t.blocked) {
			total += c.n
			if i < summaryTop {
				parts = append(parts, fmt.Sprintf("%s (%d)", c.name, c.n))
			}
		}
		parts = appendMore(parts, len(t.blocked)-len(parts), t.blockedOver)
		clauses = append(clauses, fmt.Sprintf("blocked %d %s: %s", total, plural(total, "request", "requests"), strings.Join(parts, ", ")))
	}
	if c := t.refusedClause(); c != "" {
		clauses = append(clauses, c)
	}
	var names []string
	for _, c := range sorted(t.lookups) {
		host, _, _ := strings.Cut(c.name, ":")
		if t.blockedHost(host) {
			continue
		}
		names = append(names, c.name)
	}
	if n := len(names); n > 0 {
		shown := names[:min(n, summaryTop)]
		shown = appendMore(shown, n-len(shown), t.lookupsOver)
		count := fmt.Sprintf("%d %s", n, plural(n, "name", "names"))
		if t.lookupsOver > 0 {
			count = fmt.Sprintf("more than %d names", n)
		}
		clauses = append(clauses, fmt.Sprintf("refused DNS for %s: %s", count, strings.Join(shown, ", ")))
	}
	if len(clauses) == 0 {
		return ""
	}
	return "crackbox: " + strings.Join(clauses, "; ")
}

// appendMore ends a shown list with how many names it left out; over > 0
// means some were not even kept, so the count is a lower bound.
func appendMore(parts []string, hidden, over int) []string {
	switch {
	case over > 0:
		return append(parts, fmt.Sprintf("and more than %d more", hidden))
	case hidden > 0:
		return append(parts, fmt.Sprintf("and %d more", hidden))
	}
	return parts
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
// ready-to-paste flag, with the --allow-cidr entries (cidrs) the names need when the
// proxy would refuse their addresses, or a note that nothing was attempted.
func (t *Tally) LearnReport(cidrs []string) string {
	l := t.Learned()
	if len(l) == 0 {
		return "crackbox: learn: the command tried to reach no host"
	}
	t.mu.Lock()
	over := t.attemptedOver
	t.mu.Unlock()
	flags := "--allow " + strings.Join(l, ",")
	if len(cidrs) > 0 {
		flags += " --allow-cidr " + strings.Join(cidrs, ",")
	}
	if over > 0 {
		return fmt.Sprintf("crackbox: learn: the command tried to reach more than %d hosts; these are the first %d:\n  %s",
			len(l), len(l), flags)
	}
	head := fmt.Sprintf("crackbox: learn: the command tried to reach %d %s; to allow %s:",
		len(l), plural(len(l), "host", "hosts"), plural(len(l), "it", "them"))
	if len(cidrs) > 0 {
		head = fmt.Sprintf("crackbox: learn: the command tried to reach %d %s; to allow %s (--allow-cidr for the %s the proxy refuses by default):",
			len(l), plural(len(l), "host", "hosts"), plural(len(l), "it", "them"), plural(len(cidrs), "address", "addresses"))
	}
	return head + "\n  " + flags
}
