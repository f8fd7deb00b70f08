// Package dispatch runs arizuko turns on a fleet of runners through NATS
// JetStream. The control plane's turn queue keeps every rule it has on one
// host (one live turn per folder, the guest cap, retries, terminal failures,
// the budget); its Runner is a Dispatcher, which publishes each attempt as a
// work item on a work-queue stream and waits for the outcome. A Runner on
// each host pulls items up to its capacity, takes the folder's lease in a KV
// bucket (renewed while the turn runs; losing it stops the turn), fetches the
// attempt's job from the control plane over the API, runs it through the
// same turn.Runner a single host uses, carries the guest's MCP connections to
// the control plane (grant checks and audit stay there) and reports the
// outcome. The control plane binds each dispatch to the first runner whose
// claim it accepted (the lease must name that runner then) and accepts tool
// calls, renewals and the outcome from that runner alone, until it has not
// heard from it for a lease TTL: every runner can write the lease bucket.
package dispatch

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/crackbox/crackbox/internal/natsauth"
	"github.com/crackbox/crackbox/pkg/arizuko/home"
	"github.com/crackbox/crackbox/pkg/proxy/inject"
)

// Names in JetStream.
const (
	Stream       = "ARIZUKO_TURNS"
	Subject      = "arizuko.turns"
	Consumer     = "runners"
	LeaseBucket  = "arizuko_leases"
	RunnerBucket = "arizuko_runners"
)

// Defaults.
const (
	DefaultLeaseTTL = 15 * time.Second
	DefaultReplicas = 3
)

// Sentinel errors the API maps to its envelope codes.
var (
	// ErrStale is a claim, tool call or outcome for a dispatch the control
	// plane no longer waits for (finished, or issued before a restart).
	ErrStale = errors.New("dispatch is not current")
	// ErrNotHolder is a request from a runner that does not hold the
	// dispatch: another runner's claim was accepted, its lease or labels do
	// not match.
	ErrNotHolder = errors.New("runner does not hold the lease")
	// ErrTooManySessions is a tool session past gated.MaxSessions open for one
	// claimed turn.
	ErrTooManySessions = errors.New("too many tool sessions")
)

// Item is one work item: which attempt of which turn, and what the runner
// must offer. It carries no prompt and no secret; the runner fetches those
// with a Claim once it holds the lease.
type Item struct {
	Turn     int64    `json:"turn"`
	Attempt  int      `json:"attempt"`
	Dispatch string   `json:"dispatch"` // unique per publication
	Folder   string   `json:"folder"`
	Require  []string `json:"require,omitempty"` // labels the runner must have
}

// Lease is the value of a folder's key in LeaseBucket.
type Lease struct {
	Runner   string `json:"runner"`
	Turn     int64  `json:"turn"`
	Attempt  int    `json:"attempt"`
	Dispatch string `json:"dispatch"`
}

// Claim identifies the dispatch a runner's request is about.
type Claim struct {
	Turn     int64  `json:"turn"`
	Attempt  int    `json:"attempt"`
	Dispatch string `json:"dispatch"`
	Folder   string `json:"folder"`
}

// Work is the job of a claimed dispatch, minus what only the runner's host
// knows (the folder's home there, its sockets).
type Work struct {
	Folder string   `json:"folder"`
	Topic  string   `json:"topic,omitempty"`
	Argv   []string `json:"argv"`
	Env    []string `json:"env"`
	// Secrets are injected by the run's proxy on this host (inject: grants).
	Secrets   []inject.Secret `json:"secrets,omitempty"`
	Prompt    string          `json:"prompt"`
	GuestHome string          `json:"guest_home"`
	Allow     []string        `json:"allow"`
	MemoryMiB int             `json:"memory_mib,omitempty"`
	CPUs      int             `json:"cpus,omitempty"`
	// Answer asks for the agent's stdout alone in Outcome.Answer.
	Answer bool `json:"answer,omitempty"`
	// HomeLimits bound the home the turn may leave.
	HomeLimits home.Limits `json:"home_limits"`
}

// Outcome is how a claimed attempt ended on its runner.
type Outcome struct {
	Claim
	Exit      int    `json:"exit"`
	ExecError string `json:"exec_error,omitempty"`
	Egress    string `json:"egress,omitempty"`
	// Guarded are the destinations the turn's proxy refused as private
	// or the host's own, for the control plane's audit log.
	Guarded  []string `json:"guarded,omitempty"`
	Error    string   `json:"error,omitempty"`
	Terminal bool     `json:"terminal,omitempty"` // a retry cannot fix it
	Output   string   `json:"output,omitempty"`   // the tail of the agent's output
	Answer   string   `json:"answer,omitempty"`   // the tail of its stdout alone, when the job asked for it
	// Home is the hash of the manifest the runner sent for this attempt's
	// home: committed with a success, dropped otherwise.
	Home      string    `json:"home,omitempty"`
	HomeStats HomeStats `json:"home_stats"`
}

// Advert is what a runner announces in RunnerBucket while it runs.
type Advert struct {
	ID       string   `json:"id"`
	Capacity int      `json:"capacity"`
	Busy     int      `json:"busy"`
	Labels   []string `json:"labels,omitempty"`
}

// LeaseKey is a folder's key in LeaseBucket. Folder paths may hold bytes a
// KV key may not, so the key is their base64url.
func LeaseKey(folder string) string {
	return "f." + base64.RawURLEncoding.EncodeToString([]byte(folder))
}

// Satisfies reports whether a runner with labels may run an item requiring req.
func Satisfies(labels, req []string) bool {
	for _, r := range req {
		if !slices.Contains(labels, r) {
			return false
		}
	}
	return true
}

// ParseLabels checks runner labels: key=value, no spaces or commas.
func ParseLabels(in []string) ([]string, error) {
	var out []string
	for _, l := range in {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" || v == "" || strings.ContainsAny(l, " ,\t\n") {
			return nil, fmt.Errorf("label %q: want key=value, like kvm=true", l)
		}
		out = append(out, l)
	}
	return out, nil
}

// Connect dials NATS as a with reconnects that never give up: a runner or
// control plane outlives a node restart.
func Connect(a natsauth.Auth, name string) (*nats.Conn, error) {
	auth, err := a.Options()
	if err != nil {
		return nil, err
	}
	opts := append([]nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond)}, auth...)
	nc, err := nats.Connect(a.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("nats %s: %w", a.URL, natsauth.Explain(err))
	}
	return nc, nil
}
