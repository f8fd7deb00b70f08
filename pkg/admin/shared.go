package admin

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/crackbox/crackbox/pkg/proxy"
	"github.com/crackbox/crackbox/pkg/proxy/allow"
)

// ErrUnavailable marks an edit a shared registry could not store: the change
// was not made anywhere, and the client may retry.
var ErrUnavailable = errors.New("shared registry unavailable")

// Shared is a registry kept with other proxy replicas. When Options.Shared is
// set the API's edits go through it instead of straight to Options.Registry;
// it stores the change for every replica and then applies it locally, so a
// response reflects the change on this replica too.
type Shared interface {
	Register(proxy.Client) error                                      // proxy.ErrClientExists when taken
	Unregister(netip.Addr) (bool, error)                              // false when no client was there
	Update(ip netip.Addr, add, remove []string) (proxy.Client, error) // proxy.ErrUnknownClient when none
	// Status is nil while the replica follows the shared registry, else why
	// not and since when; the replica keeps enforcing its last copy meanwhile.
	Status() (since time.Time, err error)
	// Transport says how the replica reaches the others, for /health: an
	// operator must see a registry that runs without credentials or TLS.
	Transport() string
}

// Record is the one shape a client is stored in: the API's bodies, the state
// file and a shared registry's entries.
func Record(c proxy.Client) ClientJSON { return clientJSON(c) }

// Client parses a stored record back into a client, checking every field.
func (c ClientJSON) Client() (proxy.Client, error) {
	ip, err := netip.ParseAddr(c.IP)
	if err != nil {
		return proxy.Client{}, fmt.Errorf("ip: %w", err)
	}
	if ip.Zone() != "" {
		return proxy.Client{}, fmt.Errorf("ip %q: a zone is not allowed", c.IP)
	}
	l, err := allow.Parse(c.Allowlist)
	if err != nil {
		return proxy.Client{}, fmt.Errorf("client %s: %w", c.IP, err)
	}
	return proxy.Client{ID: c.ID, IP: ip.Unmap(), Allow: l}, nil
}

// The edits below go to the shared registry when there is one.

func (s *Server) addClient(c proxy.Client) error {
	if s.opts.Shared != nil {
		return s.opts.Shared.Register(c)
	}
	return s.opts.Registry.Register(c)
}

func (s *Server) removeClient(ip netip.Addr) (bool, error) {
	if s.opts.Shared != nil {
		return s.opts.Shared.Unregister(ip)
	}
	return s.opts.Registry.Unregister(ip), nil
}

func (s *Server) updateClient(ip netip.Addr, add, remove []string) (proxy.Client, error) {
	if s.opts.Shared != nil {
		return s.opts.Shared.Update(ip, add, remove)
	}
	return s.opts.Registry.Update(ip, add, remove)
}

// sharedHealth adds the shared registry's state to a /health document.
func (s *Server) sharedHealth(doc map[string]string) {
	if s.opts.Shared == nil {
		return
	}
	doc["registry_nats"] = s.opts.Shared.Transport()
	since, err := s.opts.Shared.Status()
	if err == nil {
		doc["registry"] = "ok"
		return
	}
	doc["registry"], doc["registry_since"], doc["registry_error"] = "degraded", since.UTC().Format(time.RFC3339), err.Error()
}
