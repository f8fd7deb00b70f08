// Package router decides which folder (and topic) an inbound message reaches:
// direct address, then the route table where a live engagement overrides the
// match within the route's tenant (its top-level folder) only, then the
// engagement as fallback, else unrouted. Resolution is a pure function of its
// inputs.
package router

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/crackbox/crackbox/pkg/arizuko/folder"
)

// DefaultEngagementTTL is how long an answered chat stays bound to its folder.
const DefaultEngagementTTL = 30 * time.Minute

// DirectPrefix addresses a folder directly: chat_jid "web:corp/eng[#topic]".
const DirectPrefix = "web:"

// Route is one row of the route table.
type Route struct {
	ID     int64  `json:"id"`
	Seq    int    `json:"seq"`
	Match  string `json:"match"`
	Target string `json:"target"`
	// Owner is the principal that added the route; "" for the operator's
	// routes of before owners were kept.
	Owner string `json:"owner,omitempty"`
}

// Validate parses the match and target.
func (r Route) Validate() error {
	if _, err := ParseMatch(r.Match); err != nil {
		return err
	}
	_, err := ParseTarget(r.Target)
	return err
}

// Msg is what the resolver looks at in an inbound message.
type Msg struct {
	Platform, Room, ChatJID, Sender, Verb string
}

// Engagement records that a folder last answered the chat at At.
type Engagement struct {
	Folder, Topic string
	At            time.Time
}

// How names the rule that produced a result.
type How string

const (
	Direct   How = "direct"
	ByRoute  How = "route"
	Engaged  How = "engagement"
	Fallback How = "engagement-fallback"
	Unrouted How = "unrouted"
)

// Result is where a message goes and why.
type Result struct {
	Folder  string `json:"folder,omitempty"`
	Topic   string `json:"topic,omitempty"`
	Observe bool   `json:"observe,omitempty"` // store only, no turn
	// PerSender is set when the folder came from a {sender} target, so the
	// caller may create that per-user folder on first contact.
	PerSender bool   `json:"per_sender,omitempty"`
	How       How    `json:"how"`
	RouteID   int64  `json:"route_id,omitempty"`
	Reason    string `json:"reason"`
}

// Routed reports whether the message reaches a folder.
func (r Result) Routed() bool { return r.How != Unrouted }

type compiled struct {
	Route
	match  Match
	target Target
}

// Table is a compiled, ordered route table.
type Table struct{ routes []compiled }

// NewTable validates routes and orders them by seq, then id.
func NewTable(routes []Route) (*Table, error) {
	t := &Table{routes: make([]compiled, 0, len(routes))}
	for _, r := range routes {
		m, err := ParseMatch(r.Match)
		if err != nil {
			return nil, fmt.Errorf("route %d: %w", r.ID, err)
		}
		tg, err := ParseTarget(r.Target)
		if err != nil {
			return nil, fmt.Errorf("route %d: %w", r.ID, err)
		}
		t.routes = append(t.routes, compiled{r, m, tg})
	}
	sort.SliceStable(t.routes, func(i, j int) bool {
		a, b := t.routes[i], t.routes[j]
		if a.Seq != b.Seq {
			return a.Seq < b.Seq
		}
		return a.ID < b.ID
	})
	return t, nil
}

// Resolve decides where msg goes. eng may be nil; ttl <= 0 uses the default.
func (t *Table) Resolve(msg Msg, eng *Engagement, now time.Time, ttl time.Duration) Result {
	if ttl <= 0 {
		ttl = DefaultEngagementTTL
	}
	if rest, ok := strings.CutPrefix(msg.ChatJID, DirectPrefix); ok {
		return direct(rest)
	}
	live := eng != nil && eng.Folder != "" && now.Sub(eng.At) <= ttl
	for _, r := range t.routes {
		if !r.match.Holds(msg) {
			continue
		}
		if r.target.Topic == ObserveTopic {
			f, err := r.target.Expand(msg.Platform, msg.Sender)
			if err != nil {
				return Result{How: Unrouted, RouteID: r.ID, Reason: fmt.Sprintf("route %d target: %v", r.ID, err)}
			}
			return Result{Folder: f, Observe: true, PerSender: r.target.perSender(), How: ByRoute, RouteID: r.ID, Reason: fmt.Sprintf("route %d (seq %d) observes into %s", r.ID, r.Seq, f)}
		}
		f, err := r.target.Expand(msg.Platform, msg.Sender)
		if err != nil {
			return Result{How: Unrouted, RouteID: r.ID, Reason: fmt.Sprintf("route %d target: %v", r.ID, err)}
		}
		reason := fmt.Sprintf("route %d (seq %d) match %q", r.ID, r.Seq, r.Match)
		if live {
			// An engagement steers a chat between folders of one tenant; it
			// never carries a chat the operator routed to one tenant into another.
			if Tenant(eng.Folder) == Tenant(f) {
				return Result{Folder: eng.Folder, Topic: eng.Topic, How: Engaged, RouteID: r.ID,
					Reason: fmt.Sprintf("live engagement with %s (answered %s ago) overrides route %d", eng.Folder, now.Sub(eng.At).Round(time.Second), r.ID)}
			}
			reason += fmt.Sprintf("; engagement with %s ignored: another tenant than %s", eng.Folder, Tenant(f))
		}
		return Result{Folder: f, Topic: r.target.Topic, PerSender: r.target.perSender(), How: ByRoute, RouteID: r.ID, Reason: reason}
	}
	if eng != nil && eng.Folder != "" {
		why := "live"
		if !live {
			why = "expired"
		}
		return Result{Folder: eng.Folder, Topic: eng.Topic, How: Fallback,
			Reason: fmt.Sprintf("no route matched; last engagement with %s (%s)", eng.Folder, why)}
	}
	return Result{How: Unrouted, Reason: "no route matched and the chat has no engagement"}
}

// Tenant is the top-level folder a folder belongs to.
func Tenant(f string) string {
	t, _, _ := strings.Cut(f, "/")
	return t
}

func direct(addr string) Result {
	f, topic, hasTopic := strings.Cut(addr, "#")
	if err := folder.Validate(f); err != nil {
		return Result{How: Unrouted, Reason: fmt.Sprintf("direct address: %v", err)}
	}
	if hasTopic {
		if err := ValidateTopic(topic); err != nil {
			return Result{How: Unrouted, Reason: fmt.Sprintf("direct address: %v", err)}
		}
	}
	if topic == ObserveTopic {
		return Result{Folder: f, Observe: true, How: Direct, Reason: "direct address " + DirectPrefix + addr}
	}
	return Result{Folder: f, Topic: topic, How: Direct, Reason: "direct address " + DirectPrefix + addr}
}
