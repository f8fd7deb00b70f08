package netjail

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/jail/rundir"
	"github.com/crackbox/crackbox/pkg/proxy"
	"github.com/crackbox/crackbox/pkg/proxy/allow"
	"github.com/crackbox/crackbox/pkg/proxy/dns"
	"github.com/crackbox/crackbox/pkg/proxy/inject"
)

// DefaultRunsDir holds the /30 claims when Options.RunsDir is unset: the
// jail's run dir base (/run/crackbox as root, a tmpfs, so claims vanish with
// the taps at reboot).
func DefaultRunsDir() string { return rundir.DefaultBase() }

// DefaultProxyListen is where guest-init listens in proxy-only mode.
const DefaultProxyListen = jail.DefaultProxyListen

// ModeAuto picks tap when this process may create taps, else proxy-only.
const ModeAuto = "auto"

// Options configures the network of one run.
type Options struct {
	// Mode is ModeAuto (or ""), jail.NetTap, jail.NetProxyOnly or jail.NetNone.
	Mode    string
	RunID   string       // "" = generated; names the tap and table
	RunsDir string       // "" = DefaultRunsDir()
	Pool    netip.Prefix // zero = DefaultPool
	// UID and GID own the tap: the user QEMU runs as; -1 = root.
	UID, GID int
	// Allow is the run's allowlist; nil allows nothing.
	Allow *allow.List
	// Learn allows nothing and records every host the guest tries, for
	// (*Run).Report to print as an --allow list.
	Learn bool
	// Proxy carries the operator settings (AllowCIDRs, Resolver, Hosts,
	// DefaultPorts, timeouts, DecisionLog, Log). OnDecision is called
	// after the run's own tally.
	Proxy proxy.Options
	// ProxyListen is the in-guest listener of proxy-only mode; "" = DefaultProxyListen.
	ProxyListen string
	// Secrets are injected by the proxy into requests to the hosts they are
	// bound to; the guest gets only their placeholders. nil = none.
	Secrets *inject.Set
	Log     *slog.Logger // nil discards
}

// Run is the network of one run: Jail puts Net into jail.Spec.Net and
// closes it after jail.Run returns; then print Report.
type Run struct {
	Mode  string
	Net   jail.Net
	Link  *Net   // tap mode only
	Tally *Tally // nil in none mode
	Proxy *proxy.Proxy

	learn   bool
	svc     *services
	tapFile *os.File // the queue QEMU inherits; ours is closed at Close
	once    sync.Once
	err     error
}

// Prepare builds the run's network for the chosen mode (Jail calls it; a
// caller of its own runs Sweep first). In tap mode it sets up the tap and
// table, and serves the in-process proxy (forward and transparent) and the
// DNS responder on the host side address for the guest alone. In proxy-only mode the guest has no
// NIC and each connection it makes to ProxyListen reaches the same proxy
// with the run's fixed identity.
func Prepare(ctx context.Context, o Options) (*Run, error) {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mode, err := resolveMode(o.Mode)
	if err != nil {
		return nil, err
	}
	r := &Run{Mode: mode, learn: o.Learn}
	if mode == jail.NetNone {
		r.Net = jail.Net{Mode: jail.NetNone}
		return r, nil
	}
	if o.RunID == "" {
		o.RunID = newRunID()
	}
	list := o.Allow
	if o.Learn || list == nil {
		list, _ = allow.Parse(nil)
	}
	r.Tally = NewTally(allow.EffectivePorts(o.Proxy.DefaultPorts, list.DefaultPortList()))
	popts := o.Proxy
	userHook := popts.OnDecision
	popts.OnDecision = func(d proxy.Decision) {
		r.Tally.Decision(d)
		if userHook != nil {
			userHook(d)
		}
	}
	if popts.Log == nil {
		popts.Log = log
	}
	prepare := func() error { return r.prepareTap(ctx, o, popts, list, log) }
	if mode == jail.NetProxyOnly {
		prepare = func() error { return r.prepareProxyOnly(o, popts, list) }
	}
	if err := prepare(); err != nil {
		return nil, err
	}
	return r, nil
}

