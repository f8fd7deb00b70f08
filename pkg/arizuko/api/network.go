package api

import (
	"net/http"
)

// networkRoutes serves each folder's egress rules.
func (s *Server) networkRoutes() {
	s.handle("/v1/network", true, map[string]HandlerFunc{
		"GET": func(w http.ResponseWriter, r *http.Request) error {
			out, err := s.svc.ListNetwork(r.Context(), r.URL.Query().Get("folder"))
			return reply(w, http.StatusOK, out, err)
		},
		"POST": decoded(http.StatusOK, s.svc.SetNetworkRule),
		"DELETE": func(w http.ResponseWriter, r *http.Request) error {
			q := r.URL.Query()
			return done(w, s.svc.RemoveNetworkRule(r.Context(), q.Get("folder"), q.Get("host")))
		},
	})
}
