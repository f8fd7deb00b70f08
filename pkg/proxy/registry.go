package proxy

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/crackbox/crackbox/pkg/proxy/allow"
	"github.com/crackbox/crackbox/pkg/proxy/inject"
)

// Registry errors callers branch on.
var (
	ErrUnknownClient = errors.New("unknown client")
	ErrClientExists  = errors.New("client address already registered")
	ErrInvalidClient = errors.New("invalid client")
)

// Client is one sandbox whose traffic the proxy decides: connections from IP
// are checked against Allow.
type Client struct {
	ID    string
	IP    netip.Addr
	Allow *allow.List
	// Secrets are injected into requests to the hosts they are bound to;
	// only those hosts have their TLS terminated. nil = none.
	Secrets *inject.Set
}

// Registry maps source addresses to clients. It is safe for concurrent use;
// the proxy looks a client up on every request, so Update takes effect on
// connections that are already open.
type Registry struct {
	mu      sync.RWMutex
	clients map[netip.Addr]Client
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{clients: make(map[netip.Addr]Client)}
}

// Register adds c; the address must be valid and not yet registered.
func (r *Registry) Register(c Client) error {
	if !c.IP.IsValid() {
		return fmt.Errorf("register client %q: no IP address: %w", c.ID, ErrInvalidClient)
	}
	if c.Allow == nil {
		c.Allow, _ = allow.Parse(nil)
	}
	c.IP = c.IP.Unmap()
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.clients[c.IP]; ok {
		return fmt.Errorf("register client %q at %s: held by %q: %w", c.ID, c.IP, old.ID, ErrClientExists)
	}
	r.clients[c.IP] = c
	return nil
}

// Unregister removes the client at ip and reports whether there was one.
func (r *Registry) Unregister(ip netip.Addr) bool {
	ip = ip.Unmap()
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.clients[ip]
	delete(r.clients, ip)
	return ok
}

// Lookup returns the client at ip.
func (r *Registry) Lookup(ip netip.Addr) (Client, bool) {
	if r == nil {
		return Client{}, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	c, ok := r.clients[ip.Unmap()]
	return c, ok
}

// LookupID returns the client registered under id.
func (r *Registry) LookupID(id string) (Client, bool) {
	if r == nil {
		return Client{}, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, c := range r.clients {
		if c.ID == id {
			return c, true
		}
	}
	return Client{}, false
}

// Update replaces the allowlist of the client at ip with a copy that has add
// entries added and remove entries removed, and returns the new client.
func (r *Registry) Update(ip netip.Addr, add, remove []string) (Client, error) {
	ip = ip.Unmap()
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.clients[ip]
	if !ok {
		return Client{}, fmt.Errorf("update client at %s: %w", ip, ErrUnknownClient)
	}
	l, err := c.Allow.With(add, remove)
	if err != nil {
		return Client{}, fmt.Errorf("update client %q: %w", c.ID, err)
	}
	c.Allow = l
	r.clients[ip] = c
	return c, nil
}

// List returns all clients ordered by ID, then address.
func (r *Registry) List() []Client {
	r.mu.RLock()
	out := make([]Client, 0, len(r.clients))
	for _, c := range r.clients {
		out = append(out, c)
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b Client) int {
		if a.ID != b.ID {
			if a.ID < b.ID {
				return -1
			}
			return 1
		}
		return a.IP.Compare(b.IP)
	})
	return out
}

// Put registers c, replacing any client at its address in one step, so a
// connection looked up meanwhile sees the old client or the new, never none.
func (r *Registry) Put(c Client) error {
	if !c.IP.IsValid() {
		return fmt.Errorf("put client %q: no IP address: %w", c.ID, ErrInvalidClient)
	}
	if c.Allow == nil {
		c.Allow, _ = allow.Parse(nil)
	}
	c.IP = c.IP.Unmap()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clients[c.IP] = c
	return nil
}

// Replace makes cs the whole registry in one step; clients without a valid
// address are skipped. A fleet replica uses it to adopt a full snapshot.
func (r *Registry) Replace(cs []Client) {
	m := make(map[netip.Addr]Client, len(cs))
	for _, c := range cs {
		if !c.IP.IsValid() {
			continue
		}
		if c.Allow == nil {
			c.Allow, _ = allow.Parse(nil)
		}
		c.IP = c.IP.Unmap()
		m[c.IP] = c
	}
	r.mu.Lock()
	r.clients = m
	r.mu.Unlock()
}
