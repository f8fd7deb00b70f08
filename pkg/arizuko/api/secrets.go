package api

import (
	"net/http"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
)

// secretRoutes serves the write-only secrets and their rotation.
func (s *Server) secretRoutes() {
	s.handle("/v1/secrets", true, map[string]HandlerFunc{
		"GET": listedBy("scope", s.svc.ListSecrets),
		"POST": func(w http.ResponseWriter, r *http.Request) error {
			var in service.SecretIn
			if err := Decode(w, r, &in); err != nil {
				return err
			}
			return done(w, s.svc.SetSecret(r.Context(), in))
		},
		"DELETE": func(w http.ResponseWriter, r *http.Request) error {
			q := r.URL.Query()
			return done(w, s.svc.RemoveSecret(r.Context(), q.Get("scope"), q.Get("name")))
		},
	})
	s.handle("/v1/secrets/rotate", true, map[string]HandlerFunc{"POST": func(w http.ResponseWriter, r *http.Request) error {
		n, err := s.svc.RotateSecrets(r.Context())
		return reply(w, http.StatusOK, map[string]int{"resealed": n}, err)
	}})
}
