// Package admin is the proxy daemon's HTTP admin API: register and
// unregister clients, edit their allowlists, read the registry, health and
// metrics. Registry changes are persisted to an optional state file.
package admin

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/crackbox/crackbox/internal/httpjson"
	"github.com/crackbox/crackbox/pkg/proxy"
	"github.com/crackbox/crackbox/pkg/secrets"
)

// ErrInsecureListen is returned by CheckListen for a non-loopback admin
// address without a secret.
var ErrInsecureListen = errors.New("admin API on a non-loopback address needs a secret")

// Options configures a Server.
type Options struct {
	Registry  *proxy.Registry     // required
	Secret    string              // bearer token; empty disables auth (loopback only)
	StateFile string              // registry persistence; empty is off
	StateKey  *secrets.Ring       // seals client secrets in the state file; nil saves none
	Gatherer  prometheus.Gatherer // served on /metrics; nil serves an empty registry
	Healthy   func() error        // nil error means the proxy listener is up; nil func is always up
	Active    func() int          // open tunnels, shown in /v1/state; optional
	Log       *slog.Logger        // nil discards
	// Shared, when set, takes the API's edits instead of Registry (which it
	// must keep up to date); StateFile must then be empty.
	Shared Shared
}

// Server serves the admin API. It is the only writer of the registry in the
// daemon besides startup, so it is where changes are persisted.
type Server struct {
	opts    Options
	log     *slog.Logger
	secret  [sha256.Size]byte
	mu      sync.Mutex // serializes registry edits with their state file write
	srv     *http.Server
	metrics *http.Server // ServeMetrics' server, once started
}

// New builds a server and loads the state file into the registry. Clients
// already in the registry (configured ones) win over saved ones.
func New(opts Options) (*Server, error) {
	if opts.Registry == nil {
		return nil, errors.New("admin: no registry")
	}
	if opts.Shared != nil && opts.StateFile != "" {
		return nil, errors.New("admin: a shared registry and a state file both claim the registry")
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Gatherer == nil {
		opts.Gatherer = prometheus.NewRegistry()
	}
	s := &Server{opts: opts, log: opts.Log, secret: httpjson.Sum(opts.Secret)}
	if opts.StateFile != "" {
		if err := s.loadState(); err != nil {
			return nil, err
		}
	}
	s.srv = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	return s, nil
}

// Handler returns the API's routes with authentication applied.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", s.health)
	mux.Handle("POST /v1/register", s.auth(http.HandlerFunc(s.register)))
	mux.Handle("POST /v1/unregister", s.auth(http.HandlerFunc(s.unregister)))
	mux.Handle("PATCH /v1/clients/{ip}", s.auth(http.HandlerFunc(s.patch)))
	mux.Handle("GET /v1/clients/{client}/ca", s.auth(http.HandlerFunc(s.clientCA)))
	mux.Handle("GET /v1/state", s.auth(http.HandlerFunc(s.state)))
	mux.Handle("GET /metrics", s.auth(promhttp.HandlerFor(s.opts.Gatherer, promhttp.HandlerOpts{})))
	mux.Handle("/", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.Method+" "+r.URL.Path)
	})))
	return mux
}

// Serve serves the API on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	err := s.srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops the server and the metrics listener, waiting for in-flight
// requests until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	m := s.metrics
	s.mu.Unlock()
	err := s.srv.Shutdown(ctx)
	if m != nil {
		err = errors.Join(err, m.Shutdown(ctx))
	}
	return err
}

// auth requires "Authorization: Bearer <secret>" when a secret is set. The
// secrets are hashed first so the constant-time compare also hides length.
func (s *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Secret != "" {
			tok, ok := httpjson.Bearer(r)
			if _, match := httpjson.Matches(strings.TrimSpace(tok), s.secret[:]); !ok || !match {
				style.Challenge(w, "crackbox", "unauthorized",
					"missing or wrong bearer token: send Authorization: Bearer <admin.secret>")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// CheckListen refuses a non-loopback admin address when there is no secret.
// "localhost" counts as loopback; an empty host (all interfaces) does not.
func CheckListen(addr, secret string) error {
	if addr == "" || secret != "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("admin listen %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("admin listen %q: %w: set admin.secret (or CRACKBOX_ADMIN_SECRET), or listen on 127.0.0.1",
		addr, ErrInsecureListen)
}
