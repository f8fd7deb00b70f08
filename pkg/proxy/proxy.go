// Package proxy is the allowlist egress proxy: a forward HTTP/CONNECT proxy
// and a transparent (NAT redirect) proxy that decide every request with
// pkg/proxy/allow, resolve names themselves, refuse private destinations and dial
// exactly the address they checked.
//
// Destination rules. A name must match the client's allowlist (host and
// port) and resolve, as an absolute name so no search domain applies, to an
// address the guard passes. The guard refuses private, loopback, link-local,
// metadata, documentation and other special ranges, and every subnet the
// proxy host is directly connected to, unless an AllowCIDRs entry covers the
// address; it refuses the proxy host's own addresses even then: a loopback
// address is opened only by a range lying inside loopback (127.0.0.0/8 or
// narrower, ::1/128), any other host address (a tap gateway, the LAN
// address) only by an entry naming exactly it (/32, /128).
//
// An IP-literal destination is decided by the client's allowlist alone: it
// passes only when an address entry (192.0.2.10, 10.20.0.0/16, with an
// optional :port) covers it, and the guard then exempts those entries instead
// of AllowCIDRs, with the same rule for the host's own addresses. AllowCIDRs
// never opens a literal: it widens where allowed names may resolve to, and
// nothing else.
package proxy

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/crackbox/crackbox/internal/lograte"
	"github.com/crackbox/crackbox/pkg/proxy/allow"
)

// Defaults applied to zero Options fields.
const (
	DefaultDialTimeout    = 10 * time.Second
	DefaultIdleTimeout    = 5 * time.Minute
	DefaultHeaderTimeout  = 30 * time.Second
	DefaultMaxClientConns = 512
)

// MaxHeaderBytes bounds a request line plus its headers, and a TLS
// ClientHello is bounded the same way: a client cannot make the proxy hold
// more than this for one request it has not finished sending.
const MaxHeaderBytes = 64 << 10

// Options configures a Proxy. Reload swaps everything except Registerer and
// Log for connections accepted afterwards.
type Options struct {
	AllowCIDRs   []netip.Prefix          // ranges the resolved addresses of allowed names may lie in despite the guard (host's own addresses excepted, see package doc); never opens an IP literal
	Resolver     string                  // "" = system resolver (so /etc/hosts applies); else "ip:port" DNS server
	Hosts        map[string][]netip.Addr // static name -> IPs override, consulted before the resolver
	DefaultPorts []int                   // ports allowed for entries without :port; empty = the client list's own (80, 443 by default)
	DialTimeout  time.Duration           // per upstream connect; 0 = DefaultDialTimeout
	IdleTimeout  time.Duration           // no bytes either way for this long ends a tunnel, and bounds the wait for response headers; 0 = DefaultIdleTimeout
	// HeaderTimeout bounds, in total, the time from a request's first byte
	// to the end of its headers (or of a TLS ClientHello); 0 = DefaultHeaderTimeout.
	HeaderTimeout time.Duration
	// MaxClientConns bounds the connections one source address may hold open
	// on the listeners of ServeForward and ServeTransparent; more are refused.
	// 0 = DefaultMaxClientConns.
	MaxClientConns int
	// UpstreamRoots verifies upstream certificates where the proxy
	// terminates TLS to inject a secret; nil = the host's roots.
	UpstreamRoots *x509.CertPool
	DecisionLog   io.Writer             // one JSON line per decision; nil = off
	OnDecision    func(Decision)        // called once per decision, from connection goroutines
	Registerer    prometheus.Registerer // nil = no metrics exported
	Log           *slog.Logger          // nil discards
	// Replica names this proxy in its decision lines, so a fleet's merged
	// logs say which replica decided; "" leaves the field out.
	Replica string
	// TenantLists marks every client's allowlist as written by someone the
	// operator does not trust with the host's network (an arizuko tenant):
	// its address entries still open an IP literal, but only AllowCIDRs
	// exempt that literal from the destination guard.
	TenantLists bool
	// Refuse are listeners of the host's own services no client may reach,
	// whatever AllowCIDRs or an allowlist says; an unspecified address
	// stands for every address of the host.
	Refuse []netip.AddrPort
}

