// Package dns is the network jail's DNS responder: bound to the host side of
// one run's link, it answers A and AAAA for allowlisted names with addresses
// the egress proxy would dial, and NXDOMAIN for every other name, so a guest
// can neither resolve nor tunnel through names it may not reach.
package dns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/crackbox/crackbox/pkg/proxy/allow"
	"github.com/crackbox/crackbox/pkg/proxy/dest"
)

// Defaults for zero Config fields.
const (
	DefaultTTL         = 30
	DefaultTimeout     = 5 * time.Second
	DefaultMaxInflight = 64
	DefaultReadTimeout = 5 * time.Second
	DefaultMaxTCPConns = 16
)

// Config configures a responder.
type Config struct {
	// Addr is the ip:port to serve on, over both UDP and TCP, e.g. 10.213.0.1:53.
	Addr string
	// Allowed reports whether a normalized host name may be resolved at all;
	// see HostAllowed. Nil allows nothing.
	Allowed func(host string) bool
	// Resolve returns the addresses the proxy would dial for host (the
	// proxy's Resolve, which refuses private answers). Required.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// IPv6 answers AAAA queries; when false they get an empty answer, since
	// the jail has no IPv6 path.
	IPv6        bool
	TTL         uint32        // answer TTL in seconds; 0 = DefaultTTL
	Timeout     time.Duration // resolution budget per query; 0 = DefaultTimeout
	MaxInflight int           // concurrent resolutions; more are answered SERVFAIL; 0 = DefaultMaxInflight
	// ReadTimeout bounds, in total, reading one query over TCP (its length
	// and body), however slowly the client sends it; 0 = DefaultReadTimeout.
	ReadTimeout time.Duration
	// MaxTCPConns bounds the TCP connections open at once; more are closed
	// on accept. Each may hold a 64 KiB message. 0 = DefaultMaxTCPConns.
	MaxTCPConns int
	// OnQuery, if set, is called once per answered question.
	OnQuery func(Query)
	Log     *slog.Logger // nil discards
}

// Query describes one answered question.
type Query struct {
	Name    string // normalized, without the trailing dot
	Type    string // "A", "AAAA", ...
	Allowed bool   // the name passed the allowlist
	Rcode   string // "NOERROR", "NXDOMAIN", "REFUSED", "SERVFAIL", ...
	Answers int
	// Err is why resolving an allowed name failed (a refused address wraps
	// dest.ErrPrivateAddress), nil when it did not.
	Err error
}

// HostAllowed is the allowlist check for names: a name is resolvable if the
// list allows it on any port, i.e. a check is not denied for the host itself.
func HostAllowed(l *allow.List) func(string) bool {
	return func(host string) bool {
		err := l.Check(host, 443)
		return err == nil || errors.Is(err, allow.ErrPortNotAllowed)
	}
}

// Server is a running responder.
type Server struct {
	cfg      Config
	log      *slog.Logger
	udp, tcp *mdns.Server
	inflight chan struct{}
	udpAddr  net.Addr
	tcpAddr  net.Addr
	once     sync.Once
	err      error
}

// Listen binds UDP and TCP on cfg.Addr and starts answering.
func Listen(cfg Config) (*Server, error) {
	if cfg.Resolve == nil {
		return nil, errors.New("dns: Config.Resolve is required")
	}
	if cfg.Allowed == nil {
		cfg.Allowed = func(string) bool { return false }
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxInflight <= 0 {
		cfg.MaxInflight = DefaultMaxInflight
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.MaxTCPConns <= 0 {
		cfg.MaxTCPConns = DefaultMaxTCPConns
	}
	s := &Server{cfg: cfg, log: cfg.Log, inflight: make(chan struct{}, cfg.MaxInflight)}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	pc, err := net.ListenPacket("udp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("dns: listen udp %s: %w", cfg.Addr, err)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		pc.Close()
		return nil, fmt.Errorf("dns: listen tcp %s: %w", cfg.Addr, err)
	}
	s.udpAddr, s.tcpAddr = pc.LocalAddr(), ln.Addr()
	mk := func() *mdns.Server {
		return &mdns.Server{
			Handler:        mdns.HandlerFunc(s.serve),
			MsgAcceptFunc:  accept,
			DecorateWriter: func(w mdns.Writer) mdns.Writer { return dropFormErr{w} },
			MsgInvalidFunc: func([]byte, error) {},
			ReadTimeout:    cfg.ReadTimeout,
			WriteTimeout:   5 * time.Second,
			IdleTimeout:    func() time.Duration { return max(10*time.Second, cfg.ReadTimeout) },
		}
	}
	s.udp, s.tcp = mk(), mk()
	s.udp.PacketConn, s.tcp.Listener = pc, &capListener{Listener: ln, slots: make(chan struct{}, cfg.MaxTCPConns)}
	started := make(chan struct{}, 2)
	for _, srv := range []*mdns.Server{s.udp, s.tcp} {
		srv.NotifyStartedFunc = func() { started <- struct{}{} }
		go func() {
			if err := srv.ActivateAndServe(); err != nil {
				s.log.Debug("dns serve ended", "addr", cfg.Addr, "err", err)
			}
		}()
	}
	for range 2 {
		<-started
	}
	return s, nil
}

// UDPAddr and TCPAddr are the bound addresses (useful with port 0).
func (s *Server) UDPAddr() net.Addr { return s.udpAddr }
func (s *Server) TCPAddr() net.Addr { return s.tcpAddr }

// Close stops both listeners; it is safe to call more than once.
func (s *Server) Close() error {
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s.err = errors.Join(s.udp.ShutdownContext(ctx), s.tcp.ShutdownContext(ctx))
	})
	return s.err
}

