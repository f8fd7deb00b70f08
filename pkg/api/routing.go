package api

import (
	"net/http"

	"github.com/crackbox/crackbox/pkg/router"
)

// routingRoutes serves the routes that pick a folder for each message.
func (s *Server) routingRoutes() {
	s.handle("/v1/routes", true, map[string]HandlerFunc{
		"GET": func(w http.ResponseWriter, r *http.Request) error {
			out, err := s.svc.ListRoutes(r.Context())
			return list(w, out, err)
		},
		"POST": func(w http.ResponseWriter, r *http.Request) error {
			var rt router.Route
			if err := Decode(w, r, &rt); err != nil {
				return err
			}
			out, err := s.svc.AddRoute(r.Context(), rt)
			return reply(w, http.StatusCreated, out, err)
		},
	})
	s.handle("/v1/routes/{id}", true, map[string]HandlerFunc{"DELETE": func(w http.ResponseWriter, r *http.Request) error {
		id, err := idParam(r)
		if err != nil {
			return err
		}
		return done(w, s.svc.RemoveRoute(r.Context(), id))
	}})
}