// config is the reloadable part of Options in ready-to-use form.
type config struct {
	cidrs         []netip.Prefix
	resolver      *net.Resolver
	hosts         map[string][]netip.Addr
	ports         []int
	dialTimeout   time.Duration
	idleTimeout   time.Duration
	headerTime    time.Duration
	maxConns      int
	upstreamRoots *x509.CertPool
	dlog          *decisionLog
	onDecision    func(Decision)
	tenantLists   bool
	refuse        []netip.AddrPort
}

// Proxy decides and relays connections for the clients in its Registry.
type Proxy struct {
	reg     *Registry
	log     *slog.Logger
	metrics *metrics
	cfg     atomic.Pointer[config]
	active  atomic.Int64
	ifaces  ifaceCache

	mu        sync.Mutex
	shutdown  bool
	listeners map[net.Listener]struct{}
	conns     map[*clientConn]struct{}
	wg        sync.WaitGroup
	// A client can trigger these warnings at will; they are rate limited so it cannot
	// write the operator's log at will (the decision log keeps every one).
	// The exfiltration warning is limited per client, so one guest's flood does not
	// hide another's first attempt.
	warn *slog.Logger
	// Per client: accepted connections, intercepted connections, and
	// their response buffers.
	open       clientCount
	intercepts clientCount
	bufs       clientCount
}

// New validates opts and returns a proxy deciding for the clients in reg.
func New(opts Options, reg *Registry) (*Proxy, error) {
	if reg == nil {
		return nil, errors.New("proxy: nil registry")
	}
	cfg, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("proxy: register metrics: %w", err)
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Proxy{
		reg:       reg,
		log:       log,
		metrics:   m,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*clientConn]struct{}),
		warn:      lograte.New(lograte.Options{Every: 10 * time.Second, Key: "client", Count: "refused_since_last"}).Logger(log),
	}
	p.cfg.Store(cfg)
	return p, nil
}

func buildConfig(opts Options) (*config, error) {
	c := &config{
		cidrs:         make([]netip.Prefix, 0, len(opts.AllowCIDRs)),
		hosts:         make(map[string][]netip.Addr, len(opts.Hosts)),
		ports:         slices.Clone(opts.DefaultPorts),
		dialTimeout:   opts.DialTimeout,
		idleTimeout:   opts.IdleTimeout,
		headerTime:    opts.HeaderTimeout,
		maxConns:      opts.MaxClientConns,
		upstreamRoots: opts.UpstreamRoots,
		dlog:          &decisionLog{w: opts.DecisionLog, replica: opts.Replica},
		onDecision:    opts.OnDecision,
		tenantLists:   opts.TenantLists,
		refuse:        slices.Clone(opts.Refuse),
	}
	for _, pfx := range opts.AllowCIDRs {
		if !pfx.IsValid() {
			return nil, fmt.Errorf("proxy: allowed CIDR %v is not a valid prefix", pfx)
		}
		c.cidrs = append(c.cidrs, pfx.Masked())
	}
	for _, port := range opts.DefaultPorts {
		if port < 1 || port > 65535 {
			return nil, fmt.Errorf("proxy: default port %d: must be 1..65535", port)
		}
	}
	for name, addrs := range opts.Hosts {
		h, err := allow.NormalizeHost(name)
		if err != nil {
			return nil, fmt.Errorf("proxy: static host entry: %w", err)
		}
		for _, a := range addrs {
			if !a.IsValid() {
				return nil, fmt.Errorf("proxy: static host %q has an invalid address", name)
			}
		}
		c.hosts[h] = slices.Clone(addrs)
	}
	r, err := newResolver(opts.Resolver)
	if err != nil {
		return nil, err
	}
	c.resolver = r
	if c.dialTimeout <= 0 {
		c.dialTimeout = DefaultDialTimeout
	}
	if c.idleTimeout <= 0 {
		c.idleTimeout = DefaultIdleTimeout
	}
	if c.headerTime <= 0 {
		c.headerTime = DefaultHeaderTimeout
	}
	if c.maxConns <= 0 {
		c.maxConns = DefaultMaxClientConns
	}
	return c, nil
}