// capListener closes connections beyond its slots as soon as they are
// accepted, so a client cannot make the responder hold a goroutine and a
// message buffer for every TCP connection it opens.
type capListener struct {
	net.Listener
	slots chan struct{}
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &slotConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
			c.Close()
		}
	}
}

// slotConn gives its slot back when closed, once.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// accept drops what cannot be a plain query instead of answering it: a reply
// to junk only helps amplification and probing.
func accept(dh mdns.Header) mdns.MsgAcceptAction {
	const qr = 1 << 15
	switch {
	case dh.Bits&qr != 0:
		return mdns.MsgIgnore
	case dh.Qdcount != 1 || dh.Ancount != 0 || dh.Nscount != 0 || dh.Arcount > 1:
		return mdns.MsgIgnore
	case int(dh.Bits>>11)&0xF != mdns.OpcodeQuery:
		return mdns.MsgRejectNotImplemented
	}
	return mdns.MsgAccept
}

// dropFormErr swallows the FORMERR reply the library sends for a message
// whose body fails to parse. serve never answers FORMERR itself.
type dropFormErr struct{ mdns.Writer }

func (w dropFormErr) Write(b []byte) (int, error) {
	if len(b) >= 4 && b[3]&0xF == mdns.RcodeFormatError {
		return len(b), nil
	}
	return w.Writer.Write(b)
}

func (s *Server) serve(w mdns.ResponseWriter, r *mdns.Msg) {
	m := s.answer(r)
	if m == nil {
		return
	}
	size := 512
	if w.RemoteAddr().Network() == "tcp" {
		size = mdns.MaxMsgSize
	} else if o := r.IsEdns0(); o != nil {
		size = int(max(o.UDPSize(), 512))
	}
	if o := r.IsEdns0(); o != nil {
		m.SetEdns0(1232, false)
	}
	m.Truncate(size)
	if err := w.WriteMsg(m); err != nil {
		s.log.Debug("dns write", "err", err)
	}
}

// answer builds the reply to one question, or nil to stay silent.
func (s *Server) answer(r *mdns.Msg) *mdns.Msg {
	if len(r.Question) != 1 {
		return nil
	}
	q := r.Question[0]
	m := new(mdns.Msg)
	m.SetReply(r)
	m.RecursionAvailable = true
	m.Authoritative = false

	host, err := allow.NormalizeHost(q.Name)
	info := Query{Name: host, Type: mdns.TypeToString[q.Qtype]}
	if info.Type == "" {
		info.Type = fmt.Sprintf("TYPE%d", q.Qtype)
	}
	defer func() {
		info.Rcode = mdns.RcodeToString[m.Rcode]
		info.Answers = len(m.Answer)
		if s.cfg.OnQuery != nil {
			s.cfg.OnQuery(info)
		}
	}()
	switch {
	case q.Qclass != mdns.ClassINET:
		m.Rcode = mdns.RcodeRefused
		return m
	case q.Qtype == mdns.TypeANY || q.Qtype == mdns.TypeAXFR || q.Qtype == mdns.TypeIXFR:
		// Refused whatever the name; Allowed still says whether the name passed, so
		// an ANY for an allowed name is not reported as a blocked lookup.
		info.Allowed = err == nil && isName(host) && s.cfg.Allowed(host)
		m.Rcode = mdns.RcodeRefused
		return m
	case err != nil || !isName(host) || !s.cfg.Allowed(host):
		m.Rcode = mdns.RcodeNameError
		return m
	}
	info.Allowed = true
	if q.Qtype != mdns.TypeA && q.Qtype != mdns.TypeAAAA {
		return m // the name exists, but we serve no other record types
	}
	if q.Qtype == mdns.TypeAAAA && !s.cfg.IPv6 {
		return m
	}
	select {
	case s.inflight <- struct{}{}:
		defer func() { <-s.inflight }()
	default:
		m.Rcode = mdns.RcodeServerFailure
		return m
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	addrs, err := s.cfg.Resolve(ctx, host)
	if err != nil {
		info.Err = err
		m.Rcode = rcodeFor(err)
		s.log.Debug("dns resolve", "host", host, "err", err)
		return m
	}
	for _, a := range addrs {
		a = a.Unmap()
		hdr := mdns.RR_Header{Name: q.Name, Class: mdns.ClassINET, Ttl: s.cfg.TTL, Rrtype: q.Qtype}
		switch {
		case q.Qtype == mdns.TypeA && a.Is4():
			m.Answer = append(m.Answer, &mdns.A{Hdr: hdr, A: a.AsSlice()})
		case q.Qtype == mdns.TypeAAAA && a.Is6():
			m.Answer = append(m.Answer, &mdns.AAAA{Hdr: hdr, AAAA: a.AsSlice()})
		}
	}
	return m
}

// isName rejects IP literals: an allowlist never covers them and they are
// not DNS names.
func isName(h string) bool {
	_, err := netip.ParseAddr(h)
	return err != nil && h != "" && !strings.Contains(h, ":")
}

// rcodeFor maps a resolution failure: names that do not exist are NXDOMAIN,
// answers the proxy refuses (private addresses) are REFUSED, anything else
// (timeouts, upstream trouble) is SERVFAIL so clients may retry.
func rcodeFor(err error) int {
	var de *net.DNSError
	switch {
	case errors.Is(err, dest.ErrPrivateAddress):
		return mdns.RcodeRefused
	case errors.Is(err, dest.ErrNoAddress), errors.As(err, &de) && de.IsNotFound:
		return mdns.RcodeNameError
	}
	return mdns.RcodeServerFailure
}
