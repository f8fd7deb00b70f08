// Package api is arizuko's HTTP API: a JSON handler over service.Service with
// bearer-token auth and one error envelope, and a Client implementing
// service.Service over that API.
package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/crackbox/crackbox/pkg/service"
)

// MaxBody bounds a request body.
const MaxBody = 1 << 20

// CodeUnauthorized is the envelope code for a missing or wrong token.
const CodeUnauthorized = "unauthorized"

// Server serves the API over a Service.
type Server struct {
	svc    service.Service
	tokens []token
	mux    *http.ServeMux
}

type token struct {
	sum       [32]byte
	principal string
}

// NewServer maps each bearer token to the principal it authenticates.
func NewServer(svc service.Service, tokens map[string]string) *Server {
	s := &Server{svc: svc, mux: http.NewServeMux()}
	for t, p := range tokens {
		if t != "" {
			s.tokens = append(s.tokens, token{sha256.Sum256([]byte(t)), p})
		}
	}
	s.routes()
	return s
}

type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle registers path with one handler per method, so wrong methods and
// unknown paths get the same envelope as every other error.
func (s *Server) handle(path string, auth bool, methods map[string]handlerFunc) {
	s.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		h, ok := methods[r.Method]
		if !ok {
			allowed := make([]string, 0, len(methods))
			for m := range methods {
				allowed = append(allowed, m)
			}
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Sprintf("%s %s: method not allowed", r.Method, r.URL.Path))
			return
		}
		if auth {
			p, ok := s.authenticate(r)
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="arizuko"`)
				writeError(w, http.StatusUnauthorized, CodeUnauthorized, "missing or invalid bearer token (Authorization: Bearer <token>)")
				return
			}
			r = r.WithContext(service.WithPrincipal(r.Context(), p))
		}
		if err := h(w, r); err != nil {
			status, code := classify(err)
			if status >= 500 {
				slog.ErrorContext(r.Context(), "api error", "method", r.Method, "path", r.URL.Path, "err", err)
			}
			writeError(w, status, code, err.Error())
		}
	})
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func (s *Server) authenticate(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || tok == "" {
		return "", false
	}
	sum := sha256.Sum256([]byte(tok))
	principal, found := "", 0
	for _, t := range s.tokens {
		if subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1 {
			principal, found = t.principal, 1
		}
	}
	return principal, found == 1
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
	}
	return http.StatusInternalServerError, service.CodeInternal
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, service.Error{Code: code, Message: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if v == nil {
		return nil
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// decode reads one JSON object into v: known fields only, nothing after it.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return badRequest{fmt.Sprintf("body is larger than %d bytes", MaxBody)}
		}
		if errors.Is(err, io.EOF) {
			return badRequest{"body is empty: send a JSON object"}
		}
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return badRequest{"body has unknown field " + f}
		}
		return badRequest{"malformed JSON body: " + strings.TrimPrefix(err.Error(), "json: ")}
	}
	if dec.More() {
		return badRequest{"body has data after the JSON object"}
	}
	return nil
}