// prepareProxyOnly serves the run's proxy to a guest with no NIC: each connection the
// guest makes to ProxyListen reaches it as the run's fixed client.
func (r *Run) prepareProxyOnly(o Options, popts proxy.Options, list *allow.List) error {
	p, err := proxy.New(popts, proxy.NewRegistry())
	if err != nil {
		return err
	}
	r.Proxy = p
	r.svc = &services{proxy: p}
	listen := o.ProxyListen
	if listen == "" {
		listen = DefaultProxyListen
	}
	client := proxy.Client{ID: o.RunID, Allow: list, Secrets: o.Secrets}
	r.Net = jail.Net{
		Mode:        jail.NetProxyOnly,
		ProxyListen: listen,
		ProxyURL:    "http://" + listen,
		ProxyConn:   func(c net.Conn) { p.ServeForwardConn(c, client) },
		TrustCA:     trustCA(o.Secrets),
	}
	return nil
}

// prepareTap sets up the run's tap and table and serves the proxy (forward and
// transparent) and the DNS responder on the host side address, for the guest alone.
func (r *Run) prepareTap(ctx context.Context, o Options, popts proxy.Options, list *allow.List, log *slog.Logger) error {
	runsDir := o.RunsDir
	if runsDir == "" {
		runsDir = DefaultRunsDir()
	}
	var svc *services
	serve := func(n *Net) (Listeners, error) {
		var err error
		svc, err = startServices(popts, proxy.Client{ID: o.RunID, IP: n.Guest, Allow: list, Secrets: o.Secrets}, n.Host, r.Tally.Query)
		if err != nil {
			return Listeners{}, err
		}
		return svc.listen, nil
	}
	link, err := Setup(ctx, Config{RunID: o.RunID, RunsDir: runsDir, Pool: o.Pool, UID: o.UID, GID: o.GID, Serve: serve, Log: log})
	if err != nil {
		if svc != nil {
			svc.close()
		}
		return err
	}
	r.Link = link
	r.svc, r.Proxy = svc, svc.proxy
	tapFile, err := openTap(link.Tap)
	if err != nil {
		r.Close()
		return err
	}
	r.tapFile = tapFile
	r.Net = jail.Net{
		Mode: jail.NetTap,
		Tap: &jail.Tap{
			Name:      link.Tap,
			File:      tapFile,
			GuestAddr: link.GuestCIDR(),
			Gateway:   link.Host.String(),
			DNS:       link.Host.String(),
		},
		ProxyURL: link.ProxyURL(),
		TrustCA:  trustCA(o.Secrets),
	}
	return nil
}

func resolveMode(m string) (string, error) {
	switch m = jail.CanonicalNet(m); m {
	case "", ModeAuto:
		if Available() == nil {
			return jail.NetTap, nil
		}
		return jail.NetProxyOnly, nil
	case jail.NetTap:
		if err := Available(); err != nil {
			return "", fmt.Errorf("--net tap: %w", err)
		}
		return jail.NetTap, nil
	case jail.NetProxyOnly, jail.NetNone:
		return m, nil
	}
	return "", fmt.Errorf("netjail: network mode %q: use auto, tap, proxy-only or none", m)
}

func newRunID() string {
	b := make([]byte, 4)
	rand.Read(b)
	return fmt.Sprintf("%d-%s", os.Getpid(), hex.EncodeToString(b))
}

// Close stops the proxy and DNS responder and removes the tap and table.
// Safe to call more than once.
func (r *Run) Close() error {
	if r == nil {
		return nil
	}
	r.once.Do(func() {
		var errs []error
		if r.tapFile != nil {
			r.tapFile.Close()
		}
		if r.svc != nil {
			errs = append(errs, r.svc.close())
		}
		if r.Link != nil {
			errs = append(errs, r.Link.Close())
		}
		r.err = errors.Join(errs...)
	})
	return r.err
}

