package api

import (
	"net/http"
)

// routingRoutes serves the routes that pick a folder for each message.
func (s *Server) routingRoutes() {
	s.handle("/v1/routes", true, map[string]HandlerFunc{
		"GET":  listed(s.svc.ListRoutes),
		"POST": decoded(http.StatusCreated, s.svc.AddRoute),
	})
	s.handle("/v1/routes/{id}", true, map[string]HandlerFunc{"DELETE": removedByID(s.svc.RemoveRoute)})
}