// Reload swaps the allowed CIDRs, resolver, static hosts, default ports,
// timeouts and decision outputs. Requests decided afterwards use the new
// values; tunnels already open keep theirs. Registerer and Log are fixed at New.
func (p *Proxy) Reload(opts Options) error {
	cfg, err := buildConfig(opts)
	if err != nil {
		return err
	}
	p.cfg.Store(cfg)
	p.log.Info("proxy reloaded", "cidrs", len(cfg.cidrs), "hosts", len(cfg.hosts), "resolver", opts.Resolver)
	return nil
}

// Active returns the number of connections currently relaying to an upstream.
func (p *Proxy) Active() int { return int(p.active.Load()) }

// Registry returns the registry the proxy decides with.
func (p *Proxy) Registry() *Registry { return p.reg }

// ErrShutdown is returned by Serve methods called after Shutdown began; a
// Serve that is running when Shutdown starts returns nil.
var ErrShutdown = errors.New("proxy: shut down")

// serve runs the accept loop shared by both modes. answer says whether a
// refused connection gets an HTTP refusal (forward mode) or is just closed.
func (p *Proxy) serve(ln net.Listener, answer bool, handle func(*clientConn)) error {
	p.mu.Lock()
	if p.shutdown {
		p.mu.Unlock()
		ln.Close()
		return ErrShutdown
	}
	p.listeners[ln] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.listeners, ln)
		p.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			p.mu.Lock()
			down := p.shutdown
			p.mu.Unlock()
			if down {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				p.log.Warn("proxy accept", "err", err, "retry_in", backoff)
				time.Sleep(backoff)
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		backoff = 0
		cc, ok := p.trackClient(c)
		if !ok {
			p.refuseBusy(c, answer)
			continue
		}
		go func() {
			defer p.untrack(cc)
			handle(cc)
		}()
	}
}

// clientConn wraps an accepted connection so Shutdown can close the ones
// that sit idle between requests right away and the busy ones at the deadline.
type clientConn struct {
	net.Conn
	idle    atomic.Bool
	src     netip.Addr // the source address, when an IP socket
	counted bool       // src holds one of its MaxClientConns slots
}

func (p *Proxy) track(c net.Conn) (*clientConn, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shutdown {
		return nil, false
	}
	cc := &clientConn{Conn: c, src: remoteAddr(c)}
	p.conns[cc] = struct{}{}
	p.wg.Add(1)
	return cc, true
}

func (p *Proxy) untrack(cc *clientConn) {
	cc.Close()
	p.mu.Lock()
	delete(p.conns, cc)
	if cc.counted {
		p.open.give(cc.src)
	}
	p.mu.Unlock()
	p.wg.Done()
}

// setIdle marks cc as waiting for a request; false means the proxy is
// shutting down and the connection should end now.
func (p *Proxy) setIdle(cc *clientConn, idle bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	cc.idle.Store(idle)
	return !p.shutdown
}

// Shutdown stops accepting, closes idle connections, waits for open tunnels
// until ctx ends and then cuts them. It returns ctx.Err() if it had to cut.
func (p *Proxy) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	p.shutdown = true
	for ln := range p.listeners {
		ln.Close()
	}
	for cc := range p.conns {
		if cc.idle.Load() {
			cc.Close()
		}
	}
	p.mu.Unlock()

	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	conns := slices.Collect(maps.Keys(p.conns))
	p.mu.Unlock()
	for _, cc := range conns {
		cc.Close()
	}
	<-done
	return ctx.Err()
}

// Record emits a decision taken outside the proxy for one of its clients
// (the DNS responder's), to the same log, callback and metrics.
func (p *Proxy) Record(d Decision) { p.record(p.cfg.Load(), d) }

// record emits a decision to the log, the callback and the metrics.
func (p *Proxy) record(cfg *config, d Decision) {
	if d.Time.IsZero() {
		d.Time = time.Now()
	}
	p.metrics.observe(d)
	if err := cfg.dlog.write(d); err != nil {
		p.log.Warn("proxy decision log", "err", err)
	}
	if cfg.onDecision != nil {
		cfg.onDecision(d)
	}
	if d.Reason == ReasonSecretExfiltration {
		p.warn.Warn("proxy refused secret exfiltration", "client", d.ClientID, "secret", d.Secret, "host", d.Host, "port", d.Port)
	} else if !d.Allowed {
		p.log.Debug("proxy denied", "client", d.ClientID, "host", d.Host, "port", d.Port, "reason", d.Reason)
	}
}
