// Package api is arizuko's HTTP API: a JSON handler over service.Service with
// bearer-token auth and one error envelope, and a Client implementing
// service.Service over that API.
package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/crackbox/crackbox/internal/httpjson"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
)

// MaxBody bounds a request body.
const MaxBody = 1 << 20

// CodeUnauthorized is the envelope code for a missing or wrong token.
const CodeUnauthorized = "unauthorized"

// Server serves the API over a Service.
type Server struct {
	svc    service.Service
	tokens []token
	auth   Authenticator
	mux    *http.ServeMux
	routes []Route
	notes  map[string]string // extra /health fields, set before serving
	log    *slog.Logger
}

type token struct {
	sum       [32]byte
	principal string
}

// Authenticator resolves a bearer token other than the data dir's own.
type Authenticator interface {
	Authenticate(ctx context.Context, secret string) (service.Caller, error)
}

// NewServer maps each admin bearer token to the principal it authenticates;
// WithTokens adds the scoped tokens of the store.
func NewServer(svc service.Service, tokens map[string]string) *Server {
	s := &Server{svc: svc, mux: http.NewServeMux(), log: slog.New(slog.DiscardHandler)}
	for t, p := range tokens {
		if t != "" {
			s.tokens = append(s.tokens, token{httpjson.Sum(t), p})
		}
	}
	s.register()
	return s
}

// WithTokens authenticates every token that is not an admin token of
// NewServer through a (the store's scoped tokens).
func (s *Server) WithTokens(a Authenticator) *Server {
	s.auth = a
	return s
}

// WithLog logs refused tokens and failed requests to log (NewServer discards them).
func (s *Server) WithLog(log *slog.Logger) *Server {
	s.log = log
	return s
}

// Note adds a field to /health: how the daemon runs where an operator must
// see it (NATS without credentials, say). Call it before serving.
func (s *Server) Note(key, value string) {
	if s.notes == nil {
		s.notes = map[string]string{}
	}
	s.notes[key] = value
}

// HandlerFunc serves one method of one route; an error becomes the envelope.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Handle registers path with one handler per method behind the bearer check
// and the route classes of classOf, for endpoints served beside the core API.
func (s *Server) Handle(path string, methods map[string]HandlerFunc) {
	s.handle(path, true, methods)
}

// Mount serves h for method and path without a token: pages whose content
// is public, and callbacks that check their own secret.
func (s *Server) Mount(method, path string, h http.Handler) {
	s.routes = append(s.routes, Route{Method: method, Path: path, Class: Public})
	s.mux.Handle(method+" "+path, h)
}

// Routes lists every method and path registered, with its class.
func (s *Server) Routes() []Route { return slices.Clone(s.routes) }

// handle registers path with one handler per method, so wrong methods and
// unknown paths get the same envelope as every other error.
func (s *Server) handle(path string, auth bool, methods map[string]HandlerFunc) {
	allowed := make([]string, 0, len(methods))
	for m, h := range methods {
		c := Public
		if auth {
			c = classOf(m, path)
		}
		s.routes = append(s.routes, Route{Method: m, Path: path, Class: c})
		allowed = append(allowed, m)
		s.mux.HandleFunc(m+" "+path, func(w http.ResponseWriter, r *http.Request) {
			if r.Method != m { // a GET pattern also matches HEAD
				notAllowed(w, r, allowed)
				return
			}
			s.serve(w, r, path, auth, c, h)
		})
	}
	slices.Sort(allowed)
	s.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) { notAllowed(w, r, allowed) })
}

func notAllowed(w http.ResponseWriter, r *http.Request, allowed []string) {
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Sprintf("%s %s: method not allowed", r.Method, r.URL.Path))
}

// serve checks the caller against the route's class, then runs h.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, path string, auth bool, class Class, h HandlerFunc) {
	if auth {
		c, err := s.authenticate(r)
		if err != nil && !errors.Is(err, service.ErrBadToken) {
			s.log.ErrorContext(r.Context(), "api auth", "err", err)
			writeError(w, http.StatusInternalServerError, service.CodeInternal, "token lookup failed")
			return
		}
		if err != nil {
			s.log.WarnContext(r.Context(), "api request refused: bad token", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
			httpjson.Compact.Challenge(w, "arizuko", CodeUnauthorized, "missing, invalid or revoked bearer token (Authorization: Bearer <token>)")
			return
		}
		if !class.allows(c.Kind) {
			writeError(w, http.StatusForbidden, service.CodeDenied, fmt.Sprintf("%s token %q may not %s %s", c.Kind, c.Name, r.Method, path))
			return
		}
		r = r.WithContext(service.WithCaller(r.Context(), c))
	}
	if err := h(w, r); err != nil {
		status, code := classify(err)
		if status >= 500 {
			s.log.ErrorContext(r.Context(), "api error", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		writeError(w, status, code, err.Error())
	}
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func (s *Server) authenticate(r *http.Request) (service.Caller, error) {
	tok, ok := httpjson.Bearer(r)
	if !ok || tok == "" {
		return service.Caller{}, service.ErrBadToken
	}
	sums := make([][]byte, len(s.tokens))
	for i := range s.tokens {
		sums[i] = s.tokens[i].sum[:]
	}
	if i, found := httpjson.Matches(tok, sums...); found {
		return service.Caller{Name: "admin", Kind: service.KindAdmin, Principal: s.tokens[i].principal}, nil
	}
	if s.auth == nil {
		return service.Caller{}, service.ErrBadToken
	}
	return s.auth.Authenticate(r.Context(), tok)
}

// badRequest marks decoding failures.
type badRequest struct{ msg string }

func (e badRequest) Error() string { return e.msg }

func classify(err error) (int, string) {
	var br badRequest
	if errors.As(err, &br) {
		return http.StatusBadRequest, service.CodeInvalid
	}
	code := service.Code(err)
	switch code {
	case service.CodeInvalid:
		return http.StatusBadRequest, code
	case service.CodeNotFound:
		return http.StatusNotFound, code
	case service.CodeConflict:
		return http.StatusConflict, code
	case service.CodeDenied:
		return http.StatusForbidden, code
	case service.CodeUnavailable:
		return http.StatusServiceUnavailable, code
	case service.CodeLimit:
		return http.StatusTooManyRequests, code
	}
	return http.StatusInternalServerError, service.CodeInternal
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	httpjson.Compact.Error(w, status, code, msg)
}

// WriteJSON writes v as the JSON answer with status.
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	return httpjson.Compact.Write(w, status, v)
}

// Decode reads one JSON object into v: known fields only, nothing after it,
// every string UTF-8.
func Decode(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := httpjson.ReadBody(w, r, MaxBody)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return badRequest{fmt.Sprintf("body is larger than %d bytes", MaxBody)}
		}
		return badRequest{"reading the body: " + err.Error()}
	}
	if f := invalidUTF8(body); f != "" {
		return badRequest{fmt.Sprintf("field %s is not valid UTF-8: send text as UTF-8", f)}
	}
	switch err := httpjson.DecodeBytes(body, v); {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF):
		return badRequest{"body is empty: send a JSON object"}
	case errors.Is(err, httpjson.ErrTrailing):
		return badRequest{"body has data after the JSON object"}
	default:
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return badRequest{"body has unknown field " + f}
		}
		return badRequest{"malformed JSON body: " + strings.TrimPrefix(err.Error(), "json: ")}
	}
}