// Report is the text to print on stderr at exit: the learned --allow list in
// learn mode (printed even when quiet, it is what was asked for), else the
// blocked-egress summary unless quiet. "" means print nothing.
func (r *Run) Report(quiet bool) string {
	if r == nil || r.Tally == nil {
		return ""
	}
	if r.learn {
		return r.Tally.LearnReport(learnCIDRs(r.Proxy, r.Tally.Learned()))
	}
	if quiet {
		return ""
	}
	return r.Tally.Summary()
}

// Blocked is the blocked-egress summary line for the run record ("" if none).
func (r *Run) Blocked() string {
	if r == nil || r.Tally == nil {
		return ""
	}
	return r.Tally.Summary()
}

// Learned is every host the guest tried to reach, as --allow entries.
func (r *Run) Learned() []string {
	if r == nil || r.Tally == nil {
		return nil
	}
	return r.Tally.Learned()
}

// services are the proxy listeners and DNS responder on a jail link's host
// side. Tests start them on a veth as they are started on a tap.
type services struct {
	proxy  *proxy.Proxy
	dns    *dns.Server
	listen Listeners
	wg     sync.WaitGroup
}

// startServices binds every listener on an ephemeral port of host: the
// address is the run's own, and a port the kernel picks cannot be held by a
// wildcard listener of another program.
func startServices(popts proxy.Options, client proxy.Client, host netip.Addr, onQuery func(dns.Query)) (_ *services, err error) {
	reg := proxy.NewRegistry()
	if err := reg.Register(client); err != nil {
		return nil, err
	}
	p, err := proxy.New(popts, reg)
	if err != nil {
		return nil, err
	}
	s := &services{proxy: p}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	ephemeral := hostPort(host, 0)
	fwd, err := net.Listen("tcp", ephemeral)
	if err != nil {
		return nil, fmt.Errorf("netjail: proxy listener: %w", err)
	}
	tr, err := net.Listen("tcp", ephemeral)
	if err != nil {
		fwd.Close()
		return nil, fmt.Errorf("netjail: transparent listener: %w", err)
	}
	s.wg.Add(2)
	go func() { defer s.wg.Done(); p.ServeForward(fwd) }()
	go func() { defer s.wg.Done(); p.ServeTransparent(tr) }()
	s.dns, err = dns.Listen(dns.Config{
		Addr: ephemeral,
		Allowed: func(h string) bool {
			c, ok := reg.Lookup(client.IP)
			if !ok {
				return false
			}
			if name := c.Secrets.Find(h); name != "" {
				// A name is how a placeholder leaves through DNS.
				p.Record(proxy.Decision{ClientID: c.ID, Method: "DNS", Host: h,
					Reason: proxy.ReasonSecretExfiltration, Secret: name})
				return false
			}
			return dns.HostAllowed(c.Allow)(h)
		},
		Resolve: p.Resolve,
		OnQuery: onQuery,
		Log:     popts.Log,
	})
	if err != nil {
		fwd.Close()
		tr.Close()
		return nil, err
	}
	s.listen = Listeners{
		Proxy:       addrPort(fwd.Addr()),
		Transparent: addrPort(tr.Addr()),
		DNSUDP:      addrPort(s.dns.UDPAddr()),
		DNSTCP:      addrPort(s.dns.TCPAddr()),
	}
	return s, nil
}

func addrPort(a net.Addr) uint16 {
	switch a := a.(type) {
	case *net.TCPAddr:
		return uint16(a.Port)
	case *net.UDPAddr:
		return uint16(a.Port)
	}
	return 0
}

func (s *services) close() error {
	var errs []error
	if s.dns != nil {
		errs = append(errs, s.dns.Close())
	}
	if s.proxy != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := s.proxy.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			errs = append(errs, err)
		}
		cancel()
	}
	s.wg.Wait()
	return errors.Join(errs...)
}

// trustCA is the certificate of the run's injection CA, nil without secrets.
func trustCA(s *inject.Set) []byte {
	if s.Empty() {
		return nil
	}
	return s.CA().PEM()
}
